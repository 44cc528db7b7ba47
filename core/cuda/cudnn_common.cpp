// core/cuda/cudnn_common.cpp — cuDNN handles and errors (see cudnn_common.h).
#include "core/cuda/cudnn_common.h"

#include <climits>
#include <map>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace kiln::cuda {

void check_cudnn(cudnnStatus_t status, const char* call) {
  KILN_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN error: ", cudnnGetErrorString(status), " when calling `", call,
             "`");
}

// Handles live as long as their thread: destroying them at exit races with the driver's own
// teardown (PyTorch leaks them for the same reason).
cudnnHandle_t cudnn_handle(int device) {
  thread_local std::map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it == handles.end()) {
    DeviceGuard guard(device);
    cudnnHandle_t handle = nullptr;
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    it = handles.emplace(device, handle).first;
  }
  check_cudnn(cudnnSetStream(it->second, current_cuda_stream(device)), "cudnnSetStream");
  return it->second;
}

cudnnDataType_t cudnn_data_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  detail::throw_error<NotImplementedError>(std::source_location::current(), "\"", op, "\" not implemented for '",
                                           scalar_type_name(dtype), "'");
}

int cudnn_int(std::int64_t v, const char* what) {
  KILN_CHECK(v >= 0 && v <= INT_MAX, "cuDNN takes 32-bit sizes, but ", what, " is ", v);
  return static_cast<int>(v);
}

}  // namespace kiln::cuda
