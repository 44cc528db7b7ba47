// compile/recording_table.cpp — the CPU kernel table a capture hands to raw ops: each entry
// records its call (when made at the top level of the step, outside a region) and then calls
// the registered kernel. One template writes every entry; the table is built once, from the
// registered table, so an entry is present exactly when the real kernel is.
// See Note [Capturing a step] in compile/capture.h.
#include <utility>

#include "compile/capture.h"

namespace kiln::compiler {

namespace {

/// Where a table entry lives: a member of BackendKernels...
template <auto Member, KernelFamily F>
struct Field {
  static auto real() { return registered_kernels(DeviceType::CPU).*Member; }
  static KernelId id() { return {F, -1}; }
};
/// ...an element of one of its arrays (the elementwise and reduction ops)...
template <auto Member, KernelFamily F, std::size_t I>
struct Element {
  static auto real() { return (registered_kernels(DeviceType::CPU).*Member)[I]; }
  static KernelId id() { return {F, static_cast<int>(I)}; }
};
/// ...or a member of one of its kernel groups (conv2d.forward, ...).
template <auto Group, auto Member, KernelFamily F>
struct Grouped {
  static auto real() { return registered_kernels(DeviceType::CPU).*Group.*Member; }
  static KernelId id() { return {F, -1}; }
};

/// Keeps the depth right when a kernel throws.
class InKernel {
 public:
  explicit InKernel(Capture* c) : capture_(c) {
    if (capture_) capture_->enter_kernel();
  }
  ~InKernel() {
    if (capture_) capture_->leave_kernel();
  }

