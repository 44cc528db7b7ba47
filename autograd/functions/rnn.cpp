// autograd/functions/rnn.cpp — the LSTM layer: the fused op (forward and backward through
// time on preallocated buffers) and the composed recurrence it replaces.
#include "autograd/functions/rnn.h"

#include <vector>

#include "autograd/function.h"
#include "autograd/functions/linalg.h"
#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/linalg.h"
#include "core/ops/rnn.h"
#include "core/ops/view.h"

namespace kiln {

// Note [The fused LSTM layer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Written as differentiable ops, one LSTM step is a matrix product and about a dozen
// elementwise ops, each allocating its output and saving its inputs for backward; a sequence
// of 128 steps makes thousands of graph nodes, and the step ran at 3-5x the time of its
// matrix products. The fused layer is one graph node for the whole sequence (cuDNN's shape of
// the problem). Forward allocates its buffers once: the hidden and cell states of every step
// ([T + 1, B, H] each, the initial state in the first or last slot), the activated gates
// ([T, B, 4H], which backward needs) and one [B, 4H] product. Each step is then one GEMM into
// that product (ops::mm_out) and one pass of the fused cell kernel (core/cpu/lstm_cell.cpp);
// nothing is allocated per step. Backward runs the steps in the opposite order: the cell kernel
// turns dL/dh and dL/dc into the gates' gradient, in place in a [T, B, 4H] buffer, and one GEMM
// per step carries dL/dh to the step before. The weight's gradient is then one GEMM over all
// steps at once, gates' gradient [T·B, 4H]ᵀ @ previous states [T·B, H], instead of T small ones,
// and the gates' gradient is the input projections' gradient as it stands.
//
// With create_graph, backward is written again as differentiable ops from a recomputed forward,
// so the gradient can itself be differentiated (gradgradcheck), as PyTorch's CPU LSTM can be.

std::pair<Tensor, Tensor> lstm_cell_from_gates(const Tensor& gates, const Tensor& c) {
  const TensorList g = gates.chunk(4, 1);  // i, f, g, o
  const Tensor c_next = g[1].sigmoid() * c + g[0].sigmoid() * g[2].tanh();
  return {g[3].sigmoid() * c_next.tanh(), c_next};
}

namespace {

using autograd::Context;
using autograd::Function;

/// The recurrence as differentiable ops, one step at a time.
TensorList composed_lstm_layer(const Tensor& projected, const Tensor& h0, const Tensor& c0, const Tensor& weight_hh,
                               bool reverse) {
  const std::int64_t steps = projected.sizes()[0];
  const TensorList step_inputs = projected.unbind(0);
  Tensor h = h0, c = c0;
  TensorList out(static_cast<std::size_t>(steps));
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t t = reverse ? steps - 1 - s : s;
    std::tie(h, c) = lstm_cell_from_gates(mm(h, weight_hh.t()) + step_inputs[static_cast<std::size_t>(t)], c);
    out[static_cast<std::size_t>(t)] = h;
  }
  const Tensor output = steps > 0 ? stack(out, 0)
                                  : ops::empty_output({0, h0.sizes()[0], h0.sizes()[1]}, h0.dtype(), h0.device(),
                                                      "lstm");
  return {output, h, c};
}

/// Backward through time as differentiable ops (create_graph): the forward recomputed, then
/// the gradient formulas of core/cpu/lstm_cell.cpp step by step.
TensorList differentiable_lstm_backward(const Tensor& projected, const Tensor& h0, const Tensor& c0,
                                        const Tensor& weight_hh, bool reverse, const TensorList& grads) {
  const std::int64_t steps = projected.sizes()[0];
  const std::size_t n = static_cast<std::size_t>(steps);
  std::vector<TensorList> gates(n);  // each step's activated i, f, g, o
  TensorList cells(n), previous_h(n), previous_c(n);
  const TensorList step_inputs = projected.unbind(0), step_grads = grads[0].unbind(0);
  Tensor h = h0, c = c0;
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::size_t t = static_cast<std::size_t>(reverse ? steps - 1 - s : s);
    const TensorList g = (mm(h, weight_hh.t()) + step_inputs[t]).chunk(4, 1);
    gates[t] = {g[0].sigmoid(), g[1].sigmoid(), g[2].tanh(), g[3].sigmoid()};
    previous_h[t] = h;
    previous_c[t] = c;
    const TensorList& a = gates[t];
    c = a[1] * c + a[0] * a[2];
    h = a[3] * c.tanh();
    cells[t] = c;
  }
  Tensor dh = grads[1], dc = grads[2];
  TensorList grad_gates(n);
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::size_t t = static_cast<std::size_t>(reverse ? s : steps - 1 - s);
    const TensorList& a = gates[t];  // i, f, g, o
    dh = dh + step_grads[t];
    const Tensor tanh_c = cells[t].tanh();
    const Tensor dc_total = dc + dh * a[3] * (1 - tanh_c * tanh_c);
    grad_gates[t] = cat({dc_total * a[2] * a[0] * (1 - a[0]), dc_total * previous_c[t] * a[1] * (1 - a[1]),
                         dc_total * a[0] * (1 - a[2] * a[2]), dh * tanh_c * a[3] * (1 - a[3])},
                        1);
    dc = dc_total * a[1];
    dh = mm(grad_gates[t], weight_hh);
  }
  const Tensor grad_projected = stack(grad_gates, 0);
  const std::int64_t rows = steps * h0.sizes()[0];
  const Tensor grad_weight = mm(grad_projected.reshape({rows, weight_hh.sizes()[0]}).t(),
                                stack(previous_h, 0).reshape({rows, h0.sizes()[1]}));
  return {grad_projected, dh, dc, grad_weight};
}

