// compile/kernel_call.h — one kernel call as a captured step recorded it: which kernel (its
// family in the kernel table, and for the elementwise and reduction families which op), every
// argument it was given, kept so that the call can be made again, and which of its tensors it
// writes. The tensors are ordinary Tensors, so a pass can point a call at other memory (the
// arena of Note [One arena per step]) or replace a run of calls by a fused one.
//   call.run();                          // the kernel again, on the same (or rebound) tensors
//   for (Tensor* t : call.tensors()) ... // the arguments a pass may rebind
// Read next: compile/graph.h (calls in order, with the rest of a step).
#pragma once

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/kernel_params.h"
#include "core/kernels.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln::compiler {

/// The kernel table's members (core/kernels.h), plus the kernels passes make.
enum class KernelFamily : std::uint8_t {
  Unary, Binary, Reduce, Where, Copy, Fill, Arange, ArgReduce, VarMean, Bmm, BmmBias, Cat, IndexSelect, IndexAdd,
  Gather, Scatter, Im2Col, Col2Im, MaxPool, MaxPoolBackward, MaxPoolBackwardRelu, ConvForward, ConvForwardRelu,
  ConvForwardReluMaxPool, ConvBackwardInput, ConvBackwardWeight, ConvBackwardWeightBias,
  ConvBackwardWeightBiasThroughMaxPool, ConvBackwardThroughMaxPool,
  BatchNormForward, BatchNormBackward, PoolForward, PoolBackward, LstmCellForward, LstmCellBackward,
  SoftmaxForward, SoftmaxBackward, LayerNormForward, LayerNormBackward, AttentionForward, AttentionBackward, Random, Adam, Sgd, Unscale,
  ElementwiseChain,  // made by fuse_elementwise_chains
  Fused,  // made by a pass (compile/passes/)
  kCount
};

/// A kernel's identity: its family, and for Unary, Binary and Reduce the op (else -1).
struct KernelId {
  KernelFamily family = KernelFamily::Fused;
  int op = -1;
  bool is(UnaryOp u) const { return family == KernelFamily::Unary && op == static_cast<int>(u); }
  bool is(BinaryOp b) const { return family == KernelFamily::Binary && op == static_cast<int>(b); }
  bool is(ReduceOp r) const { return family == KernelFamily::Reduce && op == static_cast<int>(r); }
};

/// "conv2d.forward", "binary.mul", ...
std::string kernel_name(KernelId id);

/// Whether a kernel of `family` computes its outputs from its inputs alone (fill, arange, copy,
/// the elementwise families, where, cat, reduce): not a random draw, an optimizer's update or a
/// pass's fused kernel. The calls fold_constants and eliminate_common_subexpressions may drop.
bool computes_from_inputs_alone(KernelFamily family);

/// Which tensor arguments (in order, a list's elements one by one) a kernel of `family`
/// writes, and which of those it also reads (accumulating or updating in place). `count` is
/// the call's number of tensor arguments.
std::vector<bool> written_arguments(KernelFamily family, std::size_t count);
std::vector<bool> updated_arguments(KernelFamily family, std::size_t count);

/// A recorded call. Concrete calls are TypedCall<Args...> below; a fused kernel made by a pass
/// may be any subclass.
class KernelCall {
 public:
  explicit KernelCall(KernelId id) : id_(id) {}
  virtual ~KernelCall() = default;
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  /// Calls the kernel with the arguments as they are now.
  virtual void run() const = 0;
  /// The tensor arguments, in order; a pass may assign through them.
  virtual std::vector<Tensor*> tensors() = 0;
  std::vector<const Tensor*> tensors() const;
  /// The other arguments, as text for graph printing ("dims [1], k3x3 s1 p1").
  virtual std::string attributes() const = 0;
  /// For each tensor argument: written by the kernel / also read by it before.
  virtual std::vector<bool> writes() const;
  virtual std::vector<bool> updates() const;
  virtual std::string name() const { return kernel_name(id_); }

  KernelId id() const { return id_; }

 private:
  KernelId id_;
};

namespace detail {

template <class A>
struct Stored {
  using type = std::decay_t<A>;
};
template <>
struct Stored<IntArrayRef> {
  using type = std::vector<std::int64_t>;
};

inline std::vector<std::int64_t> store(IntArrayRef a) { return {a.begin(), a.end()}; }
/// The graph's own handle on a tensor argument: a TensorImpl of its own over the same memory
/// (sizes, strides, offset, dtype), so that recording a call adds no reference to a tensor the
/// step's code holds. Eager code may ask whether anyone else holds a tensor: AccumulateGrad
/// takes a gradient without copying it only when nothing else does, and a capture must see
/// what an eager run sees (else it records a clone eager code never makes).
Tensor store(const Tensor& t);
TensorList store(const TensorList& ts);
template <class A>
std::decay_t<A> store(const A& a) {
  return a;
}
inline IntArrayRef pass(const std::vector<std::int64_t>& v) { return IntArrayRef(v); }
template <class A>
const A& pass(const A& a) {
  return a;
}

void describe(std::ostream& os, const Scalar& s);
void describe(std::ostream& os, const std::vector<std::int64_t>& dims);
void describe(std::ostream& os, const Im2ColGeometry& g);
void describe(std::ostream& os, const AdamStep& s);
void describe(std::ostream& os, const SgdStep& s);
void describe(std::ostream& os, PoolMode m);
void describe(std::ostream& os, RandomKind k);
template <class T>
  requires std::is_arithmetic_v<T>
void describe(std::ostream& os, T v) {
  os << v;
}

}  // namespace detail

/// A call of a kernel of signature void(A...), its arguments held by value.
template <class... A>
class TypedCall final : public KernelCall {
 public:
  using Fn = void (*)(A...);
  TypedCall(KernelId id, Fn fn, A... args) : KernelCall(id), fn_(fn), args_(detail::store(args)...) {}

  void run() const override {
    std::apply([this](const auto&... stored) { fn_(detail::pass(stored)...); }, args_);
  }
  std::vector<Tensor*> tensors() override {
    std::vector<Tensor*> out;
    std::apply([&out](auto&... stored) { (collect(out, stored), ...); }, args_);
    return out;
  }
  /// The same arguments given to another kernel of the same signature (a pass's fused one).
  std::unique_ptr<TypedCall> retarget(KernelId id, Fn fn) const {
    auto copy = std::unique_ptr<TypedCall>(new TypedCall(id, fn));
    copy->args_ = args_;
    return copy;
  }
  /// The arguments as stored (an IntArrayRef as a vector): what a pass reads to match a call.
  const auto& arguments() const { return args_; }
  std::string attributes() const override {
    std::ostringstream os;
    bool first = true;
    std::apply([&](const auto&... stored) { (describe_one(os, first, stored), ...); }, args_);
    return os.str();
  }

 private:
  static void collect(std::vector<Tensor*>& out, Tensor& t) { out.push_back(&t); }
  static void collect(std::vector<Tensor*>& out, TensorList& ts) {
    for (Tensor& t : ts) out.push_back(&t);
  }
  template <class T>
  static void collect(std::vector<Tensor*>&, T&) {}

  TypedCall(KernelId id, Fn fn) : KernelCall(id), fn_(fn) {}

  template <class T>
  static void describe_one(std::ostream& os, bool& first, const T& value) {
    if constexpr (!std::is_same_v<T, Tensor> && !std::is_same_v<T, TensorList>) {
      if (!first) os << ", ";
      first = false;
      detail::describe(os, value);
    }
  }

  Fn fn_;
  std::tuple<typename detail::Stored<A>::type...> args_;
};

}  // namespace kiln::compiler