 private:
  Capture* capture_;
};

template <class Slot, class... A>
void recorded(A... args) {
  const auto real = Slot::real();
  Capture* capture = Capture::current();
  if (capture != nullptr && capture->records_calls()) {
    capture->record(std::make_unique<TypedCall<A...>>(Slot::id(), real, args...));
  }
  InKernel in(capture);
  real(args...);
}

template <class Slot, class Fn>
struct RecordedEntry;
template <class Slot, class... A>
struct RecordedEntry<Slot, void (*)(A...)> {
  static constexpr void (*value)(A...) = &recorded<Slot, A...>;
};

template <class Slot, class Fn>
void wrap(Fn& entry) {
  if (entry != nullptr) entry = RecordedEntry<Slot, Fn>::value;
}

template <auto Member, KernelFamily F, class Array, std::size_t... I>
void wrap_all(Array& entries, std::index_sequence<I...>) {
  (wrap<Element<Member, F, I>>(entries[I]), ...);
}

BackendKernels build() {
  using K = BackendKernels;
  using F = KernelFamily;
  BackendKernels t = registered_kernels(DeviceType::CPU);
  wrap_all<&K::unary, F::Unary>(t.unary, std::make_index_sequence<static_cast<std::size_t>(UnaryOp::kCount)>{});
  wrap_all<&K::binary, F::Binary>(t.binary, std::make_index_sequence<static_cast<std::size_t>(BinaryOp::kCount)>{});
  wrap_all<&K::reduce, F::Reduce>(t.reduce, std::make_index_sequence<static_cast<std::size_t>(ReduceOp::kCount)>{});
  wrap<Field<&K::where, F::Where>>(t.where);
  wrap<Field<&K::copy, F::Copy>>(t.copy);
  wrap<Field<&K::fill, F::Fill>>(t.fill);
  wrap<Field<&K::arange, F::Arange>>(t.arange);
  wrap<Field<&K::arg_reduce, F::ArgReduce>>(t.arg_reduce);
  wrap<Field<&K::var_mean, F::VarMean>>(t.var_mean);
  wrap<Field<&K::bmm, F::Bmm>>(t.bmm);
  wrap<Field<&K::bmm_bias, F::BmmBias>>(t.bmm_bias);
  wrap<Field<&K::cat, F::Cat>>(t.cat);
  wrap<Field<&K::index_select, F::IndexSelect>>(t.index_select);
  wrap<Field<&K::index_add, F::IndexAdd>>(t.index_add);
  wrap<Field<&K::gather, F::Gather>>(t.gather);
  wrap<Field<&K::scatter, F::Scatter>>(t.scatter);
  wrap<Field<&K::im2col, F::Im2Col>>(t.im2col);
  wrap<Field<&K::col2im, F::Col2Im>>(t.col2im);
  wrap<Field<&K::max_pool2d, F::MaxPool>>(t.max_pool2d);
  wrap<Field<&K::max_pool2d_backward, F::MaxPoolBackward>>(t.max_pool2d_backward);
  wrap<Field<&K::max_pool2d_backward_relu, F::MaxPoolBackwardRelu>>(t.max_pool2d_backward_relu);
  wrap<Grouped<&K::conv2d, &ConvKernels::forward, F::ConvForward>>(t.conv2d.forward);
  wrap<Grouped<&K::conv2d, &ConvKernels::backward_input, F::ConvBackwardInput>>(t.conv2d.backward_input);
  wrap<Grouped<&K::conv2d, &ConvKernels::backward_weight, F::ConvBackwardWeight>>(t.conv2d.backward_weight);
  wrap<Grouped<&K::conv2d, &ConvKernels::forward_relu, F::ConvForwardRelu>>(t.conv2d.forward_relu);
  wrap<Grouped<&K::conv2d, &ConvKernels::backward_weight_bias, F::ConvBackwardWeightBias>>(
      t.conv2d.backward_weight_bias);
  wrap<Grouped<&K::conv2d, &ConvKernels::forward_relu_max_pool, F::ConvForwardReluMaxPool>>(
      t.conv2d.forward_relu_max_pool);
  wrap<Grouped<&K::conv2d, &ConvKernels::backward_weight_bias_through_max_pool,
               F::ConvBackwardWeightBiasThroughMaxPool>>(t.conv2d.backward_weight_bias_through_max_pool);
  wrap<Grouped<&K::conv2d, &ConvKernels::backward_through_max_pool, F::ConvBackwardThroughMaxPool>>(
      t.conv2d.backward_through_max_pool);
  wrap<Grouped<&K::batch_norm, &BatchNormKernels::forward, F::BatchNormForward>>(t.batch_norm.forward);
  wrap<Grouped<&K::batch_norm, &BatchNormKernels::backward, F::BatchNormBackward>>(t.batch_norm.backward);
  wrap<Grouped<&K::pool2d, &PoolKernels::forward, F::PoolForward>>(t.pool2d.forward);
  wrap<Grouped<&K::pool2d, &PoolKernels::backward, F::PoolBackward>>(t.pool2d.backward);
  wrap<Grouped<&K::lstm_cell, &LstmCellKernels::forward, F::LstmCellForward>>(t.lstm_cell.forward);
  wrap<Grouped<&K::lstm_cell, &LstmCellKernels::backward, F::LstmCellBackward>>(t.lstm_cell.backward);
  wrap<Grouped<&K::softmax, &SoftmaxKernels::forward, F::SoftmaxForward>>(t.softmax.forward);
  wrap<Grouped<&K::softmax, &SoftmaxKernels::backward, F::SoftmaxBackward>>(t.softmax.backward);
  wrap<Grouped<&K::layer_norm, &LayerNormKernels::forward, F::LayerNormForward>>(t.layer_norm.forward);
  wrap<Grouped<&K::layer_norm, &LayerNormKernels::backward, F::LayerNormBackward>>(t.layer_norm.backward);
  wrap<Grouped<&K::attention, &AttentionKernels::forward, F::AttentionForward>>(t.attention.forward);
  wrap<Grouped<&K::attention, &AttentionKernels::backward, F::AttentionBackward>>(t.attention.backward);
  wrap<Field<&K::random, F::Random>>(t.random);
  wrap<Field<&K::adam, F::Adam>>(t.adam);
  wrap<Field<&K::sgd, F::Sgd>>(t.sgd);
  wrap<Field<&K::unscale, F::Unscale>>(t.unscale);
  return t;
}

// A kernel added to BackendKernels must be recorded above too (and named in KernelFamily):
// this tripwire counts the table's pointers — the three op arrays, 18 single kernels, 20 in
// the seven groups, 4 after the route flags — and the flags' bytes, padded to a pointer.
constexpr std::size_t kPointers = static_cast<std::size_t>(UnaryOp::kCount) +
                                  static_cast<std::size_t>(BinaryOp::kCount) +
                                  static_cast<std::size_t>(ReduceOp::kCount) + 18 + 20 + 4;
constexpr std::size_t kFlagBytes = (static_cast<std::size_t>(backends::OpFamily::kCount) + sizeof(void*) - 1) /
                                   sizeof(void*) * sizeof(void*);
static_assert(sizeof(BackendKernels) == kPointers * sizeof(void*) + kFlagBytes,
              "BackendKernels changed: record the new kernel in compile/recording_table.cpp");

}  // namespace

const BackendKernels& recording_kernels() {
  static const BackendKernels table = build();
  return table;
}

}  // namespace kiln::compiler
