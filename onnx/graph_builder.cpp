// onnx/graph_builder.cpp — values, initializers and the views between them (see
// onnx/graph_builder.h, Note [Views from strides] and Note [The batch axis]).
#include "onnx/graph_builder.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "core/creation.h"
#include "core/error.h"
#include "core/shape.h"

namespace kiln::onnx {

// Note [Views from strides]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel's result is written contiguously, and whatever later reads it reads it through a
// view: sizes, strides and an offset into the same storage. Any view of a contiguous buffer
// whose dims (those of size > 1, ordered by stride) each step by a whole multiple of the next
// one is a box in a reshaped buffer: reshape the buffer to [numel / s1, s1 / s2, ..., sm]
// (one dim per stride, plus a trailing one when the smallest stride is not 1), slice the box
// out (the offset gives its corner), transpose its dims into the view's order and reshape to
// the view's sizes. That covers view, reshape, flatten, unsqueeze, squeeze, t, transpose,
// permute, narrow, select, chunk and split; dims of stride 0 (expand, broadcasting) become an
// Expand of the view without them (or, for a consumer that broadcasts, the view without them
// as it is). When the buffer's batch shares a dim of the box's buffer with other dims (a
// time-major [T * N, F] read one step at a time), that dim is split into [before, N, after]
// first, so that slicing a step never slices the batch. Each step is skipped when it changes nothing, so a plain
// reshape is one Reshape node and an unchanged read none.

// Note [The batch axis]
// ~~~~~~~~~~~~~~~~~~~~~
// With dynamic axes, dim 0 of every input is the symbolic "batch", and each value records
// which of its dims scales with it (Value::batch_dim). A node's result takes its inputs' batch
// dim, aligned from the right as broadcasting aligns dims, when its size there is the same
// (a reduction over the batch ends it). Shapes written into the graph (Reshape's, Expand's)
// must not hold the example's batch size: Reshape puts -1 in the dim whose leading product
// first covers every element group up to and including the batch's own factor
// ([N, 1, 28, 28] to [N, 784] is [-1, 784]; [N, 784] to [1, N, 784] is [1, -1, 784];
// [1, N * 4, 5] back to [N, 4, 5] is [-1, 4, 5]), and Expand puts 1 wherever the value
// already has the size asked for. A reshape that splits the batch itself is refused. A fill
// whose shape holds the example's batch size (a recurrent layer's zero initial state) is
// expanded at run time to a shape whose batch is read from the first input's (Shape). The example batch must not be 1, or a batch dim
// could not be told from the other dims of size 1 (export_model checks this).

// Note [The sequence axis]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A second name in dynamic_axes names the time axis of the recurrent layers. ONNX's LSTM, GRU
// and RNN nodes take any sequence length, but the other nodes Kiln writes carry the example's
// sizes in their shapes and slices (a Reshape to [N * T, F], the last step's Slice), so a
// dynamic time axis is only sound where nothing but recurrent nodes and transposes touch it:
// a recurrent layer reading a graph input that no node has read before makes that input's time
// dim symbolic (Value::sequence_dim), the layer's output carries it, Transpose keeps it, and a
// graph output declares it symbolic. Any other node reading a value that carries it is refused
// by name, rather than writing a file that would be wrong, or fail, at another length.
// PyTorch's exporter takes the user's word for every dynamic axis instead (torch.onnx's
// dynamic_axes), and warns when tracing baked a size in.

// Note [Storages written in pieces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel that writes only part of a storage (the LSTM layer's cell writes step t's h and c
// into row t of buffers [T + 1, B, H]) leaves a piece: the value of that block of elements.
// A read inside one piece is a view of that piece. A read across pieces (the layer's output,
// rows 1..T) sees the pieces, equal in shape and adjacent, stacked by Concat along a new
// leading dim, and is a view of that. Anything else (a piece over a value written whole, gaps
// between pieces) is refused by name.

namespace {

/// The product of v's elements [from, to), the bounds clamped to v's size.
std::int64_t product(const std::vector<std::int64_t>& v, std::size_t from = 0,
                     std::size_t to = std::numeric_limits<std::size_t>::max()) {
  const auto first = v.begin() + static_cast<std::ptrdiff_t>(std::min(from, v.size()));
  const auto last = v.begin() + static_cast<std::ptrdiff_t>(std::min(to, v.size()));
  return std::accumulate(first, std::max(first, last), std::int64_t{1}, std::multiplies<>());
}

void describe(::onnx::ValueInfoProto& info, const std::string& name, DType dtype, const std::vector<std::int64_t>& sizes,
              int batch_dim, const std::string& batch_name, int sequence_dim = -1, const std::string& sequence_name = "") {
  info.set_name(name);
  ::onnx::TypeProto_Tensor& type = *info.mutable_type()->mutable_tensor_type();
  type.set_elem_type(onnx_type(dtype));
  ::onnx::TensorShapeProto& shape = *type.mutable_shape();
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (static_cast<int>(d) == batch_dim) shape.add_dim()->set_dim_param(batch_name);
    else if (static_cast<int>(d) == sequence_dim) shape.add_dim()->set_dim_param(sequence_name);
    else shape.add_dim()->set_dim_value(sizes[d]);
  }
}

}  // namespace

