// autograd/function.h — Function<Derived>: how every differentiable op is written.
//
//   struct MulFn : Function<MulFn> {
//     static constexpr const char* name = "MulBackward0";
//     static Tensor forward(Context<MulFn>& ctx, const Tensor& a, const Tensor& b) {
//       ctx.save_for_backward({a, b});
//       return ops::binary(BinaryOp::Mul, a, b);
//     }
//     // d(a*b)/da = grad * b,  d(a*b)/db = grad * a
//     static TensorList backward(Context<MulFn>& ctx, const TensorList& grads) {
//       auto s = ctx.get_saved_variables();
//       return {grads[0] * s[1], grads[0] * s[0]};
//     }
//   };
//   Tensor y = MulFn::apply(a, b);
//
// apply() runs the forward on raw ops (core/ops); then, if grad mode is on and an input
// requires grad, it creates the outputs *with* their grad_fn — a CppNode<MulFn> holding the
// Context — as the creation contract demands (Note [The creation contract]). Backward
// formulas are written with the public differentiable ops, so with create_graph the
// backward itself is recorded and can be differentiated again.
// Non-tensor state goes in `ctx.saved`, of type Derived::Saved when Derived declares one.
// Read next: autograd/engine.h, autograd/functions/elementwise.cpp.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "autograd/anomaly_mode.h"
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "core/grad_mode.h"
#include "core/profiler_hooks.h"

namespace kiln::autograd {

namespace detail {

template <class F>
struct SavedData {
  struct type {};
};
template <class F>
  requires requires { typename F::Saved; }
struct SavedData<F> {
  using type = typename F::Saved;
};

using InputList = SmallVector<const Tensor*, 6>;

inline void collect_inputs(InputList& out, const Tensor& t) { out.push_back(&t); }
inline void collect_inputs(InputList& out, const TensorList& ts) {
  for (const Tensor& t : ts) out.push_back(&t);
}
template <class T>
void collect_inputs(InputList&, const T&) {}

inline bool requires_grad_of(const Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool requires_grad_of(const TensorList& ts) {
  return std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return requires_grad_of(t); });
}
template <class T>
bool requires_grad_of(const T&) {
  return false;
}

/// `raw` with autograd terms: the same TensorImpl when nothing else holds it yet, otherwise a
/// new one over the same memory and geometry.
Tensor with_history(Tensor&& raw, const std::shared_ptr<Node>& node, std::uint32_t output_nr);

}  // namespace detail

/// What a forward leaves for its backward: saved tensors, which inputs need a gradient, and
/// any plain data (`saved`).
template <class F>
class Context {
 public:
  typename detail::SavedData<F>::type saved{};

  /// Saves tensors for backward (inputs or the forward's own raw outputs). Does nothing when
  /// the op is not being recorded.
  void save_for_backward(TensorList tensors) {
    if (recording_) pending_ = std::move(tensors);
  }
  /// The saved tensors, checked against in-place modification and release.
  TensorList get_saved_variables() const {
    TensorList out;
    out.reserve(saved_variables_.size());
    const std::shared_ptr<Node> self = owner_ ? owner_->shared_from_this() : nullptr;
    for (const SavedVariable& s : saved_variables_) out.push_back(s.unpack(self));
    return out;
  }
  /// True when input `i` (counting tensor arguments in order, list elements one by one)
  /// needs a gradient.
  bool needs_input_grad(std::size_t i) const { return i < needs_.size() && needs_[i]; }
  using NeedsMask = SmallVector<bool, 8>;
  /// True while recording: the forward may skip work only backward needs.
  bool recording() const { return recording_; }

  // --- used by Function::apply and CppNode ---------------------------------------------------
  void begin(Node* owner, NeedsMask needs) {
    owner_ = owner;
    needs_ = std::move(needs);
    recording_ = true;
  }
  void finish(std::span<const Tensor> raw_outputs) {
    for (const Tensor& t : pending_) {
      int output_nr = -1;
      for (std::size_t i = 0; i < raw_outputs.size(); ++i) {
        if (t.defined() && t.is_same(raw_outputs[i])) output_nr = static_cast<int>(i);
      }
      saved_variables_.emplace_back(t, output_nr);
    }
    pending_.clear();
  }
  void release() {
    for (SavedVariable& s : saved_variables_) s.release();
  }
  const std::vector<SavedVariable>& saved_variables() const { return saved_variables_; }

 private:
  bool recording_ = false;
  Node* owner_ = nullptr;
  NeedsMask needs_;
  TensorList pending_;
  std::vector<SavedVariable> saved_variables_;
};

/// The node an op built with Function<F> leaves in the graph.
template <class F>
class CppNode final : public Node {
 public:
  Context<F> ctx;

