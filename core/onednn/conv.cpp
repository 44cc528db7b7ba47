// core/onednn/conv.cpp — 2-D convolution through oneDNN: the forward and its two adjoints
// (ConvKernels in core/kernels.h), with stride, padding, dilation and groups. Each pass is a
// cached primitive whose arguments are reordered in and out of the layout it prefers (Note
// [Layouts at op boundaries]); Float32, and BFloat16 with Float32 accumulation where the CPU
// has it. Each returns false, having run nothing, where oneDNN builds no primitive for the call:
// the CPU's route (core/cpu/conv_routes.cpp, which decides when oneDNN runs at all) then
// takes Kiln's unfold + GEMM kernels (core/cpu/conv.cpp).
//   oneDNN's padding is per side: the right side is whatever makes PyTorch's output size,
//   (out - 1)·stride + (k - 1)·dilation + 1 - in - pad, which may be smaller than the left.
// Read next: core/onednn/register.cpp.
#include <functional>
#include <limits>
#include <optional>

#include "core/cpu/channel_blocks.h"
#include "core/cpu/conv_weight_gradient_pairs.h"
#include "core/cpu/pool_record.h"
#include "core/cpu/cpu_kernels.h"
#include "core/onednn/kernels.h"
#include "core/onednn/onednn.h"
#include "core/onednn/runtime.h"
#include "core/ops/allocate.h"
#include "core/routes.h"
#include "core/shape.h"

namespace kiln::onednn {

namespace {

// The forward with a bias is a primitive of its own: oneDNN adds the bias as it writes each
// output, saving the pass over the output that a separate add would make. Relu (a compiled
// step's fused kernel) is Kiln's, never oneDNN's post-op (Note [oneDNN's relu drops NaN]).
enum class Pass : std::int64_t {
  Forward = 10, BackwardData = 11, BackwardWeights = 12, ForwardWithBias = 13, BackwardWeightsBias = 16
};

struct ConvDims {
  dnnl::memory::dims src, weights, dst, strides, dilates, pad_left, pad_right;
};

ConvDims conv_dims(IntArrayRef input, IntArrayRef weight, const Im2ColGeometry& g, std::int64_t groups) {
  const std::int64_t n = input[0], c = input[1], o = weight[0];
  ConvDims d;
  d.src = {n, c, g.height, g.width};
  d.dst = {n, o, g.out_h, g.out_w};
  d.weights = groups == 1 ? dnnl::memory::dims{o, c, g.kernel_h, g.kernel_w}
                          : dnnl::memory::dims{groups, o / groups, c / groups, g.kernel_h, g.kernel_w};
  d.strides = {g.stride_h, g.stride_w};
  d.dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps
  d.pad_left = {g.pad_h, g.pad_w};
  d.pad_right = {(g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1 - g.height - g.pad_h,
                 (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1 - g.width - g.pad_w};
  return d;
}

/// A contiguous descriptor of `dims` (the Kiln tensor's own layout, possibly regrouped).
dnnl::memory::desc contiguous_desc(const dnnl::memory::dims& dims, DType dtype) {
  const Shape sizes(dims.begin(), dims.end());
  return plain_desc(sizes, contiguous_strides(sizes), dtype);
}
dnnl::memory::desc any_desc(const dnnl::memory::dims& dims, DType dtype) {
  return dnnl::memory::desc(dims, data_type_of(dtype), dnnl::memory::format_tag::any);
}

Key conv_key(Pass pass, DType dtype, IntArrayRef input, IntArrayRef weight, const Im2ColGeometry& g,
             std::int64_t groups) {
  return make_key({static_cast<std::int64_t>(pass), static_cast<std::int64_t>(dtype), input[0], input[1], g.height,
                   g.width, weight[0], g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w,
                   g.dilation_h, g.dilation_w, groups});
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, DType dtype) {
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             any_desc(d.src, dtype), any_desc(d.weights, dtype),
                                             any_desc(d.dst, dtype), d.strides, d.dilates, d.pad_left, d.pad_right);
  return {desc, attributes(), engine()};
}

/// The forward primitive, with a bias when `with_bias` (a zero descriptor is oneDNN's "no bias").
Prepared build_forward(const ConvDims& d, DType dtype, bool with_bias) {
  const dnnl::memory::desc bias = with_bias ? contiguous_desc({d.dst[1]}, dtype) : dnnl::memory::desc();
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             any_desc(d.src, dtype), any_desc(d.weights, dtype), bias,
                                             any_desc(d.dst, dtype), d.strides, d.dilates, d.pad_left, d.pad_right);
  const dnnl::convolution_forward::primitive_desc pd(desc, attributes(), engine());
  std::vector<Argument> arguments{{DNNL_ARG_SRC, contiguous_desc(d.src, dtype), pd.src_desc()},
                                  {DNNL_ARG_WEIGHTS, contiguous_desc(d.weights, dtype), pd.weights_desc()}};
  if (with_bias) arguments.push_back({DNNL_ARG_BIAS, bias, pd.bias_desc()});
  arguments.push_back({DNNL_ARG_DST, contiguous_desc(d.dst, dtype), pd.dst_desc(), /*is_output=*/true});
  return Prepared(dnnl::convolution_forward(pd), pd, std::move(arguments));
}

Prepared build_backward_data(const ConvDims& d, DType dtype) {
  const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, any_desc(d.src, dtype),
                                                   any_desc(d.weights, dtype), any_desc(d.dst, dtype), d.strides,
                                                   d.dilates, d.pad_left, d.pad_right);
  const dnnl::convolution_backward_data::primitive_desc pd(desc, attributes(), engine(), forward_pd(d, dtype));
  return Prepared(dnnl::convolution_backward_data(pd), pd,
                  {{DNNL_ARG_DIFF_DST, contiguous_desc(d.dst, dtype), pd.diff_dst_desc()},
                   {DNNL_ARG_WEIGHTS, contiguous_desc(d.weights, dtype), pd.weights_desc()},
                   {DNNL_ARG_DIFF_SRC, contiguous_desc(d.src, dtype), pd.diff_src_desc(), /*is_output=*/true}});
}

/// The weight gradient, and with `with_bias` the bias gradient from the same read of diff_dst.
Prepared build_backward_weights(const ConvDims& d, DType dtype, bool with_bias) {
  const dnnl::memory::desc bias = with_bias ? contiguous_desc({d.dst[1]}, dtype) : dnnl::memory::desc();
  const dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, any_desc(d.src, dtype),
                                                      any_desc(d.weights, dtype), bias, any_desc(d.dst, dtype),
                                                      d.strides, d.dilates, d.pad_left, d.pad_right);
  const dnnl::convolution_backward_weights::primitive_desc pd(desc, attributes(), engine(), forward_pd(d, dtype));
  std::vector<Argument> arguments{
      {DNNL_ARG_SRC, contiguous_desc(d.src, dtype), pd.src_desc()},
      {DNNL_ARG_DIFF_DST, contiguous_desc(d.dst, dtype), pd.diff_dst_desc()},
      {DNNL_ARG_DIFF_WEIGHTS, contiguous_desc(d.weights, dtype), pd.diff_weights_desc(), /*is_output=*/true}};
  if (with_bias) arguments.push_back({DNNL_ARG_DIFF_BIAS, bias, pd.diff_bias_desc(), /*is_output=*/true});
  return Prepared(dnnl::convolution_backward_weights(pd), pd, std::move(arguments));
}