void set_int(::onnx::NodeProto& n, const char* name, std::int64_t value) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::INT);
  a.set_i(value);
}

void set_ints(::onnx::NodeProto& n, const char* name, const std::vector<std::int64_t>& values) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::INTS);
  for (std::int64_t v : values) a.add_ints(v);
}

void set_string(::onnx::NodeProto& n, const char* name, const std::string& value) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::STRING);
  a.set_s(value);
}

void set_strings(::onnx::NodeProto& n, const char* name, const std::vector<std::string>& values) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::STRINGS);
  for (const std::string& v : values) a.add_strings(v);
}

void set_float(::onnx::NodeProto& n, const char* name, double value) {
  ::onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::FLOAT);
  a.set_f(static_cast<float>(value));
}

Layout Layout::of(const Tensor& t) {
  return {{t.sizes().begin(), t.sizes().end()}, {t.strides().begin(), t.strides().end()}, t.storage_offset()};
}

int onnx_type(DType dtype) {
  using P = ::onnx::TensorProto;
  switch (dtype) {
    case DType::Float32: return P::FLOAT;
    case DType::Float64: return P::DOUBLE;
    case DType::Float16: return P::FLOAT16;
    case DType::BFloat16: return P::BFLOAT16;
    case DType::Int64: return P::INT64;
    case DType::Int32: return P::INT32;
    case DType::Int16: return P::INT16;
    case DType::Int8: return P::INT8;
    case DType::UInt8: return P::UINT8;
    case DType::Bool: return P::BOOL;
  }
  KILN_FAIL("onnx export: no ONNX element type for dtype ", scalar_type_name(dtype));
}

GraphBuilder::GraphBuilder(::onnx::GraphProto& graph, std::int64_t batch_size, std::string batch_name,
                           std::string sequence_name)
    : graph_(graph),
      batch_size_(batch_size),
      batch_name_(std::move(batch_name)),
      sequence_name_(std::move(sequence_name)) {}

namespace {

/// A node that bakes the example's sizes in must not read the dynamic sequence axis.
void check_fixed_sequence(const Value& v, const std::string& op, const std::string& sequence_name) {
  KILN_CHECK_NOT_IMPLEMENTED(v.sequence_dim < 0, "onnx export: ", op, " reads ", v.name, ", whose dim ",
                             v.sequence_dim, " is the dynamic sequence axis '", sequence_name,
                             "', and would fix its length; only recurrent layers and transposes may touch that axis "
                             "(export without a sequence name in dynamic_axes)");
}

}  // namespace

std::string GraphBuilder::fresh(const std::string& hint) {
  int& n = used_names_[hint];
  return hint + "_" + std::to_string(n++);
}

void GraphBuilder::name_initializer(const std::string& name, const Tensor& t) {
  if (t.defined() && t.numel() > 0) named_.emplace(t.impl()->storage().get(), std::pair{name, t});
}

void GraphBuilder::add_input(const std::string& name, const Tensor& buffer, int batch_dim) {
  if (batch_size_ == 0) batch_dim = -1;
  Layout layout = Layout::of(buffer);
  inputs_.emplace(name, graph_.input_size());
  describe(*graph_.add_input(), name, buffer.dtype(), layout.sizes, batch_dim, batch_name_);
  held_[buffer.impl()->storage().get()] = Held{Value{name, layout.sizes, batch_dim}, layout, ""};
  if (batch_input_.empty()) batch_input_ = name, batch_input_dim_ = batch_dim;
}

