// onnx/graph_builder.h — the ONNX graph an export is building, and the table that says which
// ONNX value holds each Kiln storage. A kernel's translation (onnx/kernel_export.cpp) asks for
// the value a tensor argument reads (read), adds nodes (node, result) and says which value
// now holds the tensor it wrote (wrote). Views are recovered here from the strides a kernel
// read a value with (Note [Views from strides]); tensors no kernel wrote become initializers.
// Read next: onnx/kernel_export.h.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"

namespace kiln::onnx {

/// One value of the ONNX graph: its name, its sizes as the export saw them and which dim, if
/// any, scales with the batch (Note [The batch axis]).
struct Value {
  std::string name;
  std::vector<std::int64_t> sizes;
  int batch_dim = -1;
  /// How many times the batch dim's size holds the batch before the batch's own factor: 1,
  /// unless a reshape merged leading dims into it ([L, N, E] to [L * N, E] makes it L).
  std::int64_t batch_within = 1;
  /// The dim that is the symbolic sequence axis, if any (Note [The sequence axis]).
  int sequence_dim = -1;
};

/// A tensor's terms as a kernel read or wrote them.
struct Layout {
  std::vector<std::int64_t> sizes, strides;
  std::int64_t offset = 0;
  static Layout of(const Tensor& t);
  bool operator==(const Layout&) const = default;
  auto operator<=>(const Layout&) const = default;
};

/// The ONNX element type of a Kiln dtype.
int onnx_type(DType dtype);

/// A node's attributes.
void set_int(::onnx::NodeProto& n, const char* name, std::int64_t value);
void set_ints(::onnx::NodeProto& n, const char* name, const std::vector<std::int64_t>& values);
void set_float(::onnx::NodeProto& n, const char* name, double value);
void set_string(::onnx::NodeProto& n, const char* name, const std::string& value);
void set_strings(::onnx::NodeProto& n, const char* name, const std::vector<std::string>& values);

class GraphBuilder {
 public:
  /// `batch_size` > 0 makes the inputs' batch dims the symbolic axis `batch_name`; a
  /// `sequence_name` lets recurrent layers make their inputs' time dim symbolic too.
  GraphBuilder(::onnx::GraphProto& graph, std::int64_t batch_size, std::string batch_name,
               std::string sequence_name = "");

  /// Names a parameter or buffer; it becomes an initializer of that name when first read.
  void name_initializer(const std::string& name, const Tensor& t);
  /// A graph input; its dim `batch_dim` is the batch when the batch is dynamic.
  void add_input(const std::string& name, const Tensor& buffer, int batch_dim = 0);
  void add_output(const std::string& name, const Tensor& t);

  /// The value a kernel reads through `t`. With `broadcasts` the consumer broadcasts its
  /// operands (numpy rules), so an expanded constant may be given with its dims of size 1.
  Value read(const Tensor& t, bool broadcasts = false);
  /// `value` holds what the kernel wrote into `t` from now on.
  void wrote(const Tensor& t, const Value& value, const std::string& kernel);
  /// Reading `t` later is an error saying `why` (outputs with no ONNX counterpart).
  void unusable(const Tensor& t, const std::string& why);
  /// `value` holds what a layer made for `t`, which may be any permutation of a contiguous
  /// block of its storage (a batch_first output is a transposed view): Note [Layer scopes].
  void holds(const Tensor& t, const Value& value);
  /// The graph input `t`, with its dim `dim` made the symbolic sequence axis; nullopt when
  /// no sequence axis is named. Refused when `t` is not a graph input as it was given, or a
  /// node has read it already (Note [The sequence axis]).
  std::optional<Value> sequence_input(const Tensor& t, int dim);
  /// Whether some input's dim became the sequence axis.
  bool has_sequence_input() const { return has_sequence_input_; }

  /// A new node; its outputs are named by the caller or with result().
  ::onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs);
  /// A node with one output of `sizes`, whose batch dim follows its inputs' (Note [The batch axis]).
  Value result(const std::string& op, const std::vector<Value>& inputs, const std::vector<std::int64_t>& sizes,
               ::onnx::NodeProto** made = nullptr);
  /// A fresh value name.
  std::string fresh(const std::string& hint);
  /// An Int64 1-D initializer (Reshape's shape, Slice's starts, ...), one per distinct content.
  std::string int64s(const std::vector<std::int64_t>& values);
  /// A scalar initializer of `dtype`.
  std::string scalar(double value, DType dtype);
  /// An initializer holding `t`'s elements (any strides), named `name`.
  std::string initializer(const std::string& name, const Tensor& t, const std::vector<std::int64_t>& sizes,
                          const std::vector<std::int64_t>& strides);
  /// A new initializer (named from `hint`) holding `t`, a tensor made for the export.
  Value constant_of(const std::string& hint, const Tensor& t);

  // --- reshaping values, keeping the batch axis symbolic ----------------------------------------
  Value reshape(const Value& v, const std::vector<std::int64_t>& sizes);
  Value transpose(const Value& v, const std::vector<std::int64_t>& perm);
  Value expand(const Value& v, const std::vector<std::int64_t>& sizes);

  /// `value` broadcast to `sizes`, whose dim `batch_dim` is the batch: its size is read from
  /// the first input's shape when the model runs (Note [The batch axis]).
  Value full_over_batch(double value, DType dtype, const std::vector<std::int64_t>& sizes, int batch_dim);

  std::int64_t batch_size() const { return batch_size_; }

 private:
  struct Held {
    Value value;
    Layout layout;
    std::string unusable;  // why it cannot be read, when not ""
  };
  Value view(const Held& held, const Layout& read, bool broadcasts);
  /// Splits the dim of a box's buffer (`parent`, with the box's `start` and `length`) in which
  /// `v`'s batch is merged with other dims into [before, batch, after] (Note [Views from strides]).
  void split_batch(const Value& v, std::vector<std::int64_t>& parent, std::vector<std::int64_t>& start,
                   std::vector<std::int64_t>& length) const;
  Value constant(const Tensor& t, bool broadcasts);
  /// The value a read of a storage written in pieces sees (Note [Storages written in pieces]).
  Value read_pieces(const std::map<std::int64_t, Held>& pieces, const Layout& read, bool broadcasts);

  ::onnx::GraphProto& graph_;
  std::int64_t batch_size_;
  std::string batch_name_;
  std::string sequence_name_;
  std::string batch_input_;  // the first input, whose dim batch_input_dim_ is the batch
  int batch_input_dim_ = 0;
  std::map<std::string, int> inputs_;  // graph inputs by name: their index in the graph
  std::set<std::string> inputs_read_;  // graph inputs some node has read
  bool has_sequence_input_ = false;
  std::map<const Storage*, Held> held_;
  /// Storages written piece by piece (a recurrent layer's step outputs): each piece by offset.
  std::map<const Storage*, std::map<std::int64_t, Held>> pieces_;
  std::map<const Storage*, std::pair<std::string, Tensor>> named_;  // not yet read
  std::map<std::tuple<const Storage*, Layout, bool>, Value> constants_;
  std::map<std::vector<std::int64_t>, std::string> int64s_;
  std::map<std::string, int> used_names_;
};

}  // namespace kiln::onnx