/// Whether every tensor of the call fits oneDNN's int32 sizes (Note [oneDNN's 32-bit sizes]);
/// counted as a fallback when one does not.
bool all_fit_int32(std::initializer_list<std::reference_wrapper<const Tensor>> tensors) {
  for (const Tensor& t : tensors) {
    if (!fits_int32(t)) {
      count_fallback();
      return false;
    }
  }
  return true;
}

/// The pass's cached primitive, or null (counted) when oneDNN has none for this dtype or shape.
std::shared_ptr<const Prepared> prepared(Pass pass, DType dtype, IntArrayRef input, IntArrayRef weight,
                                         const Im2ColGeometry& g, std::int64_t groups) {
  if (!routes::onednn_serves(dtype)) return nullptr;
  const ConvDims d = conv_dims(input, weight, g, groups);
  auto entry = cached(conv_key(pass, dtype, input, weight, g, groups), [&] {
    switch (pass) {
      case Pass::Forward: return build_forward(d, dtype, /*with_bias=*/false);
      case Pass::ForwardWithBias: return build_forward(d, dtype, /*with_bias=*/true);
      case Pass::BackwardData: return build_backward_data(d, dtype);
      case Pass::BackwardWeightsBias: return build_backward_weights(d, dtype, /*with_bias=*/true);
      case Pass::BackwardWeights: break;
    }
    return build_backward_weights(d, dtype, /*with_bias=*/false);
  });
  if (!entry) count_fallback();
  return entry;
}

}  // namespace

