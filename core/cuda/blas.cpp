// core/cuda/blas.cpp — batched matrix multiply through cuBLAS: cublasGemmStridedBatchedEx on
// the current stream (cublasGemmEx for a batch of one), Float16/BFloat16 inputs accumulating in
// Float32 on tensor cores, Float32 in full precision unless allow_tf32 is set, Float64 in double.
// Kiln's row-major product C = A B is cuBLAS's column-major C^T = B^T A^T, so the operands swap
// places and nothing is copied unless a layout has no unit stride.
// Read next: core/cuda/register.cpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <map>
#include <mutex>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/error.h"
#include "core/ops/copy.h"
#include "core/tensor.h"

namespace kiln::cuda {

namespace {

/// cuBLAS's sizes are int: a larger one would be truncated (2^32 + 5 rows become 5, computed
/// without complaint), so it is an error first, as cudnn_int is for cuDNN.
int cublas_int(std::int64_t v, const char* what) {
  KILN_CHECK(v >= 0 && v <= INT_MAX, "cuBLAS takes 32-bit sizes, but ", what, " is ", v);
  return static_cast<int>(v);
}

const char* status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

void check_cublas(cublasStatus_t status, const char* call) {
  KILN_CHECK(status == CUBLAS_STATUS_SUCCESS, "CUDA error: ", status_name(status), " when calling `", call, "`");
}

/// One handle per (thread, device): cuBLAS handles must not be shared across threads.
cublasHandle_t handle_for(int device) {
  thread_local std::map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  DeviceGuard guard(device);
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate(handle)");
  handles[device] = handle;  // lives as long as the thread
  return handle;
}

/// How one [rows, cols] operand with strides (s_row, s_col) maps onto cuBLAS: transposed or
/// not, and the leading dimension. Returns false when neither stride is 1.
struct Operand {
  cublasOperation_t op;
  std::int64_t ld;
};
bool as_operand(std::int64_t rows, std::int64_t cols, std::int64_t s_row, std::int64_t s_col, Operand& out) {
  // Row-major [rows, cols] is column-major [cols, rows]: cuBLAS sees the transpose, untransposed.
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols)) {
    out = {CUBLAS_OP_N, std::max<std::int64_t>(rows == 1 ? cols : s_row, std::max<std::int64_t>(cols, 1))};
    return true;
  }
  if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows)) {
    out = {CUBLAS_OP_T, std::max<std::int64_t>(cols == 1 ? rows : s_col, std::max<std::int64_t>(rows, 1))};
    return true;
  }
  return false;
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: break;
  }
  detail::throw_error<NotImplementedError>(std::source_location::current(), "\"addmm_cuda\" not implemented for '",
                                           scalar_type_name(dtype), "'");
}

}  // namespace

void bmm_kernel(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const int device = out.device().index();
  DeviceGuard guard(device);
  const std::int64_t batch = out.sizes()[0], M = a_in.sizes()[1], K = a_in.sizes()[2], N = b_in.sizes()[2];
  if (batch == 0 || M == 0 || N == 0) return;
  const cudaDataType_t type = data_type(out.dtype());
  Tensor a = a_in, b = b_in;
  Operand oa{}, ob{};
  if (!as_operand(M, K, a.strides()[1], a.strides()[2], oa)) {
    a = ops::contiguous(a);
    as_operand(M, K, a.strides()[1], a.strides()[2], oa);
  }
  if (!as_operand(K, N, b.strides()[1], b.strides()[2], ob)) {
    b = ops::contiguous(b);
    as_operand(K, N, b.strides()[1], b.strides()[2], ob);
  }
  cublasHandle_t handle = handle_for(device);
  check_cublas(cublasSetStream(handle, current_cuda_stream(device)), "cublasSetStream");
  const bool is_double = out.dtype() == DType::Float64;
  const cublasComputeType_t compute =
      is_double ? CUBLAS_COMPUTE_64F
                : (out.dtype() == DType::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const double alpha_d = 1.0, beta_d = 0.0;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const void* alpha = is_double ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = is_double ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  if (K == 0) {  // cuBLAS with k = 0 scales C by beta: C = 0
    check(cudaMemsetAsync(out.raw_data_ptr(), 0, out.nbytes(), current_cuda_stream(device)), "cudaMemsetAsync");
    return;
  }
  // Column-major: C^T [N, M] = B^T [N, K] * A^T [K, M].
  const int n = cublas_int(N, "mat2's column count"), m = cublas_int(M, "mat1's row count");
  const int k = cublas_int(K, "the inner size"), batches = cublas_int(batch, "the batch size");
  const int ldb = cublas_int(ob.ld, "mat2's leading stride"), lda = cublas_int(oa.ld, "mat1's leading stride");
  // One product (every mm and linear) goes to cublasGemmEx, as PyTorch's mm does: cuBLAS's
  // heuristics pick kernels for it that the batched call does not (Float16 mm at 4096 and 8192
  // reached 0.86-0.88x a raw cublasGemmEx on the H200 through the batched call).
  if (batches == 1) {
    check_cublas(cublasGemmEx(handle, ob.op, oa.op, n, m, k, alpha, b.raw_data_ptr(), type, ldb, a.raw_data_ptr(),
                              type, lda, beta, out.raw_data_ptr(), type, n, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return;
  }
  check_cublas(cublasGemmStridedBatchedEx(handle, ob.op, oa.op, n, m, k, alpha, b.raw_data_ptr(), type, ldb,
                                          b.strides()[0], a.raw_data_ptr(), type, lda, a.strides()[0], beta,
                                          out.raw_data_ptr(), type, n, M * N, batches, compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace kiln::cuda
