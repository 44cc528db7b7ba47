// autograd/functions/conv.cpp — convolution and pooling, built from two data-movement
// primitives, unfold (im2col) and fold (col2im), plus matmul, max and mean
// (Note [Convolution as unfold + GEMM] in core/ops/conv.h). unfold and fold are each
// other's adjoint, so each is the other's backward, and everything built on them is
// differentiable to any order. On the op-kernel route (core/backends.h: cuDNN on CUDA; on the
// CPU Kiln's thin kernels, oneDNN or the reference kernels), conv2d and the pools are instead
// one op per direction: ConvolutionFn with its two adjoint ops, and Pool2dFn. Which one a
// convolution or pool takes is routes::conv2d's and routes::pool2d's (core/routes.h).
// Read next: nn/ (the modules that call these).
#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/functions/conv.h"
#include "autograd/functions/linalg.h"
#include "core/routes.h"
#include "core/creation.h"
#include "core/ops/conv.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct UnfoldFn : Function<UnfoldFn> {
  static constexpr const char* name = "Im2ColBackward0";
  struct Saved { Im2ColGeometry geometry; };
  static Tensor forward(Context<UnfoldFn>& ctx, const Tensor& x, const Im2ColGeometry& g,
                        double pad_value) {
    ctx.saved = {g};
    return ops::unfold(x, g, pad_value);
  }
  // unfold copies each input element into every window that covers it, so its adjoint sums
  // the window gradients back into place: fold
  static TensorList backward(Context<UnfoldFn>& ctx, const TensorList& g);
};

struct FoldFn : Function<FoldFn> {
  static constexpr const char* name = "Col2ImBackward0";
  struct Saved { Im2ColGeometry geometry; };
  static Tensor forward(Context<FoldFn>& ctx, const Tensor& cols, const Im2ColGeometry& g) {
    ctx.saved = {g};
    return ops::fold(cols, g);
  }
  // fold sums windows into the image, so its adjoint reads each window back out: unfold
  static TensorList backward(Context<FoldFn>& ctx, const TensorList& g) {
    return {UnfoldFn::apply(g[0], ctx.saved.geometry, 0.0)};
  }
};

TensorList UnfoldFn::backward(Context<UnfoldFn>& ctx, const TensorList& g) {
  return {FoldFn::apply(g[0], ctx.saved.geometry)};
}

// The same pair with the batch folded into the columns ([C*kh*kw, N*L]), for conv2d.
struct UnfoldColumnsFn : Function<UnfoldColumnsFn> {
  static constexpr const char* name = "Im2ColBackward1";
  struct Saved { Im2ColGeometry geometry; std::int64_t batch; };
  static Tensor forward(Context<UnfoldColumnsFn>& ctx, const Tensor& x, const Im2ColGeometry& g) {
    ctx.saved = {g, x.sizes()[0]};
    return ops::unfold_columns(x, g);
  }
  // adjoint: fold the column gradients back into images
  static TensorList backward(Context<UnfoldColumnsFn>& ctx, const TensorList& g);
};

struct FoldColumnsFn : Function<FoldColumnsFn> {
  static constexpr const char* name = "Col2ImBackward1";
  struct Saved { Im2ColGeometry geometry; };
  static Tensor forward(Context<FoldColumnsFn>& ctx, const Tensor& cols, const Im2ColGeometry& g, std::int64_t batch) {
    ctx.saved = {g};
    return ops::fold_columns(cols, g, batch);
  }
  // adjoint: read the windows back out as columns
  static TensorList backward(Context<FoldColumnsFn>& ctx, const TensorList& g) {
    return {UnfoldColumnsFn::apply(g[0], ctx.saved.geometry)};
  }
};

TensorList UnfoldColumnsFn::backward(Context<UnfoldColumnsFn>& ctx, const TensorList& g) {
  return {FoldColumnsFn::apply(g[0], ctx.saved.geometry, ctx.saved.batch)};
}

// max_pool2d's backward as an op of its own: each window's gradient goes to the element that
// won it, and an element that won several overlapping windows collects them all. It is linear
// in the output's gradient, so its own derivative reads each window's winner back out (a
// gather), and max_pool2d stays differentiable to any order.
struct MaxPool2dBackwardFn : Function<MaxPool2dBackwardFn> {
  static constexpr const char* name = "MaxPool2DWithIndicesBackwardBackward0";
  static Tensor forward(Context<MaxPool2dBackwardFn>& ctx, const Tensor& grad_output, const Tensor& indices,
                        const Shape& input_sizes) {
    ctx.save_for_backward({indices});
    return ops::max_pool2d_with_indices_backward(grad_output, indices, input_sizes);
  }
  static TensorList backward(Context<MaxPool2dBackwardFn>& ctx, const TensorList& g) {
    const Tensor idx = ctx.get_saved_variables()[0];
    const std::int64_t planes = idx.sizes()[0] * idx.sizes()[1];
    return {g[0].reshape({planes, -1}).gather(1, idx.reshape({planes, -1})).view(idx.sizes()), Tensor()};
  }
};

