// core/cuda/cudnn_batch_norm.cpp — training-mode batch normalisation through cuDNN 9
// (cudnnBatchNormalizationForwardTraining / Backward, spatial mode: one mean and variance per
// channel over N and every spatial position). An input [N, C, d2, d3, ...] is described to
// cuDNN as [N, C, d2*d3*..., 1], which normalises the same elements. cuDNN updates the
// running statistics itself, with the unbiased variance, as PyTorch's batch_norm does; the
// saved mean and inverse standard deviation feed the backward.
// Read next: core/cuda/register.cpp.
#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cudnn_common.h"
#include "core/tensor.h"

namespace kiln::cuda {

namespace {

/// Descriptors for input-shaped data and for the [C] statistics derived from it.
struct BatchNormDescriptors {
  TensorDescriptor data, stats;

  explicit BatchNormDescriptors(const Tensor& input) {
    std::int64_t spatial = 1;
    for (std::int64_t d = 2; d < input.dim(); ++d) spatial *= input.sizes()[d];
    check_cudnn(cudnnSetTensor4dDescriptor(data.get(), CUDNN_TENSOR_NCHW,
                                           cudnn_data_type(input.dtype(), "cudnn_batch_norm"),
                                           cudnn_int(input.sizes()[0], "the batch size"),
                                           cudnn_int(input.sizes()[1], "the channel count"),
                                           cudnn_int(spatial, "the spatial size"), 1),
                "cudnnSetTensor4dDescriptor");
    check_cudnn(cudnnDeriveBNTensorDescriptor(stats.get(), data.get(), CUDNN_BATCHNORM_SPATIAL),
                "cudnnDeriveBNTensorDescriptor");
  }
};

void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data_ptr() : nullptr; }

}  // namespace

void cudnn_batch_norm_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                              const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  const int device = device_of(input);
  DeviceGuard guard(device);
  const BatchNormDescriptors d(input);
  const BlendFactors blend(input.dtype());
  check_cudnn(cudnnBatchNormalizationForwardTraining(
                  cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), d.data.get(),
                  input.raw_data_ptr(), d.data.get(), out.raw_data_ptr(), d.stats.get(), weight.raw_data_ptr(),
                  bias.raw_data_ptr(), momentum, data_or_null(running_mean), data_or_null(running_var), eps,
                  save_mean.raw_data_ptr(), save_invstd.raw_data_ptr()),
              "cudnnBatchNormalizationForwardTraining");
}

void cudnn_batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                               const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                               const Tensor& save_mean, const Tensor& save_invstd, double eps) {
  const int device = device_of(input);
  DeviceGuard guard(device);
  const BatchNormDescriptors d(input);
  const BlendFactors blend(input.dtype());
  check_cudnn(cudnnBatchNormalizationBackward(cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(),
                                              blend.zero(), blend.one(), blend.zero(), d.data.get(),
                                              input.raw_data_ptr(), d.data.get(), grad_output.raw_data_ptr(),
                                              d.data.get(), grad_input.raw_data_ptr(), d.stats.get(),
                                              weight.raw_data_ptr(), grad_weight.raw_data_ptr(),
                                              grad_bias.raw_data_ptr(), eps, save_mean.raw_data_ptr(),
                                              save_invstd.raw_data_ptr()),
              "cudnnBatchNormalizationBackward");
}

}  // namespace kiln::cuda
