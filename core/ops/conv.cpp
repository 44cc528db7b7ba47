// core/ops/conv.cpp — raw unfold and fold (see Note [Convolution as unfold + GEMM]).
#include "core/ops/conv.h"

#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/copy.h"
#include "core/ops/index.h"
#include "core/ops/view.h"

namespace kiln::ops {

Im2ColGeometry im2col_geometry(IntArrayRef s, std::array<std::int64_t, 2> kernel,
                               std::array<std::int64_t, 2> dilation,
                               std::array<std::int64_t, 2> padding,
                               std::array<std::int64_t, 2> stride) {
  KILN_CHECK(s.size() == 4, "Expected 4D (batched) input [N, C, H, W], but got input of size: ", s);
  for (int i = 0; i < 2; ++i) {
    KILN_CHECK(kernel[i] > 0, "kernel size should be greater than zero, but got kernel_height: ",
               kernel[0], " kernel_width: ", kernel[1]);
    KILN_CHECK(stride[i] > 0, "stride should be greater than zero, but got stride_height: ",
               stride[0], " stride_width: ", stride[1]);
    KILN_CHECK(dilation[i] > 0, "dilation should be greater than zero, but got dilation_height: ",
               dilation[0], " dilation_width: ", dilation[1]);
    KILN_CHECK(padding[i] >= 0, "padding should be non-negative, but got pad_height: ", padding[0],
               " pad_width: ", padding[1]);
  }
  Im2ColGeometry g;
  g.channels = s[1];
  g.height = s[2];
  g.width = s[3];
  g.kernel_h = kernel[0];
  g.kernel_w = kernel[1];
  g.dilation_h = dilation[0];
  g.dilation_w = dilation[1];
  g.pad_h = padding[0];
  g.pad_w = padding[1];
  g.stride_h = stride[0];
  g.stride_w = stride[1];
  g.out_h = (g.height + 2 * g.pad_h - g.dilation_h * (g.kernel_h - 1) - 1) / g.stride_h + 1;
  g.out_w = (g.width + 2 * g.pad_w - g.dilation_w * (g.kernel_w - 1) - 1) / g.stride_w + 1;
  KILN_CHECK(g.out_h > 0 && g.out_w > 0, "Calculated output size: (", g.out_h, "x", g.out_w,
             "). Output size is too small for input of spatial size (", g.height, "x", g.width,
             ") and kernel (", g.kernel_h, "x", g.kernel_w, ")");
  return g;
}

Tensor unfold(const Tensor& x, const Im2ColGeometry& g, double pad_value) {
  KILN_CHECK(x.dim() == 4, "unfold: expected a 4-D input [N, C, H, W], got ", x.sizes());
  Tensor cols = empty_output({x.sizes()[0], g.channels * g.kernel_h * g.kernel_w, g.out_h * g.out_w},
                             x.dtype(), x.device(), "im2col");
  if (cols.numel() == 0) return cols;
  require_kernel(kernels_for(x.device().type()).im2col, "im2col", x.device())(cols, contiguous(x), g,
                                                                              pad_value);
  return cols;
}

Tensor fold(const Tensor& cols, const Im2ColGeometry& g) {
  const std::int64_t rows = g.channels * g.kernel_h * g.kernel_w;
  KILN_CHECK(cols.dim() == 3 && cols.sizes()[1] == rows && cols.sizes()[2] == g.out_h * g.out_w,
             "fold: expected input of size [N, ", rows, ", ", g.out_h * g.out_w, "], got ",
             cols.sizes());
  Tensor out = empty_output({cols.sizes()[0], g.channels, g.height, g.width}, cols.dtype(),
                            cols.device(), "col2im");
  fill_data(out, 0);
  if (out.numel() == 0) return out;
  require_kernel(kernels_for(cols.device().type()).col2im, "col2im", cols.device())(out, contiguous(cols), g);
  return out;
}

Tensor unfold_columns(const Tensor& x, const Im2ColGeometry& g) {
  KILN_CHECK(x.dim() == 4, "unfold_columns: expected a 4-D input [N, C, H, W], got ", x.sizes());
  const std::int64_t n = x.sizes()[0], rows = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;
  Tensor buffer = empty_output({rows, n, l}, x.dtype(), x.device(), "im2col");
  if (buffer.numel() > 0) {
    // The kernel writes image i's rows through a [N, rows, L] view of the [rows, N, L] buffer.
    require_kernel(kernels_for(x.device().type()).im2col, "im2col", x.device())(
        make_view(buffer, {n, rows, l}, {l, n * l, 1}, 0, "im2col"), contiguous(x), g, 0.0);
  }
  return make_view(buffer, {rows, n * l}, {n * l, 1}, 0, "im2col");
}

Tensor fold_columns(const Tensor& cols, const Im2ColGeometry& g, std::int64_t batch) {
  const std::int64_t rows = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;
  KILN_CHECK(cols.dim() == 2 && cols.sizes()[0] == rows && cols.sizes()[1] == batch * l,
             "fold_columns: expected input of size [", rows, ", ", batch * l, "], got ", cols.sizes());
  Tensor out = empty_output({batch, g.channels, g.height, g.width}, cols.dtype(), cols.device(), "col2im");
  fill_data(out, 0);
  if (out.numel() == 0) return out;
  const Tensor c = contiguous(cols);
  require_kernel(kernels_for(cols.device().type()).col2im, "col2im", cols.device())(
      out, make_view(c, {batch, rows, l}, {l, batch * l, 1}, c.storage_offset(), "col2im"), g);
  return out;
}

void check_convolution_bias(const Tensor& weight, const Tensor& bias) {
  const std::int64_t out_channels = weight.sizes()[0];
  KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.sizes()[0] == out_channels), "Given weight of size ",
             weight.sizes(), ", expected bias to be 1-dimensional with ", out_channels,
             " elements, but got bias of size ", bias.sizes(), " instead");
}

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                   std::int64_t groups) {
  if (bias.defined()) {
    common_device({{"input", &input}, {"weight", &weight}, {"bias", &bias}});
  } else {
    common_device({{"input", &input}, {"weight", &weight}});
  }
  check_floating("convolution", input);
  KILN_CHECK_TYPE(input.dtype() == weight.dtype(), "Input type (", scalar_type_name(input.dtype()),
                  ") and weight type (", scalar_type_name(weight.dtype()), ") should be the same");
  KILN_CHECK_TYPE(!bias.defined() || bias.dtype() == input.dtype(), "Input type (", scalar_type_name(input.dtype()),
                  ") and bias type (", scalar_type_name(bias.dtype()), ") should be the same");
  check_convolution_bias(weight, bias);
  Tensor out = empty_output({input.sizes()[0], weight.sizes()[0], g.out_h, g.out_w}, input.dtype(), input.device(),
                            "convolution");
  if (out.numel() == 0) return out;
  require_kernel(kernels_for(input.device().type()).conv2d.forward, "convolution", input.device())(
      out, contiguous(input), contiguous(weight), bias.defined() ? contiguous(bias) : bias, g, groups);
  return out;
}