struct MaxPool2dFn : Function<MaxPool2dFn> {
  static constexpr const char* name = "MaxPool2DWithIndicesBackward0";
  struct Saved { Shape sizes; };
  static TensorList forward(Context<MaxPool2dFn>& ctx, const Tensor& x, const Im2ColGeometry& g) {
    ctx.saved = {x.sizes().vec()};
    auto [values, indices] = ops::max_pool2d_with_indices(x, g);
    ctx.save_for_backward({indices});
    return {values, indices};
  }
  static TensorList backward(Context<MaxPool2dFn>& ctx, const TensorList& g) {
    return {MaxPool2dBackwardFn::apply(g[0], ctx.get_saved_variables()[0], ctx.saved.sizes)};
  }
};

// Convolution through the backend's library (cuDNN), with the two adjoints as ops of their
// own. Each of the three is linear in both tensor arguments, and the derivative of each is
// one of the others, so every order of derivative stays on the library path:
//   y  = conv(x, w)          dL/dx = Bx(gy, w),     dL/dw = Bw(gy, x)
//   gx = Bx(gy, w)           d/dgy = conv(ggx, w),  d/dw  = Bw(gy, ggx)
//   gw = Bw(gy, x)           d/dgy = conv(x, ggw),  d/dx  = Bx(gy, ggw)
// (from <ggx, Bx(gy, w)> = <conv(ggx, w), gy> = <Bw(gy, ggx), w>, the adjoint identities).
struct ConvGeometry {
  Im2ColGeometry geometry;
  std::int64_t groups = 1;
  Shape input_sizes, weight_sizes;
};

// The bias (optional) is added inside the forward kernel, as one node with three inputs, like
// PyTorch's ConvolutionBackward0; its gradient is the output's summed over all but channels.
struct ConvolutionFn : Function<ConvolutionFn> {
  static constexpr const char* name = "ConvolutionBackward0";
  using Saved = ConvGeometry;
  static Tensor forward(Context<ConvolutionFn>& ctx, const Tensor& x, const Tensor& w, const Tensor& bias,
                        const Im2ColGeometry& g, std::int64_t groups) {
    ctx.saved = {g, groups, x.sizes().vec(), w.sizes().vec()};
    ctx.save_for_backward({x, w});
    return ops::convolution(x, w, bias, g, groups);
  }
  static TensorList backward(Context<ConvolutionFn>& ctx, const TensorList& grads);
};

struct ConvolutionBackwardInputFn : Function<ConvolutionBackwardInputFn> {
  static constexpr const char* name = "ConvolutionBackwardBackward0";
  using Saved = ConvGeometry;
  static Tensor forward(Context<ConvolutionBackwardInputFn>& ctx, const Tensor& gy, const Tensor& w,
                        const ConvGeometry& c) {
    ctx.saved = c;
    ctx.save_for_backward({gy, w});
    return ops::convolution_backward_input(gy, w, c.input_sizes, c.geometry, c.groups);
  }
  static TensorList backward(Context<ConvolutionBackwardInputFn>& ctx, const TensorList& grads);
};

struct ConvolutionBackwardWeightFn : Function<ConvolutionBackwardWeightFn> {
  static constexpr const char* name = "ConvolutionBackwardBackward1";
  using Saved = ConvGeometry;
  static Tensor forward(Context<ConvolutionBackwardWeightFn>& ctx, const Tensor& gy, const Tensor& x,
                        const ConvGeometry& c) {
    ctx.saved = c;
    ctx.save_for_backward({gy, x});
    return ops::convolution_backward_weight(gy, x, c.weight_sizes, c.geometry, c.groups);
  }
  static TensorList backward(Context<ConvolutionBackwardWeightFn>& ctx, const TensorList& grads);
};

TensorList ConvolutionFn::backward(Context<ConvolutionFn>& ctx, const TensorList& grads) {
  const TensorList s = ctx.get_saved_variables();  // x, w
  return {ctx.needs_input_grad(0) ? ConvolutionBackwardInputFn::apply(grads[0], s[1], ctx.saved) : Tensor(),
          ctx.needs_input_grad(1) ? ConvolutionBackwardWeightFn::apply(grads[0], s[0], ctx.saved) : Tensor(),
          ctx.needs_input_grad(2) ? grads[0].sum({0, 2, 3}) : Tensor()};
}