std::optional<Value> GraphBuilder::sequence_input(const Tensor& t, int dim) {
  if (sequence_name_.empty()) return std::nullopt;
  const auto it = held_.find(t.impl()->storage().get());
  const bool input = it != held_.end() && inputs_.count(it->second.value.name) && it->second.layout == Layout::of(t);
  KILN_CHECK_NOT_IMPLEMENTED(input, "onnx export: the sequence axis '", sequence_name_,
                             "' can be dynamic only for a recurrent layer reading a graph input as it was given ",
                             "(Note [The sequence axis]); this one reads ", t.describe().empty() ? "a computed tensor" : t.describe());
  Value& v = it->second.value;
  KILN_CHECK_NOT_IMPLEMENTED(!inputs_read_.count(v.name), "onnx export: the sequence axis '", sequence_name_,
                             "' of input ", v.name, " cannot be dynamic: other nodes read that input first and ",
                             "fix its length");
  KILN_CHECK_VALUE(dim != v.batch_dim, "onnx export: input ", v.name, "'s dim ", dim,
                   " cannot be both the batch and the sequence axis");
  v.sequence_dim = dim;
  ::onnx::ValueInfoProto& info = *graph_.mutable_input(inputs_.at(v.name));
  info.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(dim)->set_dim_param(sequence_name_);
  inputs_read_.insert(v.name);
  has_sequence_input_ = true;
  return v;
}

void GraphBuilder::holds(const Tensor& t, const Value& value) {
  const Layout layout = Layout::of(t);
  // The dims by decreasing stride: the order the layer's kernels wrote them in.
  std::vector<std::int64_t> perm(layout.sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](std::int64_t a, std::int64_t b) { return layout.strides[a] > layout.strides[b]; });
  Layout written{{}, {}, layout.offset};
  for (std::int64_t d : perm) {
    written.sizes.push_back(layout.sizes[d]);
    written.strides.push_back(layout.strides[d]);
  }
  KILN_CHECK_NOT_IMPLEMENTED(compute_is_contiguous(written.sizes, written.strides), "onnx export: a layer returns ",
                             t.describe().empty() ? "a tensor" : t.describe(),
                             " that is not a permuted contiguous block, which has no ONNX export yet");
  const Storage* storage = t.impl()->storage().get();
  named_.erase(storage);
  pieces_.erase(storage);
  const bool permuted = !std::is_sorted(perm.begin(), perm.end());
  held_[storage] = Held{permuted ? transpose(value, perm) : value, std::move(written), ""};
}

void GraphBuilder::add_output(const std::string& name, const Tensor& t) {
  const Value v = read(t);
  node("Identity", {v.name}, {name});
  describe(*graph_.add_output(), name, t.dtype(), v.sizes, batch_size_ > 0 ? v.batch_dim : -1, batch_name_,
           v.sequence_dim, sequence_name_);
}

::onnx::NodeProto& GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& outputs) {
  ::onnx::NodeProto& n = *graph_.add_node();
  n.set_op_type(op);
  if (!outputs.empty()) n.set_name(outputs.front());
  for (const std::string& i : inputs) n.add_input(i);
  for (const std::string& o : outputs) n.add_output(o);
  return n;
}

Value GraphBuilder::result(const std::string& op, const std::vector<Value>& inputs,
                           const std::vector<std::int64_t>& sizes, ::onnx::NodeProto** made) {
  Value out{fresh(op), sizes, -1};
  std::vector<std::string> names;
  for (const Value& v : inputs) {
    check_fixed_sequence(v, op, sequence_name_);
    names.push_back(v.name);
  }
  ::onnx::NodeProto& n = node(op, names, {out.name});
  if (made) *made = &n;
  for (const Value& v : inputs) {
    if (v.batch_dim < 0) continue;
    const int d = v.batch_dim + static_cast<int>(sizes.size()) - static_cast<int>(v.sizes.size());
    if (d >= 0 && d < static_cast<int>(sizes.size()) && sizes[d] == v.sizes[v.batch_dim]) {
      out.batch_dim = d;
      out.batch_within = v.batch_within;
      break;
    }
  }
  return out;
}

