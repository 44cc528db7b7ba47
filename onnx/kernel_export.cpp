// onnx/kernel_export.cpp — each kernel family of core/kernels.h as ONNX nodes (opset 17).
// The argument lists are the kernel signatures' own (core/kernels.h says what each means).
// See onnx/kernel_export.h.
#include "onnx/kernel_export.h"

#include <algorithm>
#include <cmath>

#include "core/creation.h"
#include "core/error.h"

namespace kiln::onnx {

namespace {

using compiler::KernelCall;
using compiler::KernelFamily;

/// The recorded call of a kernel of type Fn, whose arguments() unpack as Fn's parameters.
template <class Fn>
struct CallOf;
template <class... A>
struct CallOf<void (*)(A...)> {
  using type = compiler::TypedCall<A...>;
};
template <class Fn>
const auto& arguments(const KernelCall& call) {
  return dynamic_cast<const typename CallOf<Fn>::type&>(call).arguments();
}

std::vector<std::int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

[[noreturn]] void no_export(const KernelCall& call) {
  std::string made;
  const std::vector<const Tensor*> args = call.tensors();
  const std::vector<bool> writes = call.writes();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (writes[i] && args[i]->defined()) {
      const std::string d = args[i]->describe();
      made = " (it would make " + (d.empty() ? std::string("a tensor") : d) + ")";
      break;
    }
  }
  KILN_CHECK_NOT_IMPLEMENTED(false, "onnx export: ", call.name(), " has no ONNX export", made);
  std::abort();  // unreachable: the check above throws
}

/// Nodes of one input and one output, same shape.
Value unary(GraphBuilder& g, const char* op, const Value& x) { return g.result(op, {x}, x.sizes); }

/// Nodes for out = op(a, b), numpy broadcasting.
Value binary(GraphBuilder& g, const char* op, const Value& a, const Value& b, const std::vector<std::int64_t>& sizes) {
  return g.result(op, {a, b}, sizes);
}

Value scalar_value(GraphBuilder& g, double v, DType dtype) { return Value{g.scalar(v, dtype), {}, -1}; }

void export_unary(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, in] = arguments<UnaryKernel>(call);
  const Value x = g.read(in);
  const DType t = out.dtype();
  Value y;
  switch (static_cast<UnaryOp>(call.id().op)) {
    case UnaryOp::Neg: y = unary(g, "Neg", x); break;
    case UnaryOp::Exp: y = unary(g, "Exp", x); break;
    case UnaryOp::Log: y = unary(g, "Log", x); break;
    case UnaryOp::Sqrt: y = unary(g, "Sqrt", x); break;
    case UnaryOp::Rsqrt: y = unary(g, "Reciprocal", unary(g, "Sqrt", x)); break;
    case UnaryOp::Abs: y = unary(g, "Abs", x); break;
    case UnaryOp::Sign: y = unary(g, "Sign", x); break;
    case UnaryOp::Relu: y = unary(g, "Relu", x); break;
    case UnaryOp::Sigmoid: y = unary(g, "Sigmoid", x); break;
    case UnaryOp::Tanh: y = unary(g, "Tanh", x); break;
    case UnaryOp::Erf: y = unary(g, "Erf", x); break;
    case UnaryOp::Reciprocal: y = unary(g, "Reciprocal", x); break;
    case UnaryOp::Gelu: {
      // The exact GELU as Kiln's functor computes it: 0.5 x (1 + erf(x / sqrt 2)); opset 17
      // has no Gelu op (it came in 20).
      const Value scaled = binary(g, "Mul", x, scalar_value(g, 0.70710678118654752440, t), x.sizes);
      const Value one_plus = binary(g, "Add", scalar_value(g, 1.0, t), unary(g, "Erf", scaled), x.sizes);
      const Value half_x = binary(g, "Mul", scalar_value(g, 0.5, t), x, x.sizes);
      y = binary(g, "Mul", half_x, one_plus, x.sizes);
      break;
    }
    default: no_export(call);
  }
  g.wrote(out, y, call.name());
}

