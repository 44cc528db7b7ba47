// core/kernels.cpp — building the kernel tables, once.
#include "core/kernels.h"

#include "core/capture_hooks.h"
#include "core/cuda/cuda.h"
#include "core/profiler_hooks.h"

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

const BackendKernels& registered_kernels(DeviceType type) {
  static const std::array<BackendKernels, kNumDeviceTypes> tables = build_tables();
  return tables[static_cast<int>(type)];
}

const BackendKernels& kernels_for(DeviceType type) {
  if (profiler::Observer* p = profiler::observer(); p != nullptr && type != DeviceType::Meta) [[unlikely]] {
    p->route(type == DeviceType::CUDA ? profiler::Route::Cuda : profiler::Route::Eigen);
  }
  if (capture::Observer* o = capture::observer()) {
    if (const BackendKernels* recording = o->kernels(type)) return *recording;
  }
  return registered_kernels(type);
}

}  // namespace kiln
