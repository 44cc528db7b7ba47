// core/cuda/rnn.cu — the fused LSTM step on the GPU: one thread per (batch row, hidden unit)
// reads that unit's four gates and writes its cell and hidden state (forward), or the four
// gates' gradients and the cell gradient (backward). The arithmetic is the CPU kernel's
// (core/cpu/lstm_cell.cpp), element for element.
// Read next: core/cuda/register.cpp.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

using LstmTypes = CudaTypes<LstmCellDTypes>;

template <class T>
__device__ T sigmoid(T x) {
  return T(1) / (T(1) + exp(-x));
}

template <class T>
__global__ void lstm_forward_kernel(T* gates, T* c, T* h, const T* recurrent, const T* projected, const T* c_prev,
                                    std::int64_t batch, std::int64_t hidden) {
  const std::int64_t n = batch * hidden, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const std::int64_t b = k / hidden, j = k % hidden, row = b * 4 * hidden;
    auto pre = [&](std::int64_t gate) { return recurrent[row + gate * hidden + j] + projected[row + gate * hidden + j]; };
    const T i = sigmoid(pre(0)), f = sigmoid(pre(1)), g = tanh(pre(2)), o = sigmoid(pre(3));
    gates[row + j] = i;
    gates[row + hidden + j] = f;
    gates[row + 2 * hidden + j] = g;
    gates[row + 3 * hidden + j] = o;
    const T cell = f * c_prev[k] + i * g;
    c[k] = cell;
    h[k] = o * tanh(cell);
  }
}

template <class T>
__global__ void lstm_backward_kernel(T* grad_gates, T* grad_c, const T* grad_h, const T* grad_output, const T* gates,
                                     const T* c, const T* c_prev, std::int64_t batch, std::int64_t hidden) {
  const std::int64_t n = batch * hidden, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const std::int64_t b = k / hidden, j = k % hidden, row = b * 4 * hidden;
    const T i = gates[row + j], f = gates[row + hidden + j], g = gates[row + 2 * hidden + j],
            o = gates[row + 3 * hidden + j];
    const T dh = grad_h[k] + (grad_output != nullptr ? grad_output[k] : T(0));
    const T tanh_c = tanh(c[k]);
    const T dc_total = grad_c[k] + dh * o * (T(1) - tanh_c * tanh_c);
    grad_gates[row + j] = dc_total * g * i * (T(1) - i);
    grad_gates[row + hidden + j] = dc_total * c_prev[k] * f * (T(1) - f);
    grad_gates[row + 2 * hidden + j] = dc_total * i * (T(1) - g * g);
    grad_gates[row + 3 * hidden + j] = dh * tanh_c * o * (T(1) - o);
    grad_c[k] = dc_total * f;
  }
}

}  // namespace

bool launch_lstm_cell_forward(DType dtype, char* gates, char* c, char* h, const char* recurrent, const char* projected,
                              const char* c_prev, std::int64_t batch, std::int64_t hidden, StreamHandle stream) {
  if (batch * hidden == 0) return true;
  return dispatch<LstmTypes>(dtype, [&]<typename T>() {
    lstm_forward_kernel<T><<<blocks_for(batch * hidden), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(gates), reinterpret_cast<T*>(c), reinterpret_cast<T*>(h),
        reinterpret_cast<const T*>(recurrent), reinterpret_cast<const T*>(projected),
        reinterpret_cast<const T*>(c_prev), batch, hidden);
    check_launch("lstm_cell_cuda");
  });
}

bool launch_lstm_cell_backward(DType dtype, char* grad_gates, char* grad_c, const char* grad_h, const char* grad_output,
                               const char* gates, const char* c, const char* c_prev, std::int64_t batch,
                               std::int64_t hidden, StreamHandle stream) {
  if (batch * hidden == 0) return true;
  return dispatch<LstmTypes>(dtype, [&]<typename T>() {
    lstm_backward_kernel<T><<<blocks_for(batch * hidden), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(grad_gates), reinterpret_cast<T*>(grad_c), reinterpret_cast<const T*>(grad_h),
        reinterpret_cast<const T*>(grad_output), reinterpret_cast<const T*>(gates), reinterpret_cast<const T*>(c),
        reinterpret_cast<const T*>(c_prev), batch, hidden);
    check_launch("lstm_cell_backward_cuda");
  });
}

}  // namespace kiln::cuda