struct LstmLayerFn : Function<LstmLayerFn> {
  static constexpr const char* name = "LstmLayerBackward0";
  struct Saved {
    bool reverse = false;
  };

  static TensorList forward(Context<LstmLayerFn>& ctx, const Tensor& projected, const Tensor& h0, const Tensor& c0,
                            const Tensor& weight_hh, bool reverse) {
    const std::int64_t steps = projected.sizes()[0], batch = h0.sizes()[0], hidden = h0.sizes()[1];
    const DType dtype = projected.dtype();
    const Device device = projected.device();
    const Tensor x = ops::contiguous(projected);
    const Tensor states = ops::empty_output({steps + 1, batch, hidden}, dtype, device, "lstm");
    const Tensor cells = ops::empty_output({steps + 1, batch, hidden}, dtype, device, "lstm");
    const Tensor gates = ops::empty_output({steps, batch, 4 * hidden}, dtype, device, "lstm");
    const Tensor recurrent = ops::empty_output({batch, 4 * hidden}, dtype, device, "lstm");
    const std::int64_t first = reverse ? steps : 0, last = reverse ? 0 : steps;
    ops::copy_data(ops::select(states, 0, first), h0);
    ops::copy_data(ops::select(cells, 0, first), c0);
    const Tensor w_t = ops::transpose(weight_hh, 0, 1);
    for (std::int64_t s = 0; s < steps; ++s) {
      const std::int64_t t = reverse ? steps - 1 - s : s, previous = reverse ? t + 1 : t, slot = reverse ? t : t + 1;
      ops::mm_out(recurrent, ops::select(states, 0, previous), w_t);
      ops::lstm_cell_forward(ops::select(gates, 0, t), ops::select(cells, 0, slot), ops::select(states, 0, slot),
                             recurrent, ops::select(x, 0, t), ops::select(cells, 0, previous));
    }
    ctx.saved.reverse = reverse;
    ctx.save_for_backward({projected, h0, c0, weight_hh, states, cells, gates});
    return {ops::narrow(states, 0, reverse ? 0 : 1, steps), ops::clone(ops::select(states, 0, last)),
            ops::clone(ops::select(cells, 0, last))};
  }

