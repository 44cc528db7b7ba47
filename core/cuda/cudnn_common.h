// core/cuda/cudnn_common.h — what every cuDNN call site shares: status codes as Kiln errors,
// one handle per (thread, device) bound to the current stream, descriptors owned for one call.
// Read next: core/cuda/cudnn_conv.cpp, core/cuda/cudnn_batch_norm.cpp.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "core/dtype.h"

namespace kiln::cuda {

/// Throws "cuDNN error: CUDNN_STATUS_BAD_PARAM when calling `call`" for a failed call.
void check_cudnn(cudnnStatus_t status, const char* call);

/// The calling thread's handle for `device`, set to the device's current stream.
cudnnHandle_t cudnn_handle(int device);

/// A cuDNN descriptor owned for one call.
template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { check_cudnn(Create(&handle_), "cudnnCreate...Descriptor"); }
  ~CudnnDescriptor() { Destroy(handle_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};
using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, &cudnnCreateTensorDescriptor, &cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, &cudnnCreateFilterDescriptor, &cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = CudnnDescriptor<cudnnConvolutionDescriptor_t, &cudnnCreateConvolutionDescriptor,
                                              &cudnnDestroyConvolutionDescriptor>;

/// cuDNN's name for a floating dtype; NotImplementedError naming `op` for any other.
cudnnDataType_t cudnn_data_type(DType dtype, const char* op);

/// A size as the 32-bit int cuDNN takes; a clear error when it does not fit.
int cudnn_int(std::int64_t v, const char* what);

/// The 1 and 0 blend factors: double for Float64 data, float otherwise.
struct BlendFactors {
  explicit BlendFactors(DType dtype) : is_double_(dtype == DType::Float64) {}
  const void* one() const { return is_double_ ? static_cast<const void*>(&one_d_) : &one_f_; }
  const void* zero() const { return is_double_ ? static_cast<const void*>(&zero_d_) : &zero_f_; }

 private:
  bool is_double_;
  double one_d_ = 1.0, zero_d_ = 0.0;
  float one_f_ = 1.0f, zero_f_ = 0.0f;
};

}  // namespace kiln::cuda
