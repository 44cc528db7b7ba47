// core/kernels.cpp — building the kernel tables, once.
#include "core/kernels.h"

#include "core/capture_hooks.h"
#include "core/cuda/cuda.h"
#include "core/meta_allocations.h"
#include "core/profiler_hooks.h"

namespace kiln {

namespace {

struct Tables {
  std::array<BackendKernels, kNumDeviceTypes> devices{};  // the meta entry unused: see `meta`
  // The meta device's tables, by the device type meta tensors stand for (Note [The meta
  // device is a backend] in core/meta/register.cpp).
  std::array<BackendKernels, kNumDeviceTypes> meta{};
};

Tables build_tables() {
  Tables t;
  const auto slot = [](DeviceType type) { return static_cast<std::size_t>(type); };
  cpu::register_kernels(t.devices[slot(DeviceType::CPU)]);
  cuda::register_kernels(t.devices[slot(DeviceType::CUDA)]);
  meta::register_kernels(t.meta[slot(DeviceType::CPU)], t.devices[slot(DeviceType::CPU)], /*plans_scratch=*/true);
  meta::register_kernels(t.meta[slot(DeviceType::CUDA)],
                         cuda::is_built() ? t.devices[slot(DeviceType::CUDA)]
                                          : meta::kernels_every_backend_has(t.devices[slot(DeviceType::CPU)]),
                         false);
  meta::register_kernels(t.meta[slot(DeviceType::Meta)], t.devices[slot(DeviceType::CPU)], false);
  return t;
}

}  // namespace

const BackendKernels& registered_kernels(DeviceType type) {
  static const Tables tables = build_tables();
  if (type == DeviceType::Meta) return tables.meta[static_cast<std::size_t>(meta_stands_for())];
  return tables.devices[static_cast<std::size_t>(type)];
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
