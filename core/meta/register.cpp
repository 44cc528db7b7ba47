// core/meta/register.cpp — the meta backend's registration list: a kernel table whose kernels
// compute nothing, so raw ops call their kernels on meta tensors exactly as on the CPU or CUDA,
// with no check of their own (Note [The meta device is a backend]).
// Read next: core/kernels.cpp (which table a meta tensor gets).
#include <array>
#include <cstddef>

#include "core/kernels.h"

namespace kiln::meta {

// Note [The meta device is a backend]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A meta tensor has a shape, a dtype and a storage that holds no bytes. Raw ops treat it as
// any other device: they validate, allocate their outputs and the copies their kernels read
// (a dtype conversion, a contiguous copy, a CPU scalar moved over), then call the kernel of
// the tensor's device, here one that returns at once. So a meta run allocates what a real run
// allocates, in the same order, and memory::plan hears the real allocations rather than a
// second account of them kept inside each op (Note [Planning on the meta device]).
// The table a meta tensor gets mirrors the device it stands for (core/meta_allocations.h):
// a slot is filled where that device has a kernel and empty where it has none, because ops
// choose a route by what is present (a fused softmax, Adam's one-pass update) and a planned
// step must take the route the real one takes. Standing for nothing, it mirrors the CPU.
// Standing for the CPU, the kernels that take scratch memory of their own (the convolutions,
// the matrix products, batch norm, which is made of ops) are the CPU's: given meta tensors
// they allocate their scratch and compute nothing, so the plan counts it too. A build without
// CUDA still plans CUDA steps (memory::plan for a GPU this machine lacks): it cannot know
// CUDA's optional kernels, so meta tensors standing for CUDA there take the composite routes,
// over the kernels every backend has.
// What a meta run cannot do is read a value: index bounds, a target class, an integer power's
// sign and nonzero's count are checked only where there is data (ops::has_data).

namespace {

template <class Kernel>
struct Shapeless;

/// A kernel of the given signature that computes nothing: its outputs are meta tensors.
template <class... Args>
struct Shapeless<void (*)(Args...)> {
  static void kernel(Args...) {}
};

template <class Kernel>
void mirror(Kernel& slot, Kernel real) {
  slot = real == nullptr ? nullptr : &Shapeless<Kernel>::kernel;
}

template <class Kernel, std::size_t N>
void mirror(std::array<Kernel, N>& slots, const std::array<Kernel, N>& real) {
  for (std::size_t i = 0; i < N; ++i) mirror(slots[i], real[i]);
}

// Every slot of BackendKernels is mirrored below: a slot added to the table without a line
// here changes its size and stops the build.
constexpr std::size_t kSingleSlots = 42;
constexpr std::size_t kArraySlots = static_cast<std::size_t>(UnaryOp::kCount) +
                                    static_cast<std::size_t>(BinaryOp::kCount) +
                                    static_cast<std::size_t>(ReduceOp::kCount);
constexpr std::size_t kPreferencesBytes =
    (sizeof(BackendKernels{}.prefers_op_kernels) + alignof(void*) - 1) / alignof(void*) * alignof(void*);
static_assert(sizeof(BackendKernels) == (kSingleSlots + kArraySlots) * sizeof(void*) + kPreferencesBytes,
              "a kernel slot was added to BackendKernels: mirror it in meta::register_kernels");

}  // namespace

BackendKernels kernels_every_backend_has(const BackendKernels& cpu) {
  BackendKernels t = cpu;
  t.var_mean = nullptr;
  t.bmm_bias = nullptr;
  t.max_pool2d_backward = nullptr;
  t.max_pool2d_backward_relu = nullptr;
  t.conv2d = {};
  t.batch_norm = {};
  t.pool2d = {};
  t.lstm_cell = {};
  t.softmax = {};
  t.layer_norm = {};
  t.attention = {};
  t.prefers_op_kernels = {};
  t.adam = nullptr;
  t.sgd = nullptr;
  return t;
}

void register_kernels(BackendKernels& t, const BackendKernels& real, bool plans_scratch) {
  mirror(t.unary, real.unary);
  mirror(t.binary, real.binary);
  mirror(t.reduce, real.reduce);
  mirror(t.where, real.where);
  mirror(t.copy, real.copy);
  mirror(t.fill, real.fill);
  mirror(t.arange, real.arange);
  mirror(t.arg_reduce, real.arg_reduce);
  mirror(t.var_mean, real.var_mean);
  mirror(t.bmm, real.bmm);
  mirror(t.bmm_bias, real.bmm_bias);
  mirror(t.cat, real.cat);
  mirror(t.index_select, real.index_select);
  mirror(t.index_add, real.index_add);
  mirror(t.gather, real.gather);
  mirror(t.scatter, real.scatter);
  mirror(t.im2col, real.im2col);
  mirror(t.col2im, real.col2im);
  mirror(t.max_pool2d, real.max_pool2d);
  mirror(t.max_pool2d_backward, real.max_pool2d_backward);
  mirror(t.max_pool2d_backward_relu, real.max_pool2d_backward_relu);
  mirror(t.conv2d.forward, real.conv2d.forward);
  mirror(t.conv2d.backward_input, real.conv2d.backward_input);
  mirror(t.conv2d.backward_weight, real.conv2d.backward_weight);
  mirror(t.conv2d.forward_relu, real.conv2d.forward_relu);
  mirror(t.conv2d.backward_weight_bias, real.conv2d.backward_weight_bias);
  mirror(t.conv2d.forward_relu_max_pool, real.conv2d.forward_relu_max_pool);
  mirror(t.conv2d.backward_weight_bias_through_max_pool, real.conv2d.backward_weight_bias_through_max_pool);
  mirror(t.conv2d.backward_through_max_pool, real.conv2d.backward_through_max_pool);
  mirror(t.batch_norm.forward, real.batch_norm.forward);
  mirror(t.batch_norm.backward, real.batch_norm.backward);
  mirror(t.pool2d.forward, real.pool2d.forward);
  mirror(t.pool2d.backward, real.pool2d.backward);
  mirror(t.lstm_cell.forward, real.lstm_cell.forward);
  mirror(t.lstm_cell.backward, real.lstm_cell.backward);
  mirror(t.softmax.forward, real.softmax.forward);
  mirror(t.softmax.backward, real.softmax.backward);
  mirror(t.layer_norm.forward, real.layer_norm.forward);
  mirror(t.layer_norm.backward, real.layer_norm.backward);
  mirror(t.attention.forward, real.attention.forward);
  mirror(t.attention.backward, real.attention.backward);
  t.prefers_op_kernels = real.prefers_op_kernels;
  mirror(t.random, real.random);
  mirror(t.adam, real.adam);
  mirror(t.sgd, real.sgd);
  mirror(t.unscale, real.unscale);
  if (plans_scratch) {
    t.bmm = real.bmm;
    t.conv2d.forward = real.conv2d.forward;
    t.conv2d.backward_input = real.conv2d.backward_input;
    t.conv2d.backward_weight = real.conv2d.backward_weight;
    t.batch_norm = real.batch_norm;
  }
}

}  // namespace kiln::meta
