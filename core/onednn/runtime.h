// core/onednn/runtime.h — what every oneDNN kernel in Kiln shares: the CPU engine and a
// stream per thread, memory descriptors for Kiln tensors, the primitive cache, and `Prepared`,
// a primitive together with the layout changes (reorders) its arguments need on the way in
// and out (Note [Layouts at op boundaries]).
// Read next: core/onednn/matmul.cpp, core/onednn/conv.cpp.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/kernel_params.h"
#include "core/tensor.h"

namespace kiln::onednn {

// Note [Layouts at op boundaries]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every Kiln tensor crosses an op boundary in its own strided layout (NCHW for images), and
// so do oneDNN's inputs and outputs here. Inside an op, a primitive may ask for a blocked
// layout (nChw8c on AVX2, nChw16c on AVX-512: channels in groups of one vector), in which
// oneDNN's direct convolutions run at 80-98 % of the FMA peak, where on plain NCHW oneDNN
// falls back to im2col + GEMM. Measured on the examples' second convolution (32 -> 64 channels,
// 14x14, batch 128; 2-core Zen 1, AVX2): forward 11.8 ms blocked with both reorders vs 19.7 ms
// plain; backward-data 12.0 vs 30.1 ms; backward-weights 14.1 vs 17.3 ms. So each primitive is
// built with `any` layouts, and `Prepared` reorders an argument into the layout it chose and
// an output back, paying one memory-bound pass per reorder, instead of keeping blocked
// tensors alive between ops (which would make every other op, and every user, handle them).

/// Where `desc` puts a [N, C, H, W] tensor's elements, when it is a channel-blocked layout
/// (nChw16c, nChw8c) of `dtype`, or channels-last (nhwc, what oneDNN's AMX BFloat16 kernels
/// want) with C a whole number of 16-lane blocks, described as blocks of 16 that follow each
/// other within a pixel; nothing for any other layout.
std::optional<ChannelBlockedLayout> channel_blocked_layout(const dnnl::memory::desc& desc, DType dtype);

// Note [oneDNN's relu drops NaN]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// oneDNN applies relu as an eltwise post-op while a convolution's or a matmul's output is still
// in registers, but its relu is a vector max against zero (vmaxps), which returns the zero for a
// NaN: measured with libdnnl 2.6.3, a NaN input to a convolution with the relu post-op came out
// of it as 0, where PyTorch's relu, and Kiln's, let NaN through. In a training step that is
// silent corruption: once a layer's weights are NaN its relu'd outputs are zeros, and the loss
// stays finite while the layer is dead. Every other eltwise form (clip, a binary max) is the
// same instruction, and the leaky form (alpha != 0) multiplies. So Kiln's fused kernels never
// ask oneDNN for relu: they apply Kiln's relu to oneDNN's output (relu_in_place), or where the
// output is read once more anyway, as it is read (the blocked pool, Note [A convolution's
// blocked output pooled where it lies] in core/cpu/pool.cpp).

/// Kiln's relu (NaN kept) over `t`, in place.
void relu_in_place(const Tensor& t);

/// oneDNN's CPU engine (one per process).
const dnnl::engine& engine();
/// This thread's stream on it (primitives run synchronously on the calling thread, which
/// forks OpenMP's team as Kiln's own kernels do).
dnnl::stream& stream();

/// oneDNN's name for a Kiln dtype (undef for those it has no CPU kernels for).
dnnl::memory::data_type data_type_of(DType dtype);
/// A descriptor of `sizes` with `strides` (elements), in dtype's type.
dnnl::memory::desc plain_desc(IntArrayRef sizes, IntArrayRef strides, DType dtype);
/// A descriptor of t's own sizes, strides and dtype.
dnnl::memory::desc plain_desc(const Tensor& t);

/// Primitive attributes every Kiln primitive carries: the scratchpad is Kiln's to give (from
/// the CPU cache), which also makes one primitive safe to run from two threads at once.
dnnl::primitive_attr attributes();

/// The tensor's data, or null for a meta tensor (a planned step: Prepared::run allocates the
/// scratch memory it would use and computes nothing).
void* address_of(const Tensor& t);

/// One argument of a primitive: where Kiln keeps it (plain) and where the primitive wants it.
struct Argument {
  int id;                       // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
  dnnl::memory::desc plain;     // the tensor's own layout
  dnnl::memory::desc wanted;    // the primitive's
  bool is_output = false;
};

/// A primitive ready to run on Kiln tensors: its arguments' layouts, and the reorders between
/// the plain and wanted layouts where they differ (Note [Layouts at op boundaries]).
class Prepared {
 public:
  Prepared(dnnl::primitive primitive, const dnnl::primitive_desc_base& pd, std::vector<Argument> arguments);