namespace {

/// One of convolution's adjoints: `kernel` writes the gradient of the argument of
/// `result_sizes` from the output's gradient and the other argument.
template <class Kernel>
Tensor convolution_adjoint(Kernel kernel, const Tensor& grad_output, const Tensor& other, IntArrayRef result_sizes,
                           const Im2ColGeometry& g, std::int64_t groups) {
  Tensor result = empty_output(result_sizes, grad_output.dtype(), grad_output.device(), "convolution_backward");
  if (result.numel() == 0) return result;
  if (grad_output.numel() == 0 || other.numel() == 0) {
    fill_data(result, 0);
    return result;
  }
  require_kernel(kernel, "convolution_backward", grad_output.device())(result, contiguous(grad_output),
                                                                       contiguous(other), g, groups);
  return result;
}

}  // namespace

Tensor convolution_backward_input(const Tensor& grad_output, const Tensor& weight, IntArrayRef input_sizes,
                                  const Im2ColGeometry& g, std::int64_t groups) {
  return convolution_adjoint(kernels_for(grad_output.device().type()).conv2d.backward_input, grad_output, weight,
                             input_sizes, g, groups);
}

Tensor convolution_backward_weight(const Tensor& grad_output, const Tensor& input, IntArrayRef weight_sizes,
                                   const Im2ColGeometry& g, std::int64_t groups) {
  return convolution_adjoint(kernels_for(grad_output.device().type()).conv2d.backward_weight, grad_output, input,
                             weight_sizes, g, groups);
}

