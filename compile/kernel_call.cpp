// compile/kernel_call.cpp — kernel names, which arguments each kernel writes, and printing a
// call's other arguments (see compile/kernel_call.h).
#include "compile/kernel_call.h"

#include <cctype>

namespace kiln::compiler {

namespace {

const char* family_name(KernelFamily f) {
  switch (f) {
    case KernelFamily::Unary: return "unary";
    case KernelFamily::Binary: return "binary";
    case KernelFamily::Reduce: return "reduce";
    case KernelFamily::Where: return "where";
    case KernelFamily::Copy: return "copy";
    case KernelFamily::Fill: return "fill";
    case KernelFamily::Arange: return "arange";
    case KernelFamily::ArgReduce: return "arg_reduce";
    case KernelFamily::VarMean: return "var_mean";
    case KernelFamily::Bmm: return "bmm";
    case KernelFamily::BmmBias: return "bmm_bias";
    case KernelFamily::Cat: return "cat";
    case KernelFamily::IndexSelect: return "index_select";
    case KernelFamily::IndexAdd: return "index_add";
    case KernelFamily::Gather: return "gather";
    case KernelFamily::Scatter: return "scatter";
    case KernelFamily::Im2Col: return "im2col";
    case KernelFamily::Col2Im: return "col2im";
    case KernelFamily::MaxPool: return "max_pool2d";
    case KernelFamily::MaxPoolBackward: return "max_pool2d_backward";
    case KernelFamily::MaxPoolBackwardRelu: return "max_pool2d_backward_relu";
    case KernelFamily::ConvForward: return "conv2d.forward";
    case KernelFamily::ConvForwardRelu: return "conv2d.forward_relu";
    case KernelFamily::ConvForwardReluMaxPool: return "conv2d.forward_relu_max_pool";
    case KernelFamily::ConvBackwardInput: return "conv2d.backward_input";
    case KernelFamily::ConvBackwardWeight: return "conv2d.backward_weight";
    case KernelFamily::ConvBackwardWeightBias: return "conv2d.backward_weight_bias";
    case KernelFamily::ConvBackwardWeightBiasThroughMaxPool: return "conv2d.backward_weight_bias_through_max_pool";
    case KernelFamily::ConvBackwardThroughMaxPool: return "conv2d.backward_through_max_pool";
    case KernelFamily::BatchNormForward: return "batch_norm.forward";
    case KernelFamily::BatchNormBackward: return "batch_norm.backward";
    case KernelFamily::PoolForward: return "pool2d.forward";
    case KernelFamily::PoolBackward: return "pool2d.backward";
    case KernelFamily::LstmCellForward: return "lstm_cell.forward";
    case KernelFamily::LstmCellBackward: return "lstm_cell.backward";
    case KernelFamily::SoftmaxForward: return "softmax.forward";
    case KernelFamily::SoftmaxBackward: return "softmax.backward";
    case KernelFamily::LayerNormForward: return "layer_norm.forward";
    case KernelFamily::LayerNormBackward: return "layer_norm.backward";
    case KernelFamily::AttentionForward: return "attention.forward";
    case KernelFamily::AttentionBackward: return "attention.backward";
    case KernelFamily::Random: return "random";
    case KernelFamily::Adam: return "adam";
    case KernelFamily::Sgd: return "sgd";
    case KernelFamily::Unscale: return "unscale";
    case KernelFamily::ElementwiseChain: return "elementwise_chain";
    case KernelFamily::Fused: return "fused";
    case KernelFamily::kCount: break;
  }
  return "?";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* reduce_name(int op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Amax: return "amax";
    case ReduceOp::Amin: return "amin";
    case ReduceOp::kCount: break;
  }
  return "?";
}

/// The tensor positions each family writes, and the written ones it also reads first, as bits.
struct Effects {
  unsigned written;
  unsigned updated;
};

constexpr unsigned bits(std::initializer_list<int> positions) {
  unsigned out = 0;
  for (int p : positions) out |= 1u << p;
  return out;
}

Effects effects_of(KernelFamily f) {
  switch (f) {
    case KernelFamily::ArgReduce: return {bits({0, 1}), 0};
    case KernelFamily::VarMean: return {bits({0, 1}), 0};
    case KernelFamily::IndexAdd: return {bits({0}), bits({0})};
    case KernelFamily::Scatter: return {bits({0}), bits({0})};
    case KernelFamily::Col2Im: return {bits({0}), bits({0})};  // sums windows into an output zeroed before
    case KernelFamily::MaxPool: return {bits({0, 1}), 0};
    case KernelFamily::ConvBackwardWeightBias: return {bits({0, 1}), 0};
    case KernelFamily::ConvForwardReluMaxPool: return {bits({0, 1}), 0};
    case KernelFamily::ConvBackwardWeightBiasThroughMaxPool: return {bits({0, 1}), 0};
    case KernelFamily::ConvBackwardThroughMaxPool: return {bits({0, 1, 2}), 0};
    case KernelFamily::BatchNormForward: return {bits({0, 1, 2, 6, 7}), bits({6, 7})};  // running stats move
    case KernelFamily::BatchNormBackward: return {bits({0, 1, 2}), 0};
    case KernelFamily::LstmCellForward: return {bits({0, 1, 2}), 0};
    case KernelFamily::LstmCellBackward: return {bits({0, 1, 2}), bits({1, 2})};
    case KernelFamily::LayerNormForward: return {bits({0, 1, 2}), 0};
    case KernelFamily::LayerNormBackward: return {bits({0, 1, 2}), 0};
    case KernelFamily::AttentionForward: return {bits({0, 1}), 0};
    case KernelFamily::AttentionBackward: return {bits({0, 1, 2}), 0};
    case KernelFamily::Adam: return {bits({0, 2, 3, 4}), bits({0, 2, 3, 4})};
    case KernelFamily::Sgd: return {bits({0, 2}), bits({0, 2})};
    case KernelFamily::Unscale: return {bits({0, 1}), bits({0, 1})};
    default: return {bits({0}), 0};
  }
}

std::vector<bool> mark(unsigned positions, std::size_t count) {
  std::vector<bool> out(count, false);
  for (std::size_t i = 0; i < count && i < 32; ++i) out[i] = (positions >> i) & 1u;
  return out;
}

}  // namespace

bool computes_from_inputs_alone(KernelFamily family) {
  switch (family) {
    case KernelFamily::Fill:
    case KernelFamily::Arange:
    case KernelFamily::Copy:
    case KernelFamily::Unary:
    case KernelFamily::Binary:
    case KernelFamily::Where:
    case KernelFamily::Cat:
    case KernelFamily::Reduce: return true;
    default: return false;
  }
}

std::string kernel_name(KernelId id) {
  switch (id.family) {
    case KernelFamily::Unary: return std::string("unary.") + lower(op_name(static_cast<UnaryOp>(id.op)));
    case KernelFamily::Binary: return std::string("binary.") + lower(op_name(static_cast<BinaryOp>(id.op)));
    case KernelFamily::Reduce: return std::string("reduce.") + reduce_name(id.op);
    default: return family_name(id.family);
  }
}

std::vector<bool> written_arguments(KernelFamily family, std::size_t count) {
  return mark(effects_of(family).written, count);
}

std::vector<bool> updated_arguments(KernelFamily family, std::size_t count) {
  return mark(effects_of(family).updated, count);
}

std::vector<const Tensor*> KernelCall::tensors() const {
  std::vector<const Tensor*> out;
  for (Tensor* t : const_cast<KernelCall*>(this)->tensors()) out.push_back(t);
  return out;
}

std::vector<bool> KernelCall::writes() const { return written_arguments(id_.family, tensors().size()); }
std::vector<bool> KernelCall::updates() const { return updated_arguments(id_.family, tensors().size()); }

namespace detail {

Tensor store(const Tensor& t) {
  if (!t.defined()) return t;
  const TensorImpl& r = *t.impl();
  return Tensor(std::make_shared<TensorImpl>(r.storage(), r.sizes().vec(), r.strides().vec(), r.storage_offset(),
                                             r.dtype(), AutogradTerms{}, r.provenance()));
}

TensorList store(const TensorList& ts) {
  TensorList out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(store(t));
  return out;
}

void describe(std::ostream& os, const Scalar& s) { os << s; }

void describe(std::ostream& os, const std::vector<std::int64_t>& dims) {
  os << "[";
  for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << "]";
}

void describe(std::ostream& os, const Im2ColGeometry& g) {
  os << "k" << g.kernel_h << "x" << g.kernel_w << " s" << g.stride_h;
  if (g.stride_w != g.stride_h) os << "x" << g.stride_w;
  os << " p" << g.pad_h;
  if (g.pad_w != g.pad_h) os << "x" << g.pad_w;
  if (g.dilation_h != 1 || g.dilation_w != 1) os << " d" << g.dilation_h << "x" << g.dilation_w;
}

void describe(std::ostream& os, const AdamStep& s) {
  os << "lr " << s.lr << ", betas (" << s.beta1 << ", " << s.beta2 << "), weight_decay " << s.weight_decay;
}

void describe(std::ostream& os, const SgdStep& s) {
  os << "lr " << s.lr << ", momentum " << s.momentum << ", weight_decay " << s.weight_decay;
}

void describe(std::ostream& os, PoolMode m) {
  os << (m == PoolMode::Max ? "max" : m == PoolMode::AverageCountingPadding ? "avg" : "avg (skipping padding)");
}

void describe(std::ostream& os, RandomKind k) {
  switch (k) {
    case RandomKind::Uniform: os << "uniform"; break;
    case RandomKind::Normal: os << "normal"; break;
    case RandomKind::IntRange: os << "integers"; break;
    case RandomKind::Bernoulli: os << "bernoulli"; break;
  }
}

}  // namespace detail

}  // namespace kiln::compiler