std::string GraphBuilder::int64s(const std::vector<std::int64_t>& values) {
  if (auto it = int64s_.find(values); it != int64s_.end()) return it->second;
  ::onnx::TensorProto& t = *graph_.add_initializer();
  const std::string name = fresh("ints");
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_dims(static_cast<std::int64_t>(values.size()));
  for (std::int64_t v : values) t.add_int64_data(v);
  int64s_.emplace(values, name);
  return name;
}

std::string GraphBuilder::scalar(double value, DType dtype) {
  const Tensor t = full({}, value, TensorOptions().dtype(dtype));
  return initializer(fresh("scalar"), t, {}, {});
}

std::string GraphBuilder::initializer(const std::string& name, const Tensor& t, const std::vector<std::int64_t>& sizes,
                                      const std::vector<std::int64_t>& strides) {
  ::onnx::TensorProto& proto = *graph_.add_initializer();
  proto.set_name(name);
  proto.set_data_type(onnx_type(t.dtype()));
  for (std::int64_t s : sizes) proto.add_dims(s);
  const std::size_t item = t.element_size();
  const std::int64_t numel = product(sizes);
  std::string bytes(static_cast<std::size_t>(numel) * item, '\0');
  const char* base = static_cast<const char*>(t.raw_data_ptr());
  // Walk the elements in row-major order of `sizes`, reading each through `strides`.
  std::vector<std::int64_t> index(sizes.size(), 0);
  for (std::int64_t i = 0; i < numel; ++i) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < sizes.size(); ++d) at += index[d] * strides[d];
    std::memcpy(bytes.data() + static_cast<std::size_t>(i) * item, base + at * static_cast<std::int64_t>(item), item);
    for (std::size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  proto.set_raw_data(std::move(bytes));
  return name;
}

Value GraphBuilder::constant_of(const std::string& hint, const Tensor& t) {
  const Layout layout = Layout::of(t);
  return Value{initializer(fresh(hint), t, layout.sizes, layout.strides), layout.sizes, -1};
}

Value GraphBuilder::read(const Tensor& t, bool broadcasts) {
  KILN_CHECK(t.defined(), "onnx export: a kernel reads an undefined tensor");
  const Storage* storage = t.impl()->storage().get();
  if (auto it = held_.find(storage); it != held_.end()) {
    KILN_CHECK_NOT_IMPLEMENTED(it->second.unusable.empty(), it->second.unusable);
    if (inputs_.count(it->second.value.name)) inputs_read_.insert(it->second.value.name);
    return view(it->second, Layout::of(t), broadcasts);
  }
  if (auto it = pieces_.find(storage); it != pieces_.end()) return read_pieces(it->second, Layout::of(t), broadcasts);
  if (auto it = named_.find(storage); it != named_.end() && it->second.second.is_contiguous()) {
    const auto [name, param] = it->second;
    named_.erase(it);
    const Layout layout = Layout::of(param);
    initializer(name, param, layout.sizes, layout.strides);
    const Held& held = held_[storage] = Held{Value{name, layout.sizes, -1}, layout, ""};
    return view(held, Layout::of(t), broadcasts);
  }
  return constant(t, broadcasts);
}

Value GraphBuilder::constant(const Tensor& t, bool broadcasts) {
  const Layout layout = Layout::of(t);
  const auto key = std::tuple{t.impl()->storage().get(), layout, broadcasts};
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  // An expanded dim (stride 0) is stored once; the consumer broadcasts it, or an Expand does.
  std::vector<std::int64_t> sizes = layout.sizes;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (layout.strides[d] == 0) sizes[d] = 1;
  }
  Value v{initializer(fresh("constant"), t, sizes, layout.strides), sizes, -1};
  if (!broadcasts) v = expand(v, layout.sizes);
  constants_.emplace(key, v);
  return v;
}

void GraphBuilder::wrote(const Tensor& t, const Value& value, const std::string& kernel) {
  KILN_CHECK_NOT_IMPLEMENTED(t.is_contiguous(), "onnx export: ", kernel, " writes a non-contiguous view (",
                             t.describe(), "), which has no ONNX export yet");
  const Storage* storage = t.impl()->storage().get();
  Layout layout = Layout::of(t);
  Value v = value.sizes == layout.sizes ? value : reshape(value, layout.sizes);
  named_.erase(storage);
  if (t.storage_offset() == 0 && t.nbytes() == storage->nbytes()) {
    pieces_.erase(storage);
    held_[storage] = Held{std::move(v), std::move(layout), ""};
    return;
  }
  // Part of the storage: a piece (Note [Storages written in pieces]).
  KILN_CHECK_NOT_IMPLEMENTED(!held_.count(storage), "onnx export: ", kernel, " writes into part of a tensor (",
                             t.describe(), ") that was written whole before, which has no ONNX export yet");
  pieces_[storage][t.storage_offset()] = Held{std::move(v), std::move(layout), ""};
}

