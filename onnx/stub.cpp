// onnx/stub.cpp — export_model in a Kiln built without ONNX (KILN_ONNX=OFF, or libonnx-dev
// not found): it says how to get it, so that no other file needs an #ifdef.
#include "core/error.h"
#include "onnx/export.h"

namespace kiln::onnx {

namespace {
[[noreturn]] void not_built() {
  KILN_CHECK_NOT_IMPLEMENTED(false,
                             "onnx export: Kiln was built without ONNX (install libonnx-dev and libprotobuf-dev, "
                             "e.g. with scripts/setup.sh, and configure with KILN_ONNX=AUTO or ON)");
  std::abort();  // unreachable: the check above throws
}
}  // namespace

ExportReport export_function(const Forward&, nn::Module&, const std::vector<Tensor>&, const std::string&,
                             const ExportOptions&) {
  not_built();
}

ExportReport export_model(nn::Module&, const std::vector<Tensor>&, const std::string&, const ExportOptions&) {
  not_built();
}

}  // namespace kiln::onnx