bool conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Im2ColGeometry& g, std::int64_t groups, bool relu) {
  const Pass pass = bias.defined() ? Pass::ForwardWithBias : Pass::Forward;
  const auto p = all_fit_int32({input, weight, out}) ? prepared(pass, input.dtype(), input.sizes(), weight.sizes(), g, groups)
                                                  : nullptr;
  if (!p) return false;
  if (bias.defined()) {
    p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
            {DNNL_ARG_BIAS, address_of(bias)}, {DNNL_ARG_DST, address_of(out)}});
  } else {
    p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
            {DNNL_ARG_DST, address_of(out)}});
  }
  if (relu) relu_in_place(out);  // not oneDNN's post-op (Note [oneDNN's relu drops NaN])
  return true;
}

bool conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                           const Im2ColGeometry& g, std::int64_t groups) {
  const auto p = all_fit_int32({grad_input, grad_output, weight})
                     ? prepared(Pass::BackwardData, grad_input.dtype(), grad_input.sizes(), weight.sizes(), g, groups)
                     : nullptr;
  if (!p) return false;
  p->run({{DNNL_ARG_DIFF_DST, address_of(grad_output)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
          {DNNL_ARG_DIFF_SRC, address_of(grad_input)}});
  return true;
}

bool conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                            const Im2ColGeometry& g, std::int64_t groups) {
  const auto p = all_fit_int32({input, grad_output, grad_weight})
                     ? prepared(Pass::BackwardWeights, input.dtype(), input.sizes(), grad_weight.sizes(), g, groups)
                     : nullptr;
  if (!p) return false;
  p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_DIFF_DST, address_of(grad_output)},
          {DNNL_ARG_DIFF_WEIGHTS, address_of(grad_weight)}});
  return true;
}

bool conv2d_backward_weight_bias(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                 const Tensor& input, const Im2ColGeometry& g, std::int64_t groups) {
  const auto p = all_fit_int32({input, grad_output, grad_weight})
                     ? prepared(Pass::BackwardWeightsBias, input.dtype(), input.sizes(), grad_weight.sizes(), g, groups)
                     : nullptr;
  if (!p) return false;
  p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_DIFF_DST, address_of(grad_output)},
          {DNNL_ARG_DIFF_WEIGHTS, address_of(grad_weight)}, {DNNL_ARG_DIFF_BIAS, address_of(grad_bias)}});
  return true;
}

namespace {

/// The [N, O, out_h, out_w] output of a convolution of `input` by `weight` fits oneDNN's int32 sizes.
bool output_fits_int32(const Tensor& input, const Tensor& weight, const Im2ColGeometry& g) {
  const std::int64_t elements = input.sizes()[0] * weight.sizes()[0] * g.out_h * g.out_w;
  return elements < std::numeric_limits<std::int32_t>::max();
}

/// Whether `t`, held in channel blocks, is in the layout primitive `p` wants argument `id` in.
bool reads_in_place(const Prepared& p, int id, const Tensor& t) {
  const Shape nchw = cpu::nchw_sizes(t);
  const std::optional<ChannelBlockedLayout> wanted = channel_blocked_layout(p.wanted(id), t.dtype());
  return wanted && cpu::same_addresses(*wanted, cpu::dense_channel_blocks(nchw[0], nchw[1], nchw[2], nchw[3], t.sizes()[4]),
                                       nchw[1]);
}

/// A buffer for a [N, C, H, W] intermediate in `layout`, allocated as the op's own temporary
/// (a replay's scratch; the meta device when planned).
Tensor blocked_buffer(const ChannelBlockedLayout& layout, const Tensor& like, const char* op) {
  return ops::empty_output({layout.elements}, like.dtype(), like.device(), op);
}

}  // namespace

bool conv2d_forward_relu_max_pool(const Tensor& values, const Tensor& indices, const Tensor& input,
                                  const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                  const Im2ColGeometry& pool, std::int64_t groups) {
  // The convolution's output stays in the blocked layout its primitive writes, and the pool
  // reads it there, applying relu to each element as it reads it (Note [A convolution's blocked
  // output pooled where it lies]; Note [oneDNN's relu drops NaN]).
  // An input held in channel blocks is read where it lies (Note [Channel blocks across a layer
  // boundary] in core/cpu/channel_blocks.h).
  const Pass pass = bias.defined() ? Pass::ForwardWithBias : Pass::Forward;
  const Shape input_sizes = cpu::nchw_sizes(input);
  const auto p = all_fit_int32({input, weight, values}) && output_fits_int32(input, weight, g)
                     ? prepared(pass, input.dtype(), input_sizes, weight.sizes(), g, groups)
                     : nullptr;
  const std::optional<ChannelBlockedLayout> layout =
      p ? channel_blocked_layout(p->wanted(DNNL_ARG_DST), input.dtype()) : std::nullopt;
  const bool blocked_input = cpu::holds_channel_blocks(input);
  KILN_CHECK(!blocked_input || (layout && reads_in_place(*p, DNNL_ARG_SRC, input)),
             "conv2d: an input in channel blocks of ", input.sizes(), " that oneDNN's primitive does not read");
  if (!layout) return false;
  const Tensor out = blocked_buffer(*layout, input, "convolution");
  const auto run = [&](std::initializer_list<int> in_place) {
    if (bias.defined()) {
      p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
              {DNNL_ARG_BIAS, address_of(bias)}, {DNNL_ARG_DST, address_of(out)}},
             in_place);
    } else {
      p->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
              {DNNL_ARG_DST, address_of(out)}},
             in_place);
    }
  };
  if (blocked_input) {
    run({DNNL_ARG_SRC, DNNL_ARG_DST});
  } else {
    run({DNNL_ARG_DST});
  }
  if (!values.is_meta()) cpu::max_pool2d_channel_blocked_kernel(values, indices, out, *layout, pool, /*relu=*/true);
  return true;
}