void export_binary(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, a_t, b_t] = arguments<BinaryKernel>(call);
  const char* op = nullptr;
  bool negate = false;
  switch (static_cast<BinaryOp>(call.id().op)) {
    case BinaryOp::Add: op = "Add"; break;
    case BinaryOp::Sub: op = "Sub"; break;
    case BinaryOp::Mul: op = "Mul"; break;
    case BinaryOp::Div: op = "Div"; break;
    case BinaryOp::Pow: op = "Pow"; break;
    case BinaryOp::Maximum: op = "Max"; break;
    case BinaryOp::Minimum: op = "Min"; break;
    case BinaryOp::Eq: op = "Equal"; break;
    case BinaryOp::Ne: op = "Equal", negate = true; break;
    case BinaryOp::Lt: op = "Less"; break;
    case BinaryOp::Le: op = "LessOrEqual"; break;
    case BinaryOp::Gt: op = "Greater"; break;
    case BinaryOp::Ge: op = "GreaterOrEqual"; break;
    case BinaryOp::LogicalAnd: op = "And"; break;
    case BinaryOp::LogicalOr: op = "Or"; break;
    case BinaryOp::LogicalXor: op = "Xor"; break;
    default: no_export(call);
  }
  Value y = binary(g, op, g.read(a_t, true), g.read(b_t, true), sizes_of(out));
  if (negate) y = unary(g, "Not", y);
  g.wrote(out, y, call.name());
}

void export_reduce(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, in, dims, divisor] = arguments<ReduceKernel>(call);
  const Value x = g.read(in);
  const std::vector<std::int64_t> sizes = sizes_of(out);
  Value y;
  if (static_cast<ReduceOp>(call.id().op) == ReduceOp::Sum) {
    // Opset 13 made ReduceSum's axes an input; the other reductions keep the attribute until 18.
    y = g.result("ReduceSum", {x, Value{g.int64s(dims), {}, -1}}, sizes);
    if (divisor != 1.0) y = binary(g, "Div", y, scalar_value(g, divisor, out.dtype()), sizes);
  } else {
    const char* op = nullptr;
    switch (static_cast<ReduceOp>(call.id().op)) {
      case ReduceOp::Prod: op = "ReduceProd"; break;
      case ReduceOp::Amax: op = "ReduceMax"; break;
      case ReduceOp::Amin: op = "ReduceMin"; break;
      default: no_export(call);
    }
    ::onnx::NodeProto* n = nullptr;
    y = g.result(op, {x}, sizes, &n);
    set_ints(*n, "axes", dims);
  }
  g.wrote(out, y, call.name());
}

void export_var_mean(const KernelCall& call, GraphBuilder& g) {
  const auto& [var, mean, in, dims, divisor] = arguments<VarMeanKernel>(call);
  const Value x = g.read(in);
  const std::vector<std::int64_t> sizes = sizes_of(var);
  ::onnx::NodeProto* n = nullptr;
  const Value m = g.result("ReduceMean", {x}, sizes, &n);
  set_ints(*n, "axes", dims);
  const Value centred = binary(g, "Sub", x, m, x.sizes);
  const Value squares = binary(g, "Mul", centred, centred, x.sizes);
  const Value sum = g.result("ReduceSum", {squares, Value{g.int64s(dims), {}, -1}}, sizes);
  g.wrote(var, binary(g, "Div", sum, scalar_value(g, divisor, var.dtype()), sizes), call.name());
  if (mean.defined()) g.wrote(mean, m, call.name());
}

void export_arg_reduce(const KernelCall& call, GraphBuilder& g) {
  const auto& [values, indices, in, dim, is_max] = arguments<ArgReduceKernel>(call);
  const Value x = g.read(in);
  ::onnx::NodeProto* n = nullptr;
  const Value i = g.result(is_max ? "ArgMax" : "ArgMin", {x}, sizes_of(indices), &n);
  set_int(*n, "axis", dim);
  g.wrote(indices, i, call.name());
  if (values.defined()) {
    const Value v = g.result(is_max ? "ReduceMax" : "ReduceMin", {x}, sizes_of(values), &n);
    set_ints(*n, "axes", {dim});
    g.wrote(values, v, call.name());
  }
}