  TensorList apply(TensorList&& grads) override {
    // An output that received no gradient contributes zero (PyTorch materialises grads for
    // custom Functions the same way), so formulas never see undefined gradients.
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() && is_floating_point(outputs_[i].dtype)) grads[i] = zero_grad(i);
    }
    TensorList result = F::backward(ctx, grads);
    KILN_CHECK(result.size() == next_edges_.size(), F::name, " returned ", result.size(),
               " gradients but the op has ", next_edges_.size(), " tensor inputs");
    for (std::size_t i = 0; i < result.size(); ++i) {
      if (!next_edges_[i].is_valid()) result[i] = Tensor();
    }
    return result;
  }
  const char* name() const override { return F::name; }
  void release_variables() override { ctx.release(); }
  std::vector<std::string> saved_summary() const override {
    std::vector<std::string> out;
    for (const SavedVariable& s : ctx.saved_variables()) {
      if (s.defined()) out.push_back(s.summary());
    }
    return out;
  }

 private:
  Tensor zero_grad(std::size_t i) const;
};

/// Zeros shaped like output `meta` (defined in autograd/function.cpp to keep this header free
/// of the creation API).
Tensor zeros_for(const OutputMeta& meta);

template <class F>
Tensor CppNode<F>::zero_grad(std::size_t i) const {
  return zeros_for(outputs_[i]);
}

/// Marks outputs computed under NoGradGuard from inputs that required grad (for explain()).
template <class Result>
void note_made_without_grad(const Result& out) {
  if constexpr (std::is_same_v<Result, Tensor>) {
    if (out.defined()) out.impl()->note_made_without_grad();
  } else {
    for (const Tensor& t : out) {
      if (t.defined()) t.impl()->note_made_without_grad();
    }
  }
}

/// The base of every differentiable op. See the example at the top of this file.
template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(const Args&... args) {
    // The profiler's one branch (Note [Profiler hook points]): null unless a Profile records.
    if (profiler::Observer* o = profiler::observer()) [[unlikely]] return profiled(o, args...);
    return dispatch(args...);
  }

 private:
  /// apply() under a profiler: the op's span, with its tensor inputs, around the whole pipeline
  /// (an autocast cast shows as an op inside it), and the number of the node it built.
  template <class... Args>
  static auto profiled(profiler::Observer* o, const Args&... args) {
    detail::InputList inputs;
    (detail::collect_inputs(inputs, args), ...);
    profiler::OpScope scope(o, Derived::name, std::span<const Tensor* const>(inputs.data(), inputs.size()));
    const std::uint64_t first_new = peek_sequence_nr();
    auto out = dispatch(args...);
    const Tensor* first = nullptr;
    if constexpr (std::is_same_v<decltype(out), Tensor>) {
      first = &out;
    } else if (!out.empty()) {
      first = &out.front();
    }
    // A node numbered from first_new on was made by this op (its forward runs without grad).
    if (first != nullptr && first->defined() && first->grad_fn() && first->grad_fn()->sequence_nr() >= first_new &&
        first->grad_fn()->sequence_nr() != UINT64_MAX) {
      scope.set_sequence_nr(static_cast<std::int64_t>(first->grad_fn()->sequence_nr()));
    }
    return out;
  }

  template <class... Args>
  static auto dispatch(const Args&... args) {
    // Step 1 of the pipeline: an op that declares an autocast policy has its inputs cast
    // first (Note [Autocast policies]), then runs with autocast excluded.
    if constexpr (requires { Derived::autocast_policy; }) {
      if (amp::detail::pending()) {
        return amp::run<Derived::autocast_policy>([](const auto&... a) { return record(a...); }, args...);
      }
    }
    return record(args...);
  }

  /// Step 2: the forward, and the graph node when an input requires grad.
  template <class... Args>
  static auto record(const Args&... args) {
    using Result = decltype(Derived::forward(std::declval<Context<Derived>&>(), args...));
    static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, TensorList>,
                  "forward must return a Tensor or a TensorList");
    // The common, unrecorded case decides without building anything.
    const bool any_requires_grad = (detail::requires_grad_of(args) || ...);
    if (!any_requires_grad || !is_grad_enabled()) {
      Context<Derived> ctx;
      Result out = Derived::forward(ctx, args...);
      if (any_requires_grad) note_made_without_grad(out);
      return out;
    }
    detail::InputList inputs;
    (detail::collect_inputs(inputs, args), ...);
    auto node = std::make_shared<CppNode<Derived>>();
    typename Context<Derived>::NeedsMask needs;
    for (const Tensor* t : inputs) {
      node->add_next_edge(gradient_edge(*t));
      needs.push_back(node->next_edges().back().is_valid());
    }
    node->ctx.begin(node.get(), std::move(needs));
    if (is_anomaly_enabled()) node->set_creation_trace(capture_trace(Derived::name));
    Result raw;
    {
      NoGradGuard no_grad;
      raw = Derived::forward(node->ctx, args...);
    }
    if constexpr (std::is_same_v<Result, Tensor>) {
      node->ctx.finish(std::span<const Tensor>(&raw, 1));
      const std::uint32_t output_nr = node->add_output(raw);
      return detail::with_history(std::move(raw), node, output_nr);
    } else {
      node->ctx.finish(raw);
      for (Tensor& r : raw) {
        const std::uint32_t output_nr = node->add_output(r);
        r = detail::with_history(std::move(r), node, output_nr);
      }
      return raw;
    }
  }
};

}  // namespace kiln::autograd
