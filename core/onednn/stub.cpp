// core/onednn/stub.cpp — the CPU without oneDNN (KILN_ONEDNN=OFF, or libdnnl-dev not found):
// the CPU table keeps its Eigen kernels and composite graphs, the backends:: queries say there
// is no library route, and oneDNN's convolution passes run nothing (routes::cpu_conv2d never picks
// them; each says so by returning false).
// Read next: core/onednn/onednn.h.
#include "core/backends.h"
#include "core/onednn/onednn.h"

namespace kiln::onednn {

void register_kernels(BackendKernels&) {}

bool conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t,
                    bool) {
  return false;
}
bool conv2d_backward_input(const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t) {
  return false;
}
bool conv2d_backward_weight(const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t) {
  return false;
}
bool conv2d_backward_weight_bias(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                                 std::int64_t) {
  return false;
}
bool conv2d_forward_relu_max_pool(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Im2ColGeometry&, const Im2ColGeometry&, std::int64_t) {
  return false;
}
bool conv2d_backward_through_max_pool(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                      const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                                      std::int64_t) {
  return false;
}
bool conv2d_backward_weight_bias_through_max_pool(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                  const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t) {
  return false;
}

std::optional<std::int64_t> conv2d_input_channel_block(DType, IntArrayRef, IntArrayRef, const Im2ColGeometry&,
                                                       std::int64_t, bool) {
  return std::nullopt;
}

}  // namespace kiln::onednn

namespace kiln::backends {

bool onednn_is_available() { return false; }
std::string onednn_cpu_isa() { return ""; }
bool onednn_has_bf16() { return false; }
OneDnnStats onednn_stats() { return {}; }

}  // namespace kiln::backends