  /// Runs it on the data at `pointers` (each argument's id with the plain data's address); a
  /// oneDNN failure becomes a kiln::Error. Null addresses (meta tensors, address_of) make a
  /// dry run: the layout buffers and scratchpads are allocated on the meta device in the same
  /// order and freed the same way, and nothing executes (Note [Planning on the meta device]).
  /// The ids in `in_wanted_layout` point at data already in the layout the primitive wants (a
  /// compiled step's fused kernel keeps an intermediate blocked, Note [A convolution's blocked
  /// output pooled where it lies]): no reorder, no buffer.
  void run(std::initializer_list<std::pair<int, void*>> pointers, std::initializer_list<int> in_wanted_layout = {}) const;

  /// The layout the primitive wants argument `id` in.
  const dnnl::memory::desc& wanted(int id) const;

 private:
  void execute(std::initializer_list<std::pair<int, void*>> pointers, std::initializer_list<int> in_wanted_layout) const;
  void plan_buffers(std::initializer_list<int> in_wanted_layout) const;

  struct Reorder {
    dnnl::reorder primitive;
    std::size_t scratchpad_bytes;
  };
  dnnl::primitive primitive_;
  std::size_t scratchpad_bytes_;
  std::vector<Argument> arguments_;
  std::vector<std::optional<Reorder>> reorders_;  // per argument: into wanted, or back for an output
};

// Note [The primitive cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Creating a oneDNN primitive JIT-compiles a kernel for one shape: tens of microseconds to
// milliseconds, far more than running a small one. Like the cuDNN algorithm cache, Kiln keeps
// what it built under a key of everything that shaped it (the op and direction, dtype, sizes,
// strides, window), so a training step at steady state creates none
// (backends::onednn_stats().primitives_created stops growing; bench_training prints it). The
// thread count belongs to the key: a primitive divides its work among the threads there were
// when it was built, so the back-off of Note [Sharing the machine] builds a second one. A
// shape oneDNN has no kernel for is remembered too (as an empty entry), so it is not asked
// again, and its calls take the Eigen route (`fallbacks`). The cache holds the
// kCacheCapacity most recently used entries.

inline constexpr std::size_t kCacheCapacity = 1024;
/// Up to 31 integers that identify a primitive (the last slot is the thread count's, see cached()).
using Key = std::array<std::int64_t, 32>;
/// A key from a list of values (the first is the op's tag, the rest its dims and parameters).
Key make_key(std::initializer_list<std::int64_t> values);
/// Appends `values` after the first `used` entries of `key`; returns the new count.
std::size_t extend_key(Key& key, std::size_t used, IntArrayRef values);

/// The cached entry for `key`, built by `build` on a miss. Returns null when oneDNN has no
/// kernel for it (build threw a dnnl::error), which the caller counts and serves on the Eigen
/// route.
std::shared_ptr<const Prepared> cached(const Key& key, const std::function<Prepared()>& build);

/// Counts one call handed back to the Eigen route for want of a oneDNN kernel.
void count_fallback();

// Note [oneDNN's 32-bit sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// oneDNN's API takes int64 dims, but its CPU kernels keep sizes in `int` in places (the jit
// convolutions' configuration: batch, channels, height, width; brgemm's leading dimensions),
// and it does not check. Measured with libdnnl 2.6.3 (avx512_core), creating the primitive
// alone: a matmul with M or K >= 2^32, or a convolution 2^31 rows high, dies of SIGFPE inside
// oneDNN (a division by a size truncated to 0); M or K from 2^31 get the generic GEMM instead
// of brgemm; a convolution over a batch of 2^32 images is accepted, into a configuration whose
// batch is an int. A planned step meets these shapes first: memory::plan at batch 2^32 crashed
// in the weight gradient's matmul (K = batch) on the meta device (issue 31).
// So the route takes a shape only when each of its tensors spans fewer than 2^31 elements
// (which bounds every size and every product of sizes oneDNN could form from it), and hands
// anything larger to the Eigen route, whose indices are int64, counted as a fallback. PyTorch
// splits its cuDNN convolutions at the same bound (canUse32BitIndexMath); for Kiln a single
// tensor of 8 GiB of Float32 is far past the sizes where oneDNN's speed is what matters, and
// the meta device takes the same route as the real step, so a plan still predicts the run.

/// Whether `t`'s elements, and the span its strides reach, both fit in int32 (Note [oneDNN's
/// 32-bit sizes]). Empty sizes count as 1: their neighbours' strides still multiply.
bool fits_int32(const Tensor& t);

}  // namespace kiln::onednn