Value GraphBuilder::read_pieces(const std::map<std::int64_t, Held>& pieces, const Layout& read, bool broadcasts) {
  std::int64_t first = read.offset, last = read.offset;
  for (std::size_t d = 0; d < read.sizes.size(); ++d) last += (read.sizes[d] - 1) * read.strides[d];
  for (const auto& [offset, piece] : pieces) {
    if (first >= offset && last < offset + product(piece.layout.sizes)) return view(piece, read, broadcasts);
  }
  // Across pieces: stack them, if they are adjacent blocks of one shape.
  const Held& front = pieces.begin()->second;
  const std::int64_t block = product(front.layout.sizes);
  std::int64_t expected = pieces.begin()->first;
  std::vector<Value> stacked;
  std::vector<std::int64_t> row = front.layout.sizes;
  row.insert(row.begin(), 1);
  for (const auto& [offset, piece] : pieces) {
    KILN_CHECK_NOT_IMPLEMENTED(offset == expected && piece.layout.sizes == front.layout.sizes,
                               "onnx export: a kernel reads a tensor written in pieces that are not adjacent blocks "
                               "of one shape, which has no ONNX export yet");
    stacked.push_back(reshape(piece.value, row));
    expected += block;
  }
  std::vector<std::int64_t> sizes = front.layout.sizes;
  sizes.insert(sizes.begin(), static_cast<std::int64_t>(stacked.size()));
  ::onnx::NodeProto* n = nullptr;
  const Value all = result("Concat", stacked, sizes, &n);
  set_int(*n, "axis", 0);
  std::vector<std::int64_t> strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) strides[d] = stride, stride *= sizes[d];
  KILN_CHECK_NOT_IMPLEMENTED(first >= pieces.begin()->first && last < expected,
                             "onnx export: a kernel reads elements of a tensor written in pieces that no piece wrote");
  return view(Held{all, Layout{sizes, strides, pieces.begin()->first}, ""}, read, broadcasts);
}

void GraphBuilder::unusable(const Tensor& t, const std::string& why) {
  if (!t.defined()) return;
  held_[t.impl()->storage().get()] = Held{Value{}, Layout::of(t), why};
}

Value GraphBuilder::reshape(const Value& v, const std::vector<std::int64_t>& sizes) {
  if (sizes == v.sizes) return v;
  check_fixed_sequence(v, "Reshape", sequence_name_);
  std::vector<std::int64_t> shape = sizes;
  int batch_dim = -1;
  std::int64_t within = 1;
  if (v.batch_dim >= 0 && batch_size_ > 0) {
    // The element groups before the batch's own factor, and those up to and including it.
    const std::int64_t outer = product(v.sizes, 0, static_cast<std::size_t>(v.batch_dim)) * v.batch_within;
    const std::int64_t covered = outer * batch_size_;
    std::int64_t leading = 1;
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      const std::int64_t before = leading;
      leading *= sizes[j];
      if (leading < covered) continue;
      KILN_CHECK_NOT_IMPLEMENTED(leading % covered == 0 && outer % before == 0, "onnx export: a reshape from ",
                                 IntArrayRef(v.sizes), " to ", IntArrayRef(sizes),
                                 " splits the batch axis, which cannot stay dynamic");
      shape[j] = -1;
      batch_dim = static_cast<int>(j);
      within = outer / before;
      break;
    }
  }
  Value out{fresh("Reshape"), sizes, batch_dim, within};
  node("Reshape", {v.name, int64s(shape)}, {out.name});
  return out;
}

