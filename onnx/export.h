// onnx/export.h — exporting a model to ONNX: the module's forward is run once in eval mode
// under the compile layer's capture (compile/capture.h), so export and compiled steps share
// one recording of the kernels a forward runs, and the recorded graph is written as an ONNX
// ModelProto with the parameters and buffers as initializers, then checked by ONNX's own
// checker and shape inference before the file is written.
//
//   kiln::onnx::export_model(model, {kiln::rand({2, 1, 28, 28})}, "model.onnx",
//                            {.opset = 17, .dynamic_axes = {"batch"}, .input_names = {"input"},
//                             .output_names = {"logits"}});
//
// See Note [Exporting a captured forward]. Read next: onnx/graph_builder.h, onnx/kernel_export.h,
// onnx/layer_export.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace kiln::onnx {

// Note [Exporting a captured forward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's torch.onnx traces a forward by running it; Kiln already has such a tracer, the
// capture that compiled steps are made from (Note [Capturing a step]), which records every
// kernel a run makes with the exact tensors it was given. Export runs the forward under that
// capture in eval mode, without grad, and on the op-kernel route (so a convolution is one
// conv2d.forward call, not unfold + GEMM), then translates each recorded kernel into ONNX
// nodes (onnx/kernel_export.cpp). Views cost no kernel and so leave no record: a kernel simply
// reads its inputs through strides. The translation therefore recovers each view from the
// strides a kernel read a value with (Reshape, Transpose, Slice, Expand; onnx/graph_builder.cpp).
// A layer ONNX has an operator for (nn::LSTM, nn::GRU, nn::RNN,
// nn::ConvTranspose2d) marks its call in
// the capture, and is written as that operator instead of its kernels (onnx/layer_export.h).
// Tensors no kernel wrote (parameters, buffers, constants made on the host) become
// initializers holding the values the forward read. What the capture cannot express (host
// code reading a computed value, CUDA tensors) and kernels without an ONNX form are errors
// naming the op, never a file that computes something else.

/// What export_model writes. Names default to input0.., output0...
struct ExportOptions {
  /// The ONNX operator set the file declares (17: LayerNormalization is an op from 17 on).
  std::int64_t opset = 17;
  /// The names of the symbolic axes: first the batch (each input's dim batch_dims[i], dim 0
  /// by default, and wherever it reaches in the outputs), so the file runs at any batch size;
  /// then, optionally, the time axis of the recurrent layers that read an input as it was
  /// given (Note [The sequence axis] in onnx/graph_builder.cpp). Empty keeps every dim fixed.
  ///   .dynamic_axes = {"batch", "sequence"}, .batch_dims = {1, 1}   // LSTM x [T, N, F], h0 [L, N, H]
  std::vector<std::string> dynamic_axes = {};
  /// Which dim of each input is the batch; empty means dim 0 of every input.
  std::vector<std::int64_t> batch_dims = {};
  std::vector<std::string> input_names = {};
  std::vector<std::string> output_names = {};
  /// Written into the model's metadata_props (a vocabulary, a version).
  std::vector<std::pair<std::string, std::string>> metadata = {};
};

/// What was written: the file's size, its node and initializer counts.
struct ExportReport {
  std::size_t bytes = 0;
  std::size_t nodes = 0;
  std::size_t initializers = 0;
};

/// A forward taking and returning several tensors (the inputs are the graph's inputs).
using Forward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs `module`'s forward on `example_inputs` (one tensor) in eval mode, records it and
/// writes it to `path` as a checked ONNX model. The module's training mode is restored after.
/// Throws NotImplementedError naming the op when a kernel of the forward has no ONNX form.
ExportReport export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                          const ExportOptions& options = {});

/// The same for any forward: `module` (in eval mode for the run) names the initializers after
/// its parameters and buffers.
ExportReport export_function(const Forward& forward, nn::Module& module, const std::vector<Tensor>& example_inputs,
                             const std::string& path, const ExportOptions& options = {});

}  // namespace kiln::onnx