namespace {

/// The gradient max_pool2d_backward_relu makes from grad_pooled, indices and values, written
/// in `layout` (a temporary of the kernel, zero-padded in its last channel block as oneDNN
/// requires) for a convolution of geometry `g`.
Tensor unpooled_into(const ChannelBlockedLayout& layout, const Tensor& grad_pooled, const Tensor& indices,
                     const Tensor& values, const Tensor& input, const Im2ColGeometry& g) {
  const Tensor grad_output = blocked_buffer(layout, input, "max_pool2d_backward");
  if (!grad_output.is_meta()) {
    Im2ColGeometry pool;
    pool.height = g.out_h;
    pool.width = g.out_w;
    pool.out_h = grad_pooled.sizes()[2];
    pool.out_w = grad_pooled.sizes()[3];
    if (cpu::holds_pool_records(indices)) {
      // Records exist only for whole 2x2 windows of stride 2 (Note [A pool window in one byte]).
      // Said here, the kernel takes its path for them; left at 1x1 (Int64 indices need only the
      // sizes), it took the general scatter: the compiled BFloat16 CNN step 0.43 ms slower.
      pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
    }
    cpu::max_pool2d_backward_relu_channel_blocked_kernel(grad_output, layout, grad_pooled, indices, values, pool);
  }
  return grad_output;
}

}  // namespace

bool conv2d_backward_through_max_pool(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                      const Tensor& grad_pooled, const Tensor& indices, const Tensor& values,
                                      const Tensor& weight, const Tensor& input, const Im2ColGeometry& g,
                                      std::int64_t groups) {
  // Both backward primitives read the unpooled gradient; where they want it in the same
  // blocked layout it is made there and never reordered (Note [A convolution's blocked output
  // pooled where it lies]).
  // The input, and the input gradient, may be held in channel blocks (Note [Channel blocks
  // across a layer boundary] in core/cpu/channel_blocks.h): read and written where they lie.
  const Shape input_sizes = cpu::nchw_sizes(input);
  const bool fits = all_fit_int32({input, weight, grad_pooled}) && output_fits_int32(input, weight, g);
  const auto data = fits ? prepared(Pass::BackwardData, input.dtype(), input_sizes, weight.sizes(), g, groups)
                         : nullptr;
  const auto weights =
      data ? prepared(Pass::BackwardWeightsBias, input.dtype(), input_sizes, weight.sizes(), g, groups) : nullptr;
  const std::optional<ChannelBlockedLayout> layout =
      weights && data->wanted(DNNL_ARG_DIFF_DST) == weights->wanted(DNNL_ARG_DIFF_DST)
          ? channel_blocked_layout(data->wanted(DNNL_ARG_DIFF_DST), input.dtype())
          : std::nullopt;
  const bool blocked_input = cpu::holds_channel_blocks(input), blocked_gradient = cpu::holds_channel_blocks(grad_input);
  KILN_CHECK((!blocked_input || (layout && reads_in_place(*weights, DNNL_ARG_SRC, input))) &&
                 (!blocked_gradient || (layout && reads_in_place(*data, DNNL_ARG_DIFF_SRC, grad_input))),
             "conv2d: an input or input gradient in channel blocks that oneDNN's primitives do not take");
  if (!layout) return false;
  const Tensor grad_output = unpooled_into(*layout, grad_pooled, indices, values, input, g);
  data->run({{DNNL_ARG_DIFF_DST, address_of(grad_output)}, {DNNL_ARG_WEIGHTS, address_of(weight)},
             {DNNL_ARG_DIFF_SRC, address_of(grad_input)}},
            blocked_gradient ? std::initializer_list<int>{DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}
                             : std::initializer_list<int>{DNNL_ARG_DIFF_DST});
  // The weight gradient as the eager op's route makes it (core/cpu/conv_routes.cpp): Kiln's pair
  // kernel where it serves (Note [A weight gradient in BFloat16 pairs]), else the primitive.
  const ChannelBlockedLayout input_layout =
      blocked_input ? cpu::dense_channel_blocks(input_sizes[0], input_sizes[1], input_sizes[2], input_sizes[3],
                                                input.sizes()[4])
                    : ChannelBlockedLayout{};
  if (cpu::conv2d_weight_gradient_in_pairs(grad_weight, grad_bias, grad_output, *layout, input, input_layout, g)) {
    return true;
  }
  weights->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_DIFF_DST, address_of(grad_output)},
                {DNNL_ARG_DIFF_WEIGHTS, address_of(grad_weight)}, {DNNL_ARG_DIFF_BIAS, address_of(grad_bias)}},
               blocked_input ? std::initializer_list<int>{DNNL_ARG_SRC, DNNL_ARG_DIFF_DST}
                             : std::initializer_list<int>{DNNL_ARG_DIFF_DST});
  return true;
}