  static TensorList backward(Context<LstmLayerFn>& ctx, const TensorList& grads) {
    const TensorList s = ctx.get_saved_variables();  // projected, h0, c0, weight_hh, states, cells, gates
    const Tensor &projected = s[0], &h0 = s[1], &c0 = s[2], &weight_hh = s[3], &states = s[4], &cells = s[5],
                 &gates = s[6];
    const bool reverse = ctx.saved.reverse;
    if (is_grad_enabled()) {
      return differentiable_lstm_backward(projected, h0, c0, weight_hh, reverse, grads);
    }
    const std::int64_t steps = projected.sizes()[0], batch = h0.sizes()[0], hidden = h0.sizes()[1];
    const DType dtype = projected.dtype();
    const Device device = projected.device();
    const Tensor grad_output = ops::contiguous(grads[0]);
    const Tensor grad_gates = ops::empty_output({steps, batch, 4 * hidden}, dtype, device, "lstm_backward");
    const Tensor grad_h = ops::empty_output({batch, hidden}, dtype, device, "lstm_backward");
    const Tensor grad_c = ops::empty_output({batch, hidden}, dtype, device, "lstm_backward");
    ops::copy_data(grad_h, grads[1]);
    ops::copy_data(grad_c, grads[2]);
    std::int64_t later = -1;  // the step whose gradient backward handled just before
    for (std::int64_t i = 0; i < steps; ++i) {
      const std::int64_t t = reverse ? i : steps - 1 - i, previous = reverse ? t + 1 : t, slot = reverse ? t : t + 1;
      if (later >= 0) ops::mm_out(grad_h, ops::select(grad_gates, 0, later), weight_hh);
      ops::lstm_cell_backward(ops::select(grad_gates, 0, t), grad_c, grad_h, ops::select(grad_output, 0, t),
                              ops::select(gates, 0, t), ops::select(cells, 0, slot), ops::select(cells, 0, previous));
      later = t;
    }
    Tensor grad_h0, grad_weight;
    if (ctx.needs_input_grad(1)) grad_h0 = ops::mm(ops::select(grad_gates, 0, later), weight_hh);
    if (ctx.needs_input_grad(3)) {
      const std::int64_t rows = steps * batch;
      const Tensor previous_states = ops::narrow(states, 0, reverse ? 1 : 0, steps);
      grad_weight = ops::mm(ops::transpose(ops::view(grad_gates, {rows, 4 * hidden}), 0, 1),
                            ops::view(previous_states, {rows, hidden}));
    }
    return {grad_gates, grad_h0, grad_c, grad_weight};
  }
};

}  // namespace

TensorList lstm_layer(const Tensor& projected, const Tensor& h0, const Tensor& c0, const Tensor& weight_hh,
                      bool reverse) {
  KILN_CHECK(projected.dim() == 3 && h0.dim() == 2 && c0.dim() == 2 && weight_hh.dim() == 2,
             "lstm_layer: expected projected [T, B, 4H], h0 and c0 [B, H] and weight_hh [4H, H], got ",
             projected.sizes(), ", ", h0.sizes(), ", ", c0.sizes(), " and ", weight_hh.sizes());
  const std::int64_t batch = h0.sizes()[0], hidden = h0.sizes()[1];
  KILN_CHECK(projected.sizes()[1] == batch && projected.sizes()[2] == 4 * hidden && c0.sizes() == h0.sizes() &&
                 weight_hh.sizes() == IntArrayRef({4 * hidden, hidden}),
             "lstm_layer: expected projected [T, ", batch, ", ", 4 * hidden, "], c0 [", batch, ", ", hidden,
             "] and weight_hh [", 4 * hidden, ", ", hidden, "], got ", projected.sizes(), ", ", c0.sizes(), " and ",
             weight_hh.sizes());
  const bool same = h0.dtype() == projected.dtype() && c0.dtype() == projected.dtype() &&
                    weight_hh.dtype() == projected.dtype() && h0.device() == projected.device() &&
                    c0.device() == projected.device() && weight_hh.device() == projected.device();
  if (same && projected.sizes()[0] > 0 && batch > 0 && hidden > 0 && ops::can_fuse_lstm(projected)) {
    return LstmLayerFn::apply(projected, h0, c0, weight_hh, reverse);
  }
  return composed_lstm_layer(projected, h0, c0, weight_hh, reverse);
}

}  // namespace kiln
