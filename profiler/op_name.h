// profiler/op_name.h — the name a profile gives an op. Kiln's differentiable ops are known by
// the backward node they build (Function<Derived>::name, "ConvolutionBackward0"); PyTorch
// names that node after the ATen op that built it, so the op's name is read back from it:
// "aten::" + the node name without its "Backward<N>" suffix, in snake_case.
// Read next: profiler/profile.h.
#pragma once

#include <string>

namespace kiln::profiler {

/// "MmBackward0" -> "aten::mm", "NativeBatchNormBackward0" -> "aten::native_batch_norm",
/// "MaxPool2DWithIndicesBackward0" -> "aten::max_pool2d_with_indices",
/// "ThresholdBackwardBackward0" -> "aten::threshold_backward".
std::string op_name_for_node(const char* node_name);

}  // namespace kiln::profiler
