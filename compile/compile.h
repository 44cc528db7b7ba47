// compile/compile.h — kiln::compile: a training step captured once as a graph, then replayed.
// The first call of each new kind (shapes, dtypes and devices of the inputs, grad mode,
// autocast, thread count, default dtype: the guard; the modes and hooks of the modules it
// called: its conditions) runs the step eagerly while recording it (Note [Capturing a step]);
// the graph goes through the passes (compile/passes.h) and later calls of the same kind replay it. A
// step the capture cannot replay (it reads a computed value on the host, runs on a GPU, ...)
// keeps running eagerly, with one warning that says why.
//
//   auto step = kiln::compile([&](const Tensor& x, const Tensor& y) {
//     opt.zero_grad();
//     Tensor loss = cross_entropy(model.forward(x), y);
//     loss.backward();
//     opt.step();
//     return loss;
//   });
//   for (auto& batch : loader) loss_sum += step(batch.data, batch.target).item<double>();
//   std::cout << step.graph().print();
//
// A compiled step returns values without autograd history. A replay lends the graph's own
// output buffers, and the next replay first copies out any that the caller still holds, so a
// kept loss keeps its value (Note [What a replay returns]); inputs the step writes in place
// are written back into the caller's tensors, as the eager step writes them, and an input that
// requires grad gets its .grad as eagerly (Note [A step's inputs]).
// Read next: compile/capture.h, compile/graph.h, compile/passes.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "compile/graph.h"
#include "compile/input_buffers.h"

namespace kiln {

namespace compiler {

struct CompileOptions {
  /// The passes to run, as KILN_COMPILE_PASSES takes them; "" reads that variable ("all" when unset).
  std::string passes{};
  /// Graphs kept per compiled step, one per guard; a further kind of call runs eagerly.
  std::size_t cache_limit = 8;
};

/// What a captured graph assumed about a call.
struct Guard {
  struct Input {
    std::vector<std::int64_t> sizes, strides;
    DType dtype = kFloat32;
    Device device = kCPU;
    bool requires_grad = false;
    bool leaf = true;           // where it requires grad: a non-leaf runs eagerly
    bool grad_hooks = false;    // a leaf's hooks on its gradient (they run eagerly)
    bool grad_defined = false;  // a leaf's .grad is there to add to (Note [A step's inputs])
    bool parameter = false;     // a module's parameter (runs eagerly: Note [A step's inputs])
    SharedMemory shared{};      // the earlier input whose memory it shares (Note [A step's inputs])
    bool operator==(const Input&) const = default;
  };
  std::vector<Input> inputs;
  bool grad_enabled = true;
  bool autocast_cpu = false, autocast_cuda = false;
  DType autocast_cpu_dtype = kBFloat16, autocast_cuda_dtype = kFloat16;
  int threads = 0;
  /// What a number or an integer tensor becomes in a floating op, and what factories make.
  DType default_dtype = kFloat32;
  /// Which op families take the library route (backends::OpKernelsGuard), a bit per family on
  /// the CPU, then on CUDA: the replay makes the calls of the route it was captured on.
  std::uint32_t library_routes = 0;
  /// Anomaly detection checks each backward result on the host; a graph captured without it
  /// would skip the checks.
  bool anomaly_detection = false;
  /// Whether saved-tensors hooks are installed (a step that packs through them runs eagerly).
  bool saved_tensors_hooks = false;
  /// TensorImpl::requires_grad_changes() when captured: a parameter frozen or unfrozen since
  /// changes which gradients the step computes.
  std::uint64_t requires_grad_changes = 0;
  /// capture::held_state_changes() when captured: a module moved by to() since holds new
  /// tensors; a leaf's gradient hooks changed since run, or no longer run, in its backward.
  std::uint64_t held_state_changes = 0;
  bool operator==(const Guard&) const = default;
  /// The guard of a call with `inputs` made now.
  static Guard of(const std::vector<Tensor>& inputs);
  /// "inputs Float32[128, 784], Int64[128]; grad on; autocast off; 2 threads"
  std::string describe() const;
};

/// Counters of one compiled step.
struct CompileStats {
  std::int64_t captures = 0;     // eager runs that recorded a graph
  std::int64_t replays = 0;      // calls that replayed one
  std::int64_t eager_calls = 0;  // calls run eagerly (the capture failed, or the cache was full)
};

/// The machinery behind kiln::compile, on type-erased steps (vectors of tensors in and out).
class CompiledStep {
 public:
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  CompiledStep(Body body, CompileOptions options);
  ~CompiledStep();
  CompiledStep(CompiledStep&&) noexcept;
  CompiledStep& operator=(CompiledStep&&) noexcept;

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  /// The graph of the last call that captured or replayed one (an error before any).
  const Graph& graph() const;
  const CompileStats& stats() const;
  /// Whether the last call replayed a graph (false: it captured, or ran eagerly).
  bool last_call_replayed() const;
  /// Why the last call's kind of call runs eagerly ("" when it does not).
  const std::string& eager_reason() const;
  /// Forgets every graph: the next call captures again (after changing what a step does in a
  /// way the guard cannot see, such as a dropout probability in a layer's options).
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace compiler

/// A step function compiled: call it as the function itself.
template <class Fn>
class Compiled {
 public:
  Compiled(Fn fn, compiler::CompileOptions options)
      : fn_(std::make_shared<Fn>(std::move(fn))), step_(make_body(fn_), std::move(options)) {}