TensorList ConvolutionBackwardInputFn::backward(Context<ConvolutionBackwardInputFn>& ctx, const TensorList& grads) {
  const TensorList s = ctx.get_saved_variables();  // gy, w
  const ConvGeometry& c = ctx.saved;
  return {ctx.needs_input_grad(0) ? ConvolutionFn::apply(grads[0], s[1], Tensor(), c.geometry, c.groups) : Tensor(),
          ctx.needs_input_grad(1) ? ConvolutionBackwardWeightFn::apply(s[0], grads[0], c) : Tensor()};
}

TensorList ConvolutionBackwardWeightFn::backward(Context<ConvolutionBackwardWeightFn>& ctx, const TensorList& grads) {
  const TensorList s = ctx.get_saved_variables();  // gy, x
  const ConvGeometry& c = ctx.saved;
  return {ctx.needs_input_grad(0) ? ConvolutionFn::apply(s[1], grads[0], Tensor(), c.geometry, c.groups) : Tensor(),
          ctx.needs_input_grad(1) ? ConvolutionBackwardInputFn::apply(s[0], grads[0], c) : Tensor()};
}

void check_4d(const char* op, const Tensor& input) {
  KILN_CHECK(input.dim() == 4, op, ": Expected 4D (batched) input [N, C, H, W], but got input of size: ",
             input.sizes());
}

}  // namespace

Tensor unfold(const Tensor& input, Pair kernel_size, Pair dilation, Pair padding, Pair stride) {
  check_4d("unfold", input);
  return UnfoldFn::apply(input, ops::im2col_geometry(input.sizes(), kernel_size, dilation, padding, stride), 0.0);
}