void export_where(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, cond_t, a_t, b_t] = arguments<WhereKernel>(call);
  const std::vector<std::int64_t> sizes = sizes_of(out);
  const Value cond = g.read(cond_t, true), a = g.read(a_t, true), b = g.read(b_t, true);
  if (out.dtype() != DType::Bool) return g.wrote(out, g.result("Where", {cond, a, b}, sizes), call.name());
  // ONNX Runtime has no Bool Where (triu of a Bool matrix makes one): (c and a) or (not c and b).
  const Value chosen_a = binary(g, "And", cond, a, sizes);
  const Value chosen_b = binary(g, "And", unary(g, "Not", cond), b, sizes);
  g.wrote(out, binary(g, "Or", chosen_a, chosen_b, sizes), call.name());
}

void export_copy(const KernelCall& call, GraphBuilder& g) {
  const auto& [dst, src] = arguments<CopyKernel>(call);
  Value x = g.read(src, true);
  if (src.dtype() != dst.dtype()) {
    ::onnx::NodeProto* n = nullptr;
    x = g.result("Cast", {x}, x.sizes, &n);
    set_int(*n, "to", onnx_type(dst.dtype()));
  }
  g.wrote(dst, g.expand(x, sizes_of(dst)), call.name());
}

void export_fill(const KernelCall& call, GraphBuilder& g) {
  const auto& [dst, value] = arguments<FillKernel>(call);
  const std::vector<std::int64_t> sizes = sizes_of(dst);
  const auto batch = std::find(sizes.begin(), sizes.end(), g.batch_size());
  if (g.batch_size() > 0 && batch != sizes.end()) {
    const int batch_dim = static_cast<int>(batch - sizes.begin());
    return g.wrote(dst, g.full_over_batch(value.to_double(), dst.dtype(), sizes, batch_dim), call.name());
  }
  g.wrote(dst, g.constant_of("filled", full(dst.sizes(), value, TensorOptions().dtype(dst.dtype()))), call.name());
}

void export_arange(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, start, step] = arguments<ArangeKernel>(call);
  // The same kernel again, on the host, makes the same numbers; arange's end is chosen half
  // a step past the last so that rounding cannot drop it, and anything beyond is cut off.
  const std::int64_t n = out.numel();
  const Scalar end = start.to_double() + step.to_double() * (static_cast<double>(n) - 0.5);
  const Tensor values = (start.is_floating_point() || step.is_floating_point())
                            ? arange(start, end, step, TensorOptions().dtype(out.dtype()))
                            : arange(start, Scalar(start.to_int() + step.to_int() * n), step,
                                     TensorOptions().dtype(out.dtype()));
  g.wrote(out, g.constant_of("arange", values.narrow(0, 0, n).contiguous().reshape(out.sizes())), call.name());
}

void export_bmm(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, a, c] = arguments<BmmKernel>(call);
  g.wrote(out, g.result("MatMul", {g.read(a, true), g.read(c, true)}, sizes_of(out)), call.name());
}

void export_bmm_bias(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, a, c, bias, relu] = arguments<BmmBiasKernel>(call);
  const std::vector<std::int64_t> sizes = sizes_of(out);
  Value y = g.result("MatMul", {g.read(a, true), g.read(c, true)}, sizes);
  y = binary(g, "Add", y, g.read(bias, true), sizes);
  if (relu) y = unary(g, "Relu", y);
  g.wrote(out, y, call.name());
}

void export_cat(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, inputs, dim] = arguments<CatKernel>(call);
  std::vector<Value> values;
  for (const Tensor& t : inputs) values.push_back(g.read(t));
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result("Concat", values, sizes_of(out), &n);
  set_int(*n, "axis", dim);
  g.wrote(out, y, call.name());
}

void export_index_select(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, in, dim, index] = arguments<IndexSelectKernel>(call);
  ::onnx::NodeProto* n = nullptr;
  // The batch travels with the indices (an embedding's ids), not the table.
  const Value ids = g.read(index);
  Value y = g.result("Gather", {g.read(in), ids}, sizes_of(out), &n);
  if (y.batch_dim < 0 && ids.batch_dim >= 0) {
    y.batch_dim = static_cast<int>(dim) + ids.batch_dim;
    y.batch_within = ids.batch_within;
  }
  set_int(*n, "axis", dim);
  g.wrote(out, y, call.name());
}