  template <class... Inputs>
    requires(std::is_convertible_v<const Inputs&, const Tensor&> && ...)
  auto operator()(const Inputs&... inputs) {
    using Result = std::invoke_result_t<Fn&, const Inputs&...>;
    static_assert(sizeof...(Inputs) == arity_, "a compiled step is called with as many tensors as it takes");
    std::vector<Tensor> outputs = step_(std::vector<Tensor>{Tensor(inputs)...});
    if constexpr (std::is_void_v<Result>) {
      return;
    } else if constexpr (std::is_same_v<Result, TensorList>) {
      return outputs;
    } else {
      static_assert(std::is_convertible_v<Result, Tensor>, "a compiled step returns a Tensor, a TensorList or nothing");
      return outputs.front();
    }
  }

  const compiler::Graph& graph() const { return step_.graph(); }
  const compiler::CompileStats& stats() const { return step_.stats(); }
  bool last_call_replayed() const { return step_.last_call_replayed(); }
  const std::string& eager_reason() const { return step_.eager_reason(); }
  void reset() { step_.reset(); }

 private:
  template <class T>
  struct Arity;
  template <class C, class R, class... A>
  struct Arity<R (C::*)(A...) const> {
    static constexpr std::size_t value = sizeof...(A);
  };
  template <class C, class R, class... A>
  struct Arity<R (C::*)(A...)> {
    static constexpr std::size_t value = sizeof...(A);
  };
  static constexpr std::size_t arity_ = Arity<decltype(&Fn::operator())>::value;

  static compiler::CompiledStep::Body make_body(std::shared_ptr<Fn> fn) {
    return [fn](const std::vector<Tensor>& in) {
      return call(*fn, in, std::make_index_sequence<arity_>{});
    };
  }
  template <std::size_t... I>
  static std::vector<Tensor> call(Fn& fn, const std::vector<Tensor>& in, std::index_sequence<I...>) {
    using Result = decltype(fn(in[I]...));
    if constexpr (std::is_void_v<Result>) {
      fn(in[I]...);
      return {};
    } else if constexpr (std::is_same_v<Result, TensorList>) {
      return fn(in[I]...);
    } else {
      return {Tensor(fn(in[I]...))};
    }
  }

  std::shared_ptr<Fn> fn_;
  compiler::CompiledStep step_;
};

/// Compiles a step function of tensors (a lambda taking `const Tensor&`s and returning a
/// Tensor, a TensorList or nothing). See the file header.
template <class Fn>
Compiled<Fn> compile(Fn fn, compiler::CompileOptions options = {}) {
  return Compiled<Fn>(std::move(fn), std::move(options));
}

}  // namespace kiln