Value GraphBuilder::full_over_batch(double value, DType dtype, const std::vector<std::int64_t>& sizes,
                                    int batch_dim) {
  ::onnx::NodeProto& shape = node("Shape", {batch_input_}, {fresh("Shape")});
  set_int(shape, "start", batch_input_dim_);
  set_int(shape, "end", batch_input_dim_ + 1);
  std::vector<std::string> parts;
  const std::vector<std::int64_t> before(sizes.begin(), sizes.begin() + batch_dim);
  const std::vector<std::int64_t> after(sizes.begin() + batch_dim + 1, sizes.end());
  if (!before.empty()) parts.push_back(int64s(before));
  parts.push_back(shape.output(0));
  if (!after.empty()) parts.push_back(int64s(after));
  ::onnx::NodeProto& target = node("Concat", parts, {fresh("Concat")});
  set_int(target, "axis", 0);
  Value out{fresh("Expand"), sizes, batch_dim, 1};
  node("Expand", {scalar(value, dtype), target.output(0)}, {out.name});
  return out;
}

Value GraphBuilder::transpose(const Value& v, const std::vector<std::int64_t>& perm) {
  std::vector<std::int64_t> sizes(perm.size());
  Value out{fresh("Transpose"), {}, -1, v.batch_within};
  for (std::size_t i = 0; i < perm.size(); ++i) {
    sizes[i] = v.sizes[perm[i]];
    if (perm[i] == v.batch_dim) out.batch_dim = static_cast<int>(i);
    if (perm[i] == v.sequence_dim) out.sequence_dim = static_cast<int>(i);
  }
  out.sizes = sizes;
  set_ints(node("Transpose", {v.name}, {out.name}), "perm", perm);
  return out;
}

Value GraphBuilder::expand(const Value& v, const std::vector<std::int64_t>& sizes) {
  if (sizes == v.sizes) return v;
  check_fixed_sequence(v, "Expand", sequence_name_);
  // Expand broadcasts both ways, so a 1 keeps whatever size the value has there: the batch
  // dim among them (Note [The batch axis]).
  std::vector<std::int64_t> shape = sizes;
  const int shift = static_cast<int>(sizes.size()) - static_cast<int>(v.sizes.size());
  Value out{fresh("Expand"), sizes, -1, v.batch_within};
  for (std::size_t i = 0; i < v.sizes.size(); ++i) {
    const std::size_t d = i + static_cast<std::size_t>(shift);
    if (v.sizes[i] == sizes[d]) shape[d] = 1;
    if (static_cast<int>(i) == v.batch_dim) out.batch_dim = static_cast<int>(d);
  }
  node("Expand", {v.name, int64s(shape)}, {out.name});
  return out;
}

void GraphBuilder::split_batch(const Value& v, std::vector<std::int64_t>& parent, std::vector<std::int64_t>& start,
                               std::vector<std::int64_t>& length) const {
  if (v.batch_dim < 0 || batch_size_ == 0) return;
  const std::int64_t n = batch_size_;
  const std::int64_t outer = product(v.sizes, 0, static_cast<std::size_t>(v.batch_dim)) * v.batch_within;
  std::int64_t leading = 1;
  for (std::size_t k = 0; k < parent.size(); ++k) {
    const std::int64_t before = leading;
    leading *= parent[k];
    if (leading < outer * n) continue;
    if (outer % before != 0) return;
    const std::int64_t a = outer / before;
    if (parent[k] % (a * n) != 0) return;
    const std::int64_t b = parent[k] / (a * n);
    if (a == 1 && b == 1) return;
    // The box's extent along this dim as a box in [a, n, b]: whole rows of n * b, or part of
    // one row (which slices the batch, and so leaves the batch fixed).
    std::int64_t sa, la, sn, ln, sb, lb;
    if (start[k] % (n * b) == 0 && length[k] % (n * b) == 0) {
      sa = start[k] / (n * b), la = length[k] / (n * b), sn = 0, ln = n, sb = 0, lb = b;
    } else if (start[k] % b == 0 && length[k] % b == 0 && start[k] % (n * b) + length[k] <= n * b) {
      sa = start[k] / (n * b), la = 1, sn = start[k] % (n * b) / b, ln = length[k] / b, sb = 0, lb = b;
    } else {
      return;
    }
    const auto at = static_cast<std::ptrdiff_t>(k);
    parent.erase(parent.begin() + at);
    parent.insert(parent.begin() + at, {a, n, b});
    start.erase(start.begin() + at);
    start.insert(start.begin() + at, {sa, sn, sb});
    length.erase(length.begin() + at);
    length.insert(length.begin() + at, {la, ln, lb});
    return;
  }
}

