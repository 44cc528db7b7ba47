// onnx/layer_export.h — a layer's whole call written as ONNX's own operator for that layer:
// nn::LSTM, nn::GRU and nn::RNN as one ONNX LSTM, GRU or RNN node per layer (so the file takes
// any sequence length), nn::ConvTranspose2d as ConvTranspose. The capture marks each such call with the
// nodes its kernels made (Note [Layer scopes] in compile/capture.h); the export writes the
// layer's node instead of those kernels. See Note [Layers as ONNX operators].
// Read next: onnx/kernel_export.h (everything else, kernel by kernel).
#pragma once

#include "compile/capture.h"
#include "nn/module.h"
#include "onnx/graph_builder.h"

namespace kiln::onnx {

/// Writes `call`, a call of `layer` (named `name` in the exported module), as ONNX's node for that layer and says which values now
/// hold the call's results. Returns false, writing nothing, when the layer has no ONNX
/// operator of its own or the call is one it does not express (an unbatched input): its
/// kernels are then exported one by one.
bool export_layer(const nn::Module& layer, const std::string& name, const compiler::Scope& call, GraphBuilder& graph);

}  // namespace kiln::onnx
