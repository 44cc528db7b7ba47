// core/cpu/lstm_cell.cpp — one LSTM time step over a batch in one pass per direction: the
// gate activations, the new cell and hidden state forward; the gates' gradients and the cell
// gradient backward. Composed from separate ops, the same step makes a dozen passes over
// [B, 4H] or [B, H] and as many temporaries (Note [The fused LSTM layer]).
// Read next: autograd/functions/rnn.cpp.
#include <Eigen/Core>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/cpu/rows.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

using LstmTypes = CpuTypes<LstmCellDTypes>;

}  // namespace

void lstm_cell_forward_kernel(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                              const Tensor& projected, const Tensor& c_prev) {
  const std::int64_t batch = h.sizes()[0], hidden = h.sizes()[1], width = 4 * hidden;
  dispatch_dtype<LstmTypes>(h.dtype(), "lstm_cell_cpu", [&]<typename T>() {
    T* const gates_p = gates.data_ptr<T>();
    T* const c_p = c.data_ptr<T>();
    T* const h_p = h.data_ptr<T>();
    const T* const rec_p = recurrent.data_ptr<T>();
    const T* const proj_p = projected.data_ptr<T>();
    const T* const c_prev_p = c_prev.data_ptr<T>();
    parallel_for(0, batch, rows_per_task(width), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        Row<T> g(gates_p + b * width, width);
        g = ConstRow<T>(rec_p + b * width, width) + ConstRow<T>(proj_p + b * width, width);
        // σ for i and f (the first half), tanh for g, σ for o.
        g.head(2 * hidden) = g.head(2 * hidden).logistic();
        g.segment(2 * hidden, hidden) = g.segment(2 * hidden, hidden).tanh();
        g.tail(hidden) = g.tail(hidden).logistic();
        Row<T> c_row(c_p + b * hidden, hidden);
        c_row = g.segment(hidden, hidden) * ConstRow<T>(c_prev_p + b * hidden, hidden) +
                g.head(hidden) * g.segment(2 * hidden, hidden);
        Row<T>(h_p + b * hidden, hidden) = g.tail(hidden) * c_row.tanh();
      }
    });
  });
}

// With i, f, g, o the activated gates, c = f c_prev + i g and h = o tanh(c):
//   dc_total = dc + dh o (1 - tanh²(c))
//   di = dc_total g · i (1 - i)     df = dc_total c_prev · f (1 - f)
//   dg = dc_total i · (1 - g²)      do = dh tanh(c) · o (1 - o)
//   dc_prev = dc_total f
void lstm_cell_backward_kernel(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h,
                               const Tensor& grad_output, const Tensor& gates, const Tensor& c, const Tensor& c_prev) {
  const std::int64_t batch = c.sizes()[0], hidden = c.sizes()[1], width = 4 * hidden;
  dispatch_dtype<LstmTypes>(c.dtype(), "lstm_cell_backward_cpu", [&]<typename T>() {
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    T* const dgates_p = grad_gates.data_ptr<T>();
    T* const dc_p = grad_c.data_ptr<T>();
    const T* const dh_p = grad_h.data_ptr<T>();
    const T* const dout_p = grad_output.defined() ? grad_output.data_ptr<T>() : nullptr;
    const T* const gates_p = gates.data_ptr<T>();
    const T* const c_p = c.data_ptr<T>();
    const T* const c_prev_p = c_prev.data_ptr<T>();
    parallel_for(0, batch, rows_per_task(width), [&](std::int64_t begin, std::int64_t end) {
      Array dh(hidden), tanh_c(hidden), dc_total(hidden);  // per task, not per row
      for (std::int64_t b = begin; b < end; ++b) {
        const ConstRow<T> gate(gates_p + b * width, width);
        const auto i = gate.head(hidden), f = gate.segment(hidden, hidden), g = gate.segment(2 * hidden, hidden),
                   o = gate.tail(hidden);
        dh = ConstRow<T>(dh_p + b * hidden, hidden);
        if (dout_p != nullptr) dh += ConstRow<T>(dout_p + b * hidden, hidden);
        tanh_c = ConstRow<T>(c_p + b * hidden, hidden).tanh();
        Row<T> dc(dc_p + b * hidden, hidden);
        dc_total = dc + dh * o * (T(1) - tanh_c.square());
        Row<T> dgate(dgates_p + b * width, width);
        dgate.head(hidden) = dc_total * g * i * (T(1) - i);
        dgate.segment(hidden, hidden) = dc_total * ConstRow<T>(c_prev_p + b * hidden, hidden) * f * (T(1) - f);
        dgate.segment(2 * hidden, hidden) = dc_total * i * (T(1) - g.square());
        dgate.tail(hidden) = dh * tanh_c * o * (T(1) - o);
        dc = dc_total * f;
      }
    });
  });
}

}  // namespace kiln::cpu