Value GraphBuilder::view(const Held& held, const Layout& read, bool broadcasts) {
  const Layout& base = held.layout;
  if (read == base) return held.value;
  KILN_CHECK_NOT_IMPLEMENTED(compute_is_contiguous(base.sizes, base.strides),
                             "onnx export: a kernel reads a view of the non-contiguous value ", held.value.name);
  // Stride-0 dims: the view without them, expanded (Note [Views from strides]).
  Layout r = read;
  bool expanded = false;
  for (std::size_t d = 0; d < r.sizes.size(); ++d) {
    if (r.sizes[d] > 1 && r.strides[d] == 0) {
      r.sizes[d] = 1;
      expanded = true;
    }
  }
  // A consumer that broadcasts is given the view with those dims at 1: an Expand to the
  // example's sizes could hold the batch size, broadcasting never does.
  if (expanded) return broadcasts ? view(held, r, false) : expand(view(held, r, false), read.sizes);

  const std::int64_t numel = product(base.sizes);
  const std::int64_t offset = r.offset - base.offset;
  if (offset == 0 && product(r.sizes) == numel && compute_is_contiguous(r.sizes, r.strides)) {
    return reshape(held.value, r.sizes);
  }

  const std::string refused = detail::str_cat("onnx export: a kernel reads ", held.value.name, " ",
                                              IntArrayRef(base.sizes), " through a view (sizes ", IntArrayRef(r.sizes),
                                              ", strides ", IntArrayRef(r.strides), ", offset ", offset,
                                              ") that has no ONNX export");
  // The view's dims of size > 1 by decreasing stride, and the box they cut from the buffer.
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < r.sizes.size(); ++d) {
    if (r.sizes[d] > 1) dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return r.strides[a] > r.strides[b]; });
  std::vector<std::int64_t> parent, start, length;
  std::int64_t rest = offset;
  std::int64_t outer = numel;
  for (std::size_t d : dims) {
    const std::int64_t stride = r.strides[d];
    KILN_CHECK_NOT_IMPLEMENTED(stride > 0 && outer % stride == 0, refused);
    parent.push_back(outer / stride);
    start.push_back(rest / stride);
    length.push_back(r.sizes[d]);
    rest %= stride;
    outer = stride;
  }
  if (outer > 1 || dims.empty()) {  // the elements below the smallest stride: one is read
    parent.push_back(outer);
    start.push_back(rest);
    length.push_back(1);
  }
  for (std::size_t k = 0; k < parent.size(); ++k) {
    KILN_CHECK_NOT_IMPLEMENTED(start[k] >= 0 && start[k] + length[k] <= parent[k], refused);
  }
  split_batch(held.value, parent, start, length);
  Value x = reshape(held.value, parent);
  std::vector<std::int64_t> starts, ends, axes;
  for (std::size_t k = 0; k < parent.size(); ++k) {
    if (start[k] == 0 && length[k] == parent[k]) continue;
    axes.push_back(static_cast<std::int64_t>(k));
    starts.push_back(start[k]);
    ends.push_back(start[k] + length[k] == parent[k] ? std::numeric_limits<std::int64_t>::max()
                                                     : start[k] + length[k]);
  }
  if (!axes.empty()) {
    check_fixed_sequence(x, "Slice", sequence_name_);
    Value sliced{fresh("Slice"), length, x.batch_dim, x.batch_within};
    if (x.batch_dim >= 0 && length[x.batch_dim] != parent[x.batch_dim]) sliced.batch_dim = -1;
    node("Slice", {x.name, int64s(starts), int64s(ends), int64s(axes)}, {sliced.name});
    x = sliced;
  }
  // The box's dims as the view's dims, largest stride first.
  std::vector<std::int64_t> box;
  for (std::size_t d : dims) box.push_back(r.sizes[d]);
  // Into the view's order: dims[k] is the view's dim that box dim k became.
  std::vector<std::int64_t> order(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) order[k] = static_cast<std::int64_t>(k);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return dims[a] < dims[b]; });
  if (!std::is_sorted(order.begin(), order.end())) {
    x = transpose(reshape(x, box), order);
  }
  return reshape(x, r.sizes);
}

}  // namespace kiln::onnx
