// onnx/layer_export.cpp — nn::LSTM, nn::GRU and nn::RNN as ONNX LSTM, GRU and RNN nodes, nn::ConvTranspose2d
// as ConvTranspose (see onnx/layer_export.h).
#include "onnx/layer_export.h"

#include <map>

#include "core/error.h"
#include "nn/conv.h"
#include "nn/rnn.h"

namespace kiln::onnx {

// Note [Layers as ONNX operators]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Kernel by kernel, a recurrent layer is a chain of T steps: the file fixes the sequence length
// and is T times longer than the layer. ONNX has the layer itself, so a call the capture marked
// (Note [Layer scopes]) is written as one node per layer instead, as PyTorch's exporter writes
// aten::lstm. The weights change layout on the way:
//  - ONNX's W, R and B are [directions, gates * hidden, input], [directions, gates * hidden,
//    hidden] and [directions, 2 * gates * hidden] (B = Wb then Rb), one slice per direction.
//  - The gate blocks are reordered: PyTorch's LSTM rows are i, f, g, o and ONNX's i, o, f, c;
//    PyTorch's GRU rows are r, z, n and ONNX's z, r, h.
//  - PyTorch's GRU adds b_hn inside the reset product, n = tanh(x_n + r (W_hn h + b_hn)), which
//    is ONNX's GRU with linear_before_reset = 1.
//  - nn::RNN has one gate; its nonlinearity is ONNX RNN's activation (Tanh, the default, or
//    Relu, once per direction).
// A layer of l > 0 reads the previous one's Y [T, directions, N, H] as [T, N, directions * H]
// (Transpose, then a Reshape of shape [0, 0, -1], which copies T and N from its input so both
// stay dynamic); h_n and c_n are the layers' Y_h and Y_c concatenated. batch_first is a
// Transpose on either side: ONNX's layout = 1 would say it, but ONNX Runtime does not run it.
// Without an initial state the node's own zeros are used, so no constant holds the batch.
// ConvTranspose2d has the same weight layout in both ([C_in, C_out, kh, kw]), and Kiln's
// output_padding is ONNX's.

namespace {

std::vector<std::int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

Value ints(GraphBuilder& g, const std::vector<std::int64_t>& values) { return Value{g.int64s(values), {}, -1}; }

/// `w`'s blocks of `hidden` rows in ONNX's gate order: ONNX's block k is PyTorch's order[k].
Tensor onnx_gates(const Tensor& w, std::int64_t hidden, const std::vector<std::int64_t>& order) {
  TensorList blocks;
  for (std::int64_t k : order) blocks.push_back(w.detach().narrow(0, k * hidden, hidden));
  return cat(blocks, 0);
}

/// Rows [first, first + count) of `state` [layers * directions, N, H].
Value rows(GraphBuilder& g, const Value& state, std::int64_t first, std::int64_t count) {
  if (first == 0 && count == state.sizes[0]) return state;
  std::vector<std::int64_t> sizes = state.sizes;
  sizes[0] = count;
  return g.result("Slice", {state, ints(g, {first}), ints(g, {first + count}), ints(g, {0})}, sizes);
}

Value concat(GraphBuilder& g, const std::vector<Value>& parts, std::int64_t axis) {
  if (parts.size() == 1) return parts.front();
  std::vector<std::int64_t> sizes = parts.front().sizes;
  sizes[static_cast<std::size_t>(axis)] = 0;
  for (const Value& p : parts) sizes[static_cast<std::size_t>(axis)] += p.sizes[static_cast<std::size_t>(axis)];
  ::onnx::NodeProto* n = nullptr;
  const Value v = g.result("Concat", parts, sizes, &n);
  set_int(*n, "axis", axis);
  return v;
}

bool export_recurrent(const nn::RNNBase& rnn, const std::string& name, const compiler::Scope& call, GraphBuilder& g) {
  using Mode = nn::RNNBase::Mode;
  const bool lstm = rnn.mode == Mode::Lstm, gru = rnn.mode == Mode::Gru;
  const Tensor& input = call.args[0];
  if (input.dim() != 3 || call.results.size() != (lstm ? 3u : 2u)) return false;
  const std::int64_t hidden = rnn.hidden_size, directions = rnn.options.bidirectional ? 2 : 1;
  // ONNX's gate k is PyTorch's order[k].
  const std::vector<std::int64_t> order = lstm  ? std::vector<std::int64_t>{0, 3, 1, 2}
                                          : gru ? std::vector<std::int64_t>{1, 0, 2}
                                                : std::vector<std::int64_t>{0};
  std::map<std::string, Tensor> params;
  for (const auto& [param, t] : rnn.named_parameters()) params.emplace(param, t);

  // X as [T, N, F]; its time dim symbolic when a sequence axis is named.
  const bool batch_first = rnn.options.batch_first;
  const std::optional<Value> sequence = g.sequence_input(input, batch_first ? 1 : 0);
  Value x = sequence ? *sequence : g.read(input);
  if (batch_first) x = g.transpose(x, {1, 0, 2});
  const std::int64_t steps = x.sizes[0], batch = x.sizes[1];
  const int batch_dim = x.batch_dim == 1 ? 1 : -1;
  const int time_dim = x.sequence_dim == 0 ? 0 : -1;
  std::optional<Value> h0, c0;
  if (call.args[1].defined()) h0 = g.read(call.args[1]);
  if (lstm && call.args[2].defined()) c0 = g.read(call.args[2]);

  const char* op = lstm ? "LSTM" : gru ? "GRU" : "RNN";
  std::vector<Value> h_n, c_n;
  for (std::int64_t layer = 0; layer < rnn.options.num_layers; ++layer) {
    TensorList w, r, b;
    for (std::int64_t d = 0; d < directions; ++d) {
      const std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      w.push_back(onnx_gates(params.at("weight_ih" + suffix), hidden, order));
      r.push_back(onnx_gates(params.at("weight_hh" + suffix), hidden, order));
      if (rnn.options.bias) {
        b.push_back(cat({onnx_gates(params.at("bias_ih" + suffix), hidden, order),
                         onnx_gates(params.at("bias_hh" + suffix), hidden, order)},
                        0));
      }
    }
    const std::string at = name + ".l" + std::to_string(layer);
    std::vector<std::string> inputs = {x.name, g.constant_of(at + ".W", stack(w, 0)).name,
                                       g.constant_of(at + ".R", stack(r, 0)).name,
                                       b.empty() ? std::string() : g.constant_of(at + ".B", stack(b, 0)).name,
                                       std::string()};  // sequence_lens: every sequence is whole
    inputs.push_back(h0 ? rows(g, *h0, layer * directions, directions).name : std::string());
    if (lstm) inputs.push_back(c0 ? rows(g, *c0, layer * directions, directions).name : std::string());
    while (inputs.back().empty()) inputs.pop_back();
    const std::string y = g.fresh(op), y_h = g.fresh(std::string(op) + "_h");
    std::vector<std::string> outputs = {y, y_h};
    if (lstm) outputs.push_back(g.fresh(std::string(op) + "_c"));
    ::onnx::NodeProto& n = g.node(op, inputs, outputs);
    set_int(n, "hidden_size", hidden);
    if (directions == 2) set_string(n, "direction", "bidirectional");
    if (gru) set_int(n, "linear_before_reset", 1);
    if (rnn.mode == Mode::RnnRelu) set_strings(n, "activations", std::vector<std::string>(directions, "Relu"));

    h_n.push_back(Value{y_h, {directions, batch, hidden}, batch_dim});
    if (lstm) c_n.push_back(Value{outputs[2], {directions, batch, hidden}, batch_dim});
    // Y [T, D, N, H] as the next layer's input [T, N, D * H].
    const Value across = g.transpose(Value{y, {steps, directions, batch, hidden}, batch_dim < 0 ? -1 : 2, 1, time_dim},
                                     {0, 2, 1, 3});
    x = Value{g.fresh("Reshape"), {steps, batch, directions * hidden}, batch_dim, 1, time_dim};
    g.node("Reshape", {across.name, g.int64s({0, 0, -1})}, {x.name});
  }
  const Value output = batch_first ? g.transpose(x, {1, 0, 2}) : x;
  KILN_CHECK(output.sizes == sizes_of(call.results[0]), "onnx export: ", op, " wrote its output as ",
             IntArrayRef(output.sizes), " where Kiln's is ", call.results[0].sizes());
  g.holds(call.results[0], output);
  g.holds(call.results[1], concat(g, h_n, 0));
  if (lstm) g.holds(call.results[2], concat(g, c_n, 0));
  return true;
}

bool export_conv_transpose(const nn::ConvTranspose2d& m, const compiler::Scope& call, GraphBuilder& g) {
  if (call.args[0].dim() != 4 || call.results.size() != 1) return false;
  std::vector<Value> inputs = {g.read(call.args[0]), g.read(m.weight)};
  if (m.bias.defined()) inputs.push_back(g.read(m.bias));
  ::onnx::NodeProto* n = nullptr;
  const Value y = g.result("ConvTranspose", inputs, sizes_of(call.results[0]), &n);
  const nn::ConvTranspose2dOptions& o = m.options;
  set_ints(*n, "kernel_shape", {m.kernel_size[0], m.kernel_size[1]});
  set_ints(*n, "strides", {o.stride[0], o.stride[1]});
  set_ints(*n, "pads", {o.padding[0], o.padding[1], o.padding[0], o.padding[1]});
  set_ints(*n, "dilations", {o.dilation[0], o.dilation[1]});
  set_ints(*n, "output_padding", {o.output_padding[0], o.output_padding[1]});
  set_int(*n, "group", 1);
  g.holds(call.results[0], y);
  return true;
}

}  // namespace

bool export_layer(const nn::Module& layer, const std::string& name, const compiler::Scope& call, GraphBuilder& graph) {
  if (const auto* rnn = dynamic_cast<const nn::RNNBase*>(&layer)) return export_recurrent(*rnn, name, call, graph);
  if (const auto* conv = dynamic_cast<const nn::ConvTranspose2d*>(&layer)) return export_conv_transpose(*conv, call, graph);
  return false;
}

}  // namespace kiln::onnx