Tensor fold(const Tensor& input, Pair output_size, Pair kernel_size, Pair dilation, Pair padding,
            Pair stride) {
  KILN_CHECK(input.dim() == 3, "fold: Expected 3D (batched) input [N, C*kh*kw, L], got ", input.sizes());
  const std::int64_t kk = kernel_size[0] * kernel_size[1];
  KILN_CHECK(input.sizes()[1] % kk == 0, "Expected size of input's dimension 1 to be divisible by "
             "the product of kernel_size, but got input.size(1)=", input.sizes()[1],
             " and kernel_size=(", kernel_size[0], ", ", kernel_size[1], ")");
  const Im2ColGeometry g = ops::im2col_geometry(
      {input.sizes()[0], input.sizes()[1] / kk, output_size[0], output_size[1]}, kernel_size,
      dilation, padding, stride);
  return FoldFn::apply(input, g);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
                        Pair output_padding, Pair dilation) {
  check_4d("conv_transpose2d", input);
  KILN_CHECK(weight.dim() == 4, "conv_transpose2d: expected a 4-D weight [C_in, C_out, kh, kw], got ", weight.sizes());
  KILN_CHECK(weight.size(0) == input.size(1), "Given transposed=1, weight of size ", weight.sizes(),
             ", expected input", input.sizes(), " to have ", weight.size(0), " channels, but got ", input.size(1),
             " channels instead");
  for (std::size_t i = 0; i < 2; ++i) {
    KILN_CHECK_VALUE(output_padding[i] < stride[i] || output_padding[i] < dilation[i],
                     "output padding must be smaller than either stride or dilation, but got output_padding=(",
                     output_padding[0], ", ", output_padding[1], "), stride=(", stride[0], ", ", stride[1],
                     "), dilation=(", dilation[0], ", ", dilation[1], ")");
  }
  const std::int64_t n = input.size(0), c_in = input.size(1), c_out = weight.size(1);
  const std::int64_t kh = weight.size(2), kw = weight.size(3);
  const std::int64_t h_out = (input.size(2) - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1;
  const std::int64_t w_out = (input.size(3) - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1;
  KILN_CHECK_VALUE(h_out > 0 && w_out > 0, "conv_transpose2d: the output would be ", h_out, "x", w_out);
  // Each input pixel spreads its C_in values through the weight into a kh x kw patch of
  // C_out channels; fold (col2im) adds the overlapping patches up at their places.
  const Tensor columns = weight.reshape({c_in, c_out * kh * kw}).t().matmul(input.reshape({n, c_in, -1}));
  Tensor out = fold(columns, {h_out, w_out}, {kh, kw}, dilation, padding, stride);
  if (bias.defined()) out = out + bias.reshape({1, c_out, 1, 1});
  return out;
}

namespace {

/// The checked geometry of a 2-D convolution (PyTorch's messages for mismatched shapes).
Im2ColGeometry conv2d_geometry(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride,
                               Pair padding, Pair dilation, std::int64_t groups) {
  check_4d("conv2d", input);
  KILN_CHECK(weight.dim() == 4, "conv2d: Expected 4D weight [out_channels, in_channels/groups, kh, "
             "kw], but got weight of size: ", weight.sizes());
  KILN_CHECK(groups > 0, "non-positive groups is not supported");
  const std::int64_t C = input.sizes()[1], O = weight.sizes()[0];
  KILN_CHECK(C == weight.sizes()[1] * groups, "Given groups=", groups, ", weight of size ",
             weight.sizes(), ", expected input", input.sizes(), " to have ", weight.sizes()[1] * groups,
             " channels, but got ", C, " channels instead");
  KILN_CHECK(O % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ",
             groups, " at dimension 0, but got weight of size ", weight.sizes(), " instead");
  ops::check_convolution_bias(weight, bias);
  return ops::im2col_geometry(input.sizes(), {weight.sizes()[2], weight.sizes()[3]}, dilation, padding, stride);
}

Tensor convolution_impl(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
                        Pair dilation, std::int64_t groups) {
  const Im2ColGeometry g = conv2d_geometry(input, weight, bias, stride, padding, dilation, groups);
  return ConvolutionFn::apply(input, weight, bias, g, groups);
}

Tensor conv2d_impl(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
                   Pair dilation, std::int64_t groups) {
  if (routes::conv2d(input, weight.sizes(), groups) != routes::Route::Composite) {
    return convolution_impl(input, weight, bias, stride, padding, dilation, groups);
  }
  const Im2ColGeometry g = conv2d_geometry(input, weight, bias, stride, padding, dilation, groups);
  const std::int64_t C = input.sizes()[1], O = weight.sizes()[0];
  // One GEMM for the whole batch: [O, C*kh*kw] @ [C*kh*kw, N*L] -> [O, N*L].
  const Tensor cols = UnfoldColumnsFn::apply(input, g);
  const std::int64_t N = input.sizes()[0];
  Tensor out;
  if (groups == 1) {
    out = weight.reshape({O, -1}).mm(cols);
  } else {
    const std::int64_t rows = C / groups * g.kernel_h * g.kernel_w, outs = O / groups;
    TensorList parts;
    for (std::int64_t i = 0; i < groups; ++i) {
      parts.push_back(weight.narrow(0, i * outs, outs).reshape({outs, -1}).mm(cols.narrow(0, i * rows, rows)));
    }
    out = cat(parts, 0);
  }
  // [O, N, oh, ow] -> [N, O, oh, ow]: a view; the bias add (or the next op) materialises it.
  out = out.view({O, N, g.out_h, g.out_w}).permute({1, 0, 2, 3});
  return bias.defined() ? out + bias.view({1, O, 1, 1}) : out.contiguous();
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride,
              Pair padding, Pair dilation, std::int64_t groups) {
  return amp::run<amp::CastPolicy::LowerPrecision>(conv2d_impl, input, weight, bias, stride, padding, dilation,
                                                   groups);
}

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding,
                   Pair dilation, std::int64_t groups) {
  return amp::run<amp::CastPolicy::LowerPrecision>(convolution_impl, input, weight, bias, stride, padding,
                                                   dilation, groups);
}

namespace {

/// Each channel as its own one-channel image, unfolded: [N*C, kh*kw, L].
Tensor channel_windows(const Tensor& input, const Im2ColGeometry& g, double pad_value) {
  Im2ColGeometry one = g;
  one.channels = 1;
  return UnfoldFn::apply(input.reshape({-1, 1, g.height, g.width}), one, pad_value);
}

}  // namespace


namespace {

// The pools through the backend's pool kernels (cuDNN), for windows without dilation. The
// backward kernel is not built from differentiable ops, so with create_graph the backward is
// the composite pool's vector-Jacobian product, recorded: both pools' input gradients are
// linear in the output gradient, and do not depend on x except through which element wins a
// max window, which is piecewise constant, so nothing of x's history is lost.
Tensor max_pool2d_composite(const Tensor& input, const Im2ColGeometry& g) {
  return MaxPool2dFn::apply(input, g)[0];  // the values, and each window's winner for backward
}

Tensor avg_pool2d_composite(const Tensor& input, const Im2ColGeometry& g, PoolMode mode) {
  const Tensor windows = channel_windows(input, g, 0.0);
  Tensor avg;
  if (mode == PoolMode::AverageCountingPadding) {
    avg = windows.mean(1);
  } else {
    // Divide by the number of real (non-padding) elements in each window.
    const Tensor counts = channel_windows(ones({1, 1, g.height, g.width}, input.options()), g, 0.0).sum(1);
    avg = windows.sum(1) / counts;
  }
  return avg.view({input.sizes()[0], input.sizes()[1], g.out_h, g.out_w});
}

template <bool IsMax>
struct Pool2dFn : Function<Pool2dFn<IsMax>> {
  static constexpr const char* name = IsMax ? "MaxPool2DBackward0" : "AvgPool2DBackward0";
  struct Saved {
    Im2ColGeometry geometry;
    PoolMode mode = PoolMode::Max;
  };
  static Tensor forward(Context<Pool2dFn>& ctx, const Tensor& x, const Im2ColGeometry& g, PoolMode mode) {
    Tensor y = ops::pool2d(x, g, mode);
    ctx.saved = {g, mode};
    ctx.save_for_backward({x, y});
    return y;
  }
  static TensorList backward(Context<Pool2dFn>& ctx, const TensorList& grads) {
    const TensorList s = ctx.get_saved_variables();  // x, y
    const Im2ColGeometry& g = ctx.saved.geometry;
    if (!is_grad_enabled()) return {ops::pool2d_backward(grads[0], s[0], s[1], g, ctx.saved.mode)};
    const Tensor x = s[0].detach().as_leaf(true);
    const Tensor y = IsMax ? max_pool2d_composite(x, g) : avg_pool2d_composite(x, g, ctx.saved.mode);
    return autograd::grad({y}, {x}, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/true);
  }
};

}  // namespace

Tensor max_pool2d(const Tensor& input, Pair kernel_size, OptionalPair stride, Pair padding,
                  Pair dilation) {
  check_4d("max_pool2d", input);
  for (int i = 0; i < 2; ++i) {
    KILN_CHECK(padding[i] * 2 <= kernel_size[i], "pad should be at most half of effective kernel "
               "size, but got pad=", padding[i], ", kernel_size=", kernel_size[i]);
  }
  const Im2ColGeometry g = ops::im2col_geometry(input.sizes(), kernel_size, dilation, padding,
                                                stride.value_or(kernel_size));
  if (routes::pool2d(input, g) != routes::Route::Composite) return Pool2dFn<true>::apply(input, g, PoolMode::Max);
  return max_pool2d_composite(input, g);
}

Tensor avg_pool2d(const Tensor& input, Pair kernel_size, OptionalPair stride, Pair padding,
                  bool count_include_pad) {
  check_4d("avg_pool2d", input);
  const Im2ColGeometry g = ops::im2col_geometry(input.sizes(), kernel_size, {1, 1}, padding,
                                                stride.value_or(kernel_size));
  // Without padding both divisors are the window size.
  const PoolMode mode = count_include_pad || (padding[0] == 0 && padding[1] == 0)
                            ? PoolMode::AverageCountingPadding
                            : PoolMode::AverageSkippingPadding;
  if (routes::pool2d(input, g) != routes::Route::Composite) return Pool2dFn<false>::apply(input, g, mode);
  return avg_pool2d_composite(input, g, mode);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size) {
  check_4d("adaptive_avg_pool2d", input);
  const std::int64_t H = input.sizes()[2], W = input.sizes()[3];
  KILN_CHECK(output_size[0] > 0 && output_size[1] > 0, "adaptive_avg_pool2d: output_size must be "
             "positive, got (", output_size[0], ", ", output_size[1], ")");
  // Adaptive pooling is linear: out = P_h x P_w^T, where row i of P averages input rows
  // [floor(i*H/oh), ceil((i+1)*H/oh)) (PyTorch's window rule). Two matmuls, exact gradients.
  auto pooling_matrix = [&](std::int64_t in, std::int64_t out) {
    Tensor p = zeros({out, in}, TensorOptions().dtype(input.dtype()));
    for (std::int64_t i = 0; i < out; ++i) {
      const std::int64_t start = (i * in) / out;
      const std::int64_t end = ((i + 1) * in + out - 1) / out;
      p.narrow(0, i, 1).narrow(1, start, end - start).fill_(1.0 / static_cast<double>(end - start));
    }
    return p.to(input.device());
  };
  const Tensor ph = pooling_matrix(H, output_size[0]);
  const Tensor pw = pooling_matrix(W, output_size[1]);
  return matmul(matmul(ph, input), pw.t());
}

}  // namespace kiln
