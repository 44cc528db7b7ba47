// core/cuda/cudnn_pool.cpp — 2-D max and average pooling through cuDNN 9
// (cudnnPoolingForward / cudnnPoolingBackward) on the current stream. Max pooling runs in
// cuDNN's deterministic mode and propagates NaN, as PyTorch's max_pool2d does; padding never
// wins a max window. The averages divide by the whole window or by its elements inside the
// input (count_include_pad). cuDNN's pooling has no dilation: dilated windows stay on Kiln's
// own kernels (routes::pool2d, core/routes.h).
// Read next: core/cuda/cudnn_batch_norm.cpp.
#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cudnn_common.h"
#include "core/kernel_params.h"
#include "core/tensor.h"

namespace kiln::cuda {

namespace {

using PoolingDescriptor =
    CudnnDescriptor<cudnnPoolingDescriptor_t, &cudnnCreatePoolingDescriptor, &cudnnDestroyPoolingDescriptor>;

cudnnPoolingMode_t pooling_mode(PoolMode mode) {
  switch (mode) {
    case PoolMode::Max: return CUDNN_POOLING_MAX_DETERMINISTIC;
    case PoolMode::AverageCountingPadding: return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case PoolMode::AverageSkippingPadding: return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  return CUDNN_POOLING_MAX_DETERMINISTIC;
}

/// The descriptors of one pooling: input x [N, C, H, W], output y, and the window.
struct PoolDescriptors {
  TensorDescriptor x, y;
  PoolingDescriptor pool;

  PoolDescriptors(const Tensor& input, const Im2ColGeometry& g, PoolMode mode) {
    const cudnnDataType_t type = cudnn_data_type(input.dtype(), "cudnn_pooling");
    const int n = cudnn_int(input.sizes()[0], "the batch size"), c = cudnn_int(input.sizes()[1], "the channel count");
    check_cudnn(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, type, n, c, cudnn_int(g.height, "the height"),
                                           cudnn_int(g.width, "the width")),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, type, n, c, cudnn_int(g.out_h, "out_h"),
                                           cudnn_int(g.out_w, "out_w")),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnSetPooling2dDescriptor(pool.get(), pooling_mode(mode), CUDNN_PROPAGATE_NAN,
                                            cudnn_int(g.kernel_h, "kernel_h"), cudnn_int(g.kernel_w, "kernel_w"),
                                            cudnn_int(g.pad_h, "pad_h"), cudnn_int(g.pad_w, "pad_w"),
                                            cudnn_int(g.stride_h, "stride_h"), cudnn_int(g.stride_w, "stride_w")),
                "cudnnSetPooling2dDescriptor");
  }
};

}  // namespace

void cudnn_pool2d_forward(const Tensor& out, const Tensor& input, const Im2ColGeometry& g, PoolMode mode) {
  const int device = device_of(input);
  DeviceGuard guard(device);
  const PoolDescriptors d(input, g, mode);
  const BlendFactors blend(input.dtype());
  check_cudnn(cudnnPoolingForward(cudnn_handle(device), d.pool.get(), blend.one(), d.x.get(), input.raw_data_ptr(),
                                  blend.zero(), d.y.get(), out.raw_data_ptr()),
              "cudnnPoolingForward");
}

void cudnn_pool2d_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& input,
                           const Tensor& output, const Im2ColGeometry& g, PoolMode mode) {
  const int device = device_of(input);
  DeviceGuard guard(device);
  const PoolDescriptors d(input, g, mode);
  const BlendFactors blend(input.dtype());
  check_cudnn(cudnnPoolingBackward(cudnn_handle(device), d.pool.get(), blend.one(), d.y.get(), output.raw_data_ptr(),
                                   d.y.get(), grad_output.raw_data_ptr(), d.x.get(), input.raw_data_ptr(),
                                   blend.zero(), d.x.get(), grad_input.raw_data_ptr()),
              "cudnnPoolingBackward");
}

}  // namespace kiln::cuda
