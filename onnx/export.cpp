// onnx/export.cpp — export_model: capture the forward (compile/capture.h), translate its
// kernels (onnx/kernel_export.cpp), check the model with ONNX's checker and shape inference,
// write it. See Note [Exporting a captured forward] in onnx/export.h.
#include "onnx/export.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <fstream>
#include <map>

#include "compile/capture.h"
#include "core/backends.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "nn/training_mode_guard.h"
#include "onnx/graph_builder.h"
#include "onnx/kernel_export.h"
#include "onnx/layer_export.h"

namespace kiln::onnx {

namespace {

std::int64_t batch_dim(const ExportOptions& options, std::size_t input) {
  return options.batch_dims.empty() ? 0 : options.batch_dims[input];
}

std::string name_or(const std::vector<std::string>& names, std::size_t i, const char* prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}

void check_options(const ExportOptions& options, const std::vector<Tensor>& inputs) {
  KILN_CHECK_VALUE(options.opset == 17, "onnx export: opset ", options.opset,
                   " is not supported; Kiln writes opset 17 (ReduceSum with axes as an input, "
                   "LayerNormalization)");
  KILN_CHECK_VALUE(options.dynamic_axes.size() <= 2,
                   "onnx export: dynamic_axes names the batch axis and, optionally, the sequence axis, got ",
                   options.dynamic_axes.size(), " names");
  KILN_CHECK_VALUE(options.batch_dims.empty() || options.batch_dims.size() == inputs.size(), "onnx export: ",
                   options.batch_dims.size(), " batch_dims for ", inputs.size(), " inputs");
  KILN_CHECK_VALUE(!inputs.empty(), "onnx export: expected at least one example input");
  KILN_CHECK_VALUE(options.input_names.empty() || options.input_names.size() == inputs.size(), "onnx export: ",
                   options.input_names.size(), " input_names for ", inputs.size(), " inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    KILN_CHECK_VALUE(x.defined() && x.is_cpu(), "onnx export: example inputs must be defined CPU tensors");
    if (!options.dynamic_axes.empty()) {
      const std::int64_t d = batch_dim(options, i);
      KILN_CHECK_VALUE(d >= 0 && d < x.dim(), "onnx export: batch_dims[", i, "] is ", d, " but input ", i, " has ",
                       x.dim(), " dims");
      // Note [The batch axis] in onnx/graph_builder.cpp: a batch of 1 is a dim like any other.
      KILN_CHECK_VALUE(x.size(d) > 1, "onnx export: with dynamic_axes the example inputs need a batch (dim ", d,
                       ") of at least 2 so that it can be told from dims of size 1, got sizes ", x.sizes());
    }
  }
}

}  // namespace

ExportReport export_function(const Forward& forward, nn::Module& module, const std::vector<Tensor>& example_inputs,
                             const std::string& path, const ExportOptions& options) {
  check_options(options, example_inputs);
  compiler::Capture capture;
  std::vector<Tensor> outputs;
  {
    nn::TrainingModeGuard eval(module, false);
    NoGradGuard no_grad;
    // One conv2d.forward kernel per convolution, not unfold + GEMM (core/backends.h).
    backends::OpKernelsGuard op_kernels(DeviceType::CPU, true);
    outputs = capture.run(forward, example_inputs);
  }
  KILN_CHECK_NOT_IMPLEMENTED(capture.failure().empty(), "onnx export: the forward cannot be captured: ",
                             capture.failure());
  const compiler::Graph graph = capture.take_graph(outputs);
  KILN_CHECK_VALUE(options.output_names.empty() || options.output_names.size() == graph.outputs.size(),
                   "onnx export: ", options.output_names.size(), " output_names for ", graph.outputs.size(),
                   " outputs");

  ::onnx::ModelProto model;
  model.set_ir_version(::onnx::IR_VERSION);
  model.set_producer_name("kiln");
  model.set_producer_version("0.1.0");
  ::onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(options.opset);
  for (const auto& [key, value] : options.metadata) {
    ::onnx::StringStringEntryProto& entry = *model.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  }
  ::onnx::GraphProto& onnx_graph = *model.mutable_graph();
  onnx_graph.set_name(module.type_name());

  const std::int64_t batch =
      options.dynamic_axes.empty() ? 0 : example_inputs.front().size(batch_dim(options, 0));
  GraphBuilder builder(onnx_graph, batch, options.dynamic_axes.empty() ? "" : options.dynamic_axes.front(),
                       options.dynamic_axes.size() > 1 ? options.dynamic_axes[1] : "");
  for (const auto& [name, t] : module.named_parameters()) builder.name_initializer(name, t);
  for (const auto& [name, t] : module.named_buffers()) builder.name_initializer(name, t);
  for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
    builder.add_input(name_or(options.input_names, i, "input"), graph.inputs[i],
                      static_cast<int>(batch_dim(options, i)));
  }
  // The module's layers by address, for the calls the capture marked (Note [Layer scopes]).
  std::map<const void*, std::pair<std::string, const nn::Module*>> layers;
  for (const auto& [name, m] : module.named_modules()) {
    layers.emplace(dynamic_cast<const void*>(m), std::pair{name.empty() ? m->type_name() : name, m});
  }
  std::map<std::size_t, const compiler::Scope*> calls;  // by their first node; outermost only
  std::size_t covered = 0;
  for (const compiler::Scope& scope : capture.scopes()) {
    if (scope.begin < covered || scope.begin == scope.end || !layers.count(scope.owner)) continue;
    calls.emplace(scope.begin, &scope);
    covered = scope.end;
  }
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    // A layer ONNX has an operator for is written as that operator, its kernels skipped.
    if (const auto call = calls.find(i); call != calls.end()) {
      const auto& [name, layer] = layers.at(call->second->owner);
      if (export_layer(*layer, name, *call->second, builder)) {
        i = call->second->end - 1;
        continue;
      }
    }
    const compiler::Node& node = graph.nodes[i];
    // A region that only checks its inputs on the host (an embedding's ids in range) ran when
    // the forward was captured; ONNX Runtime's own ops check what they are given.
    if (node.kind == compiler::Node::Kind::Region && node.region.starts_with("check_")) continue;
    KILN_CHECK_NOT_IMPLEMENTED(node.kind == compiler::Node::Kind::Kernel, "onnx export: ",
                               node.kind == compiler::Node::Kind::Region ? node.region : std::string("a gradient"),
                               " in the forward has no ONNX export");
    export_kernel(*node.call, builder);
  }
  KILN_CHECK_VALUE(options.dynamic_axes.size() < 2 || builder.has_sequence_input(), "onnx export: dynamic_axes names ",
                   "the sequence axis '", options.dynamic_axes.back(), "', but no recurrent layer (nn::LSTM, nn::GRU, ",
                   "nn::RNN) of the module reads a graph input as it was given (Note [The sequence axis])");
  for (std::size_t i = 0; i < graph.outputs.size(); ++i) {
    builder.add_output(name_or(options.output_names, i, "output"), graph.outputs[i]);
  }

  // ONNX's own verdicts on what was built: a file Kiln writes is one ONNX Runtime can load.
  try {
    ::onnx::checker::check_model(model);
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception& e) {
    KILN_FAIL("onnx export: ONNX's checker refused the exported model: ", e.what());
  }

  std::string bytes;
  KILN_CHECK(model.SerializeToString(&bytes), "onnx export: the model could not be serialised (", bytes.size(),
             " bytes; protobuf's limit is 2 GiB)");
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(file.good(), "onnx export: cannot open '", path, "' for writing");
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  KILN_CHECK(file.good(), "onnx export: writing '", path, "' failed");
  return ExportReport{bytes.size(), static_cast<std::size_t>(onnx_graph.node_size()),
                      static_cast<std::size_t>(onnx_graph.initializer_size())};
}

ExportReport export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                          const ExportOptions& options) {
  KILN_CHECK_VALUE(example_inputs.size() == 1, "onnx export: a Module's forward takes one tensor, got ",
                   example_inputs.size(), " example inputs (use export_function for more)");
  return export_function([&module](const std::vector<Tensor>& x) { return std::vector<Tensor>{module.forward(x[0])}; },
                         module, example_inputs, path, options);
}

}  // namespace kiln::onnx