void export_gather(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, in, dim, index] = arguments<GatherKernel>(call);
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result("GatherElements", {g.read(in), g.read(index)}, sizes_of(out), &n);
  set_int(*n, "axis", dim);
  g.wrote(out, y, call.name());
}

/// A window's attributes; ceil_mode when Kiln's output is larger than the floor formula's.
void set_window(::onnx::NodeProto& n, const Im2ColGeometry& w, bool dilations, bool ceil_mode_attribute) {
  set_ints(n, "kernel_shape", {w.kernel_h, w.kernel_w});
  set_ints(n, "pads", {w.pad_h, w.pad_w, w.pad_h, w.pad_w});
  set_ints(n, "strides", {w.stride_h, w.stride_w});
  if (dilations) set_ints(n, "dilations", {w.dilation_h, w.dilation_w});
  if (!ceil_mode_attribute) return;
  const std::int64_t floor_h = (w.height + 2 * w.pad_h - w.dilation_h * (w.kernel_h - 1) - 1) / w.stride_h + 1;
  const std::int64_t floor_w = (w.width + 2 * w.pad_w - w.dilation_w * (w.kernel_w - 1) - 1) / w.stride_w + 1;
  if (w.out_h != floor_h || w.out_w != floor_w) set_int(n, "ceil_mode", 1);
}

void export_max_pool(const KernelCall& call, GraphBuilder& g) {
  const auto& [values, indices, input, window] = arguments<MaxPoolKernel>(call);
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result("MaxPool", {g.read(input)}, sizes_of(values), &n);
  set_window(*n, window, true, true);
  g.wrote(values, y, call.name());
  g.unusable(indices, "onnx export: max_pool2d's indices have no ONNX export (they are for its backward)");
}

void export_pool(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, input, window, mode] = arguments<PoolKernels::Forward>(call);
  ::onnx::NodeProto* n = nullptr;
  const bool max = mode == PoolMode::Max;
  const Value y = g.result(max ? "MaxPool" : "AveragePool", {g.read(input)}, sizes_of(out), &n);
  // AveragePool takes dilations from opset 19 only; Kiln's pools have none.
  set_window(*n, window, max, true);
  if (mode == PoolMode::AverageCountingPadding) set_int(*n, "count_include_pad", 1);
  g.wrote(out, y, call.name());
}

void export_conv(const KernelCall& call, GraphBuilder& g, bool relu) {
  const auto& [out, input, weight, bias, window, groups] = arguments<ConvKernels::Forward>(call);
  std::vector<Value> inputs = {g.read(input), g.read(weight)};
  if (bias.defined()) inputs.push_back(g.read(bias));
  ::onnx::NodeProto* n = nullptr;
  Value y = g.result("Conv", inputs, sizes_of(out), &n);
  set_window(*n, window, true, false);
  set_int(*n, "group", groups);
  if (relu) y = unary(g, "Relu", y);
  g.wrote(out, y, call.name());
}

void export_lstm_cell(const KernelCall& call, GraphBuilder& g) {
  const auto& [gates, c, h, recurrent, projected, c_prev] = arguments<LstmCellKernels::Forward>(call);
  // One step of Note [Recurrent layers] (nn/rnn.h) as its arithmetic, gates in PyTorch's order
  // i, f, g, o: c = σ(f) c_prev + σ(i) tanh(g), h = σ(o) tanh(c).
  const std::vector<std::int64_t> wide = sizes_of(gates), narrow = sizes_of(c);
  const std::int64_t hidden = narrow.back();
  const Value pre = binary(g, "Add", g.read(recurrent), g.read(projected), wide);
  auto gate = [&](std::int64_t k, const char* activation) {
    const Value part = g.result("Slice",
                                {pre, Value{g.int64s({k * hidden}), {}, -1}, Value{g.int64s({(k + 1) * hidden}), {}, -1},
                                 Value{g.int64s({1}), {}, -1}},
                                narrow);
    return unary(g, activation, part);
  };
  const Value i = gate(0, "Sigmoid"), f = gate(1, "Sigmoid"), cell = gate(2, "Tanh"), o = gate(3, "Sigmoid");
  const Value c_new = binary(g, "Add", binary(g, "Mul", f, g.read(c_prev), narrow), binary(g, "Mul", i, cell, narrow),
                             narrow);
  const Value h_new = binary(g, "Mul", o, unary(g, "Tanh", c_new), narrow);
  ::onnx::NodeProto* n = nullptr;
  const Value all = g.result("Concat", {i, f, cell, o}, wide, &n);
  set_int(*n, "axis", 1);
  g.wrote(gates, all, call.name());
  g.wrote(c, c_new, call.name());
  g.wrote(h, h_new, call.name());
}

