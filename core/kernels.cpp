// core/kernels.cpp — building the kernel tables, once.
#include "core/kernels.h"

#include "core/cuda/cuda.h"

namespace kiln {

namespace {
std::array<BackendKernels, kNumDeviceTypes> build_tables() {
  std::array<BackendKernels, kNumDeviceTypes> tables{};
  cpu::register_kernels(tables[static_cast<int>(DeviceType::CPU)]);
  cuda::register_kernels(tables[static_cast<int>(DeviceType::CUDA)]);
  // The meta device has no kernels: raw ops stop after shape inference.
  return tables;
}
}  // namespace

const BackendKernels& kernels_for(DeviceType type) {
  static const std::array<BackendKernels, kNumDeviceTypes> tables = build_tables();
  return tables[static_cast<int>(type)];
}

}  // namespace kiln