Tensor pool2d(const Tensor& x, const Im2ColGeometry& g, PoolMode mode) {
  KILN_CHECK(x.dim() == 4, "pool2d: expected a 4-D input [N, C, H, W], got ", x.sizes());
  Tensor out = empty_output({x.sizes()[0], x.sizes()[1], g.out_h, g.out_w}, x.dtype(), x.device(), "pool2d");
  if (out.numel() == 0) return out;
  require_kernel(kernels_for(x.device().type()).pool2d.forward, "pool2d", x.device())(out, contiguous(x), g, mode);
  return out;
}

Tensor pool2d_backward(const Tensor& grad_output, const Tensor& x, const Tensor& output, const Im2ColGeometry& g,
                       PoolMode mode) {
  Tensor grad_input = empty_output(x.sizes(), x.dtype(), x.device(), "pool2d_backward");
  if (grad_input.numel() == 0) return grad_input;
  if (output.numel() == 0) {
    fill_data(grad_input, 0);
    return grad_input;
  }
  require_kernel(kernels_for(x.device().type()).pool2d.backward, "pool2d_backward", x.device())(
      grad_input, contiguous(grad_output), contiguous(x), contiguous(output), g, mode);
  return grad_input;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Im2ColGeometry& g) {
  KILN_CHECK(x.dim() == 4, "max_pool2d: expected a 4-D input [N, C, H, W], got ", x.sizes());
  const Shape shape{x.sizes()[0], x.sizes()[1], g.out_h, g.out_w};
  Tensor values = empty_output(shape, x.dtype(), x.device(), "max_pool2d");
  Tensor indices = empty_output(shape, DType::Int64, x.device(), "max_pool2d");
  if (values.numel() == 0) return {values, indices};
  require_kernel(kernels_for(x.device().type()).max_pool2d, "max_pool2d", x.device())(values, indices, contiguous(x), g);
  return {values, indices};
}

Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Tensor& indices, IntArrayRef input_sizes) {
  common_device({{"grad_output", &grad_output}, {"indices", &indices}});
  check_index_dtype("max_pool2d_with_indices_backward", indices);
  KILN_CHECK(input_sizes.size() == 4 && grad_output.dim() == 4 && grad_output.sizes() == indices.sizes() &&
                 grad_output.sizes()[0] == input_sizes[0] && grad_output.sizes()[1] == input_sizes[1],
             "max_pool2d_with_indices_backward: expected grad_output and indices of one shape [N, C, oh, ow] "
             "for an input [N, C, H, W], got grad_output ",
             grad_output.sizes(), ", indices ", indices.sizes(), " and input ", input_sizes);
  Tensor grad_input = empty_output(input_sizes, grad_output.dtype(), grad_output.device(), "max_pool2d_backward");
  if (grad_input.numel() == 0) return grad_input;
  const MaxPoolBackwardKernel kernel = kernels_for(grad_output.device().type()).max_pool2d_backward;
  if (kernel != nullptr) {
    kernel(grad_input, contiguous(grad_output), contiguous(indices));
    return grad_input;
  }
  const std::int64_t planes = input_sizes[0] * input_sizes[1];
  fill_data(grad_input, 0.0);
  return view(scatter(view(grad_input, {planes, input_sizes[2] * input_sizes[3]}), 1, reshape(indices, {planes, -1}),
                      reshape(grad_output, {planes, -1}), true),
              input_sizes);
}

}  // namespace kiln::ops