void export_softmax(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, x, dim, log] = arguments<SoftmaxKernels::Forward>(call);
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result(log ? "LogSoftmax" : "Softmax", {g.read(x)}, sizes_of(out), &n);
  set_int(*n, "axis", dim);
  g.wrote(out, y, call.name());
}

void export_layer_norm(const KernelCall& call, GraphBuilder& g) {
  const auto& [out, mean, rstd, input, weight, bias, eps] = arguments<LayerNormKernels::Forward>(call);
  const Value x = g.read(input);
  // The normalised dims are the trailing ones holding a row's N elements (N = numel / rows).
  const std::int64_t row = out.numel() / std::max<std::int64_t>(mean.numel(), 1);
  std::int64_t axis = static_cast<std::int64_t>(x.sizes.size());
  for (std::int64_t n = 1; axis > 0 && n < row;) n *= x.sizes[--axis];
  const std::vector<std::int64_t> normalized(x.sizes.begin() + axis, x.sizes.end());
  const Value scale = weight.defined() ? g.reshape(g.read(weight), normalized)
                                      : g.constant_of("ones", ones(normalized, TensorOptions().dtype(out.dtype())));
  std::vector<Value> inputs = {x, scale};
  if (bias.defined()) inputs.push_back(g.reshape(g.read(bias), normalized));
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result("LayerNormalization", inputs, x.sizes, &n);
  set_int(*n, "axis", axis);
  set_float(*n, "epsilon", eps);
  g.wrote(out, y, call.name());
  g.unusable(mean, "onnx export: layer_norm's saved mean has no ONNX export (it is for its backward)");
  g.unusable(rstd, "onnx export: layer_norm's saved 1/std has no ONNX export (it is for its backward)");
}

}  // namespace

void export_kernel(const KernelCall& call, GraphBuilder& g) {
  switch (call.id().family) {
    case KernelFamily::Unary: return export_unary(call, g);
    case KernelFamily::Binary: return export_binary(call, g);
    case KernelFamily::Reduce: return export_reduce(call, g);
    case KernelFamily::VarMean: return export_var_mean(call, g);
    case KernelFamily::ArgReduce: return export_arg_reduce(call, g);
    case KernelFamily::Where: return export_where(call, g);
    case KernelFamily::Copy: return export_copy(call, g);
    case KernelFamily::Fill: return export_fill(call, g);
    case KernelFamily::Arange: return export_arange(call, g);
    case KernelFamily::Bmm: return export_bmm(call, g);
    case KernelFamily::BmmBias: return export_bmm_bias(call, g);
    case KernelFamily::Cat: return export_cat(call, g);
    case KernelFamily::IndexSelect: return export_index_select(call, g);
    case KernelFamily::Gather: return export_gather(call, g);
    case KernelFamily::MaxPool: return export_max_pool(call, g);
    case KernelFamily::PoolForward: return export_pool(call, g);
    case KernelFamily::ConvForward: return export_conv(call, g, false);
    case KernelFamily::ConvForwardRelu: return export_conv(call, g, true);
    case KernelFamily::SoftmaxForward: return export_softmax(call, g);
    case KernelFamily::LstmCellForward: return export_lstm_cell(call, g);
    case KernelFamily::LayerNormForward: return export_layer_norm(call, g);
    default: no_export(call);
  }
}

}  // namespace kiln::onnx