bool conv2d_backward_weight_bias_through_max_pool(const Tensor& grad_weight, const Tensor& grad_bias,
                                                  const Tensor& grad_pooled, const Tensor& indices,
                                                  const Tensor& values, const Tensor& input, const Im2ColGeometry& g,
                                                  std::int64_t groups) {
  // A first layer's backward: no input gradient, so the unpooled gradient is made in the
  // layout the weight primitive alone reads.
  KILN_CHECK(!cpu::holds_channel_blocks(grad_pooled) && !cpu::holds_channel_blocks(values),
             "conv2d: a pooled gradient in channel blocks that oneDNN's first-layer kernel does not read");
  const bool fits = all_fit_int32({input, grad_weight, grad_pooled}) && output_fits_int32(input, grad_weight, g);
  const auto weights =
      fits ? prepared(Pass::BackwardWeightsBias, input.dtype(), input.sizes(), grad_weight.sizes(), g, groups)
           : nullptr;
  const std::optional<ChannelBlockedLayout> layout =
      weights ? channel_blocked_layout(weights->wanted(DNNL_ARG_DIFF_DST), input.dtype()) : std::nullopt;
  if (!layout) return false;
  const Tensor grad_output = unpooled_into(*layout, grad_pooled, indices, values, input, g);
  if (cpu::conv2d_weight_gradient_in_pairs(grad_weight, grad_bias, grad_output, *layout, input, {}, g)) {
    return true;
  }
  weights->run({{DNNL_ARG_SRC, address_of(input)}, {DNNL_ARG_DIFF_DST, address_of(grad_output)},
                {DNNL_ARG_DIFF_WEIGHTS, address_of(grad_weight)}, {DNNL_ARG_DIFF_BIAS, address_of(grad_bias)}},
               {DNNL_ARG_DIFF_DST});
  return true;
}

std::optional<std::int64_t> conv2d_input_channel_block(DType dtype, IntArrayRef input, IntArrayRef weight,
                                                       const Im2ColGeometry& g, std::int64_t groups, bool with_bias) {
  const std::int64_t n = input[0], c = input[1], h = input[2], w = input[3];
  if (n * c * h * w >= std::numeric_limits<std::int32_t>::max()) return std::nullopt;
  const auto forward = prepared(with_bias ? Pass::ForwardWithBias : Pass::Forward, dtype, input, weight, g, groups);
  const auto data = prepared(Pass::BackwardData, dtype, input, weight, g, groups);
  const auto weights = prepared(Pass::BackwardWeightsBias, dtype, input, weight, g, groups);
  if (!forward || !data || !weights) return std::nullopt;
  const std::optional<ChannelBlockedLayout> layout = channel_blocked_layout(forward->wanted(DNNL_ARG_SRC), dtype);
  if (!layout || c % layout->block != 0 || channel_blocked_layout(weights->wanted(DNNL_ARG_SRC), dtype) != layout ||
      channel_blocked_layout(data->wanted(DNNL_ARG_DIFF_SRC), dtype) != layout) {
    return std::nullopt;
  }
  // Blocks of B one after another (nChw16c), or a pixel's channels side by side (nhwc: B = C).
  for (const std::int64_t block : {layout->block, c}) {
    if (cpu::same_addresses(*layout, cpu::dense_channel_blocks(n, c, h, w, block), c)) return block;
  }
  return std::nullopt;
}

}  // namespace kiln::onednn
