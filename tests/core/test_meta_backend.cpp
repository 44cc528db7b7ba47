// tests/core/test_meta_backend.cpp — the meta device as a backend (core/meta/register.cpp):
// its table mirrors the device meta tensors stand for, its kernels compute nothing, and the
// raw ops hold no meta-device special cases of their own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/creation.h"
#include "core/kernels.h"
#include "core/meta_allocations.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(MetaBackend, ItsTableMirrorsWhatTheDeviceItStandsForHas) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  for (DeviceType stands_for : {DeviceType::Meta, DeviceType::CPU}) {
    const MetaStandsForGuard guard(stands_for);
    const BackendKernels& meta = registered_kernels(DeviceType::Meta);
    EXPECT_NE(&meta, &cpu);
    for (std::size_t i = 0; i < meta.unary.size(); ++i) EXPECT_EQ(meta.unary[i] != nullptr, cpu.unary[i] != nullptr);
    EXPECT_NE(meta.copy, cpu.copy) << "meta copies nothing";
    EXPECT_NE(meta.unary[static_cast<int>(UnaryOp::Exp)], cpu.unary[static_cast<int>(UnaryOp::Exp)]);
    EXPECT_EQ(meta.softmax.forward != nullptr, cpu.softmax.forward != nullptr);
    EXPECT_EQ(meta.adam != nullptr, cpu.adam != nullptr);
    EXPECT_EQ(meta.prefers_op_kernels, cpu.prefers_op_kernels);
  }
}

TEST(MetaBackend, StandingForTheCpuItRunsTheCpusScratchTakingKernels) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  {
    const MetaStandsForGuard guard(DeviceType::CPU);
    const BackendKernels& planned = registered_kernels(DeviceType::Meta);
    EXPECT_EQ(planned.bmm, cpu.bmm);
    EXPECT_EQ(planned.conv2d.forward, cpu.conv2d.forward);
    EXPECT_EQ(planned.conv2d.backward_input, cpu.conv2d.backward_input);
    EXPECT_EQ(planned.conv2d.backward_weight, cpu.conv2d.backward_weight);
    EXPECT_EQ(planned.batch_norm.forward, cpu.batch_norm.forward);
  }
  const BackendKernels& shape_only = registered_kernels(DeviceType::Meta);
  EXPECT_NE(shape_only.bmm, cpu.bmm) << "standing for nothing, no kernel of the CPU's runs";
  EXPECT_NE(shape_only.conv2d.forward, cpu.conv2d.forward);
}

TEST(MetaBackend, ABuildWithoutCudaPlansCudaOverTheKernelsEveryBackendHas) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  const BackendKernels common = meta::kernels_every_backend_has(cpu);
  EXPECT_EQ(common.copy, cpu.copy);
  EXPECT_EQ(common.bmm, cpu.bmm);
  EXPECT_EQ(common.binary, cpu.binary);
  EXPECT_EQ(common.softmax.forward, nullptr);
  EXPECT_EQ(common.conv2d.forward, nullptr);
  EXPECT_EQ(common.adam, nullptr);
  EXPECT_EQ(common.var_mean, nullptr);
  for (bool prefers : common.prefers_op_kernels) EXPECT_FALSE(prefers);
  // Planning for CUDA works in every build: every op a step uses has a meta kernel.
  const MetaStandsForGuard guard(DeviceType::CUDA);
  const Tensor a = empty({3, 4}, TensorOptions().device(kMeta));
  const Tensor b = empty({4, 5}, TensorOptions().device(kMeta));
  const Tensor product = ops::unary(UnaryOp::Relu, ops::mm(a, b));
  EXPECT_TRUE(product.is_meta());
  EXPECT_EQ(product.sizes(), IntArrayRef({3, 5}));
}

TEST(MetaBackend, MetaTensorsGoInAndNothingComesOut) {
  const Tensor cpu = ones({2, 3});
  const Tensor meta = ops::to_device(cpu, kMeta, false);
  EXPECT_TRUE(meta.is_meta());
  EXPECT_EQ(meta.sizes(), cpu.sizes());
  try {
    ops::to_device(meta, kCPU, false);
    FAIL() << "copied out of a meta tensor";
  } catch (const NotImplementedError& e) {
    EXPECT_EQ(e.message(), "Cannot copy out of meta tensor; no data!");
  }
}

// Raw ops and autograd's functions call the kernel of their tensors' device and nothing else:
// none asks what the meta device stands for (the routes and autocast do, and the meta table). What remains of `has_data` is the
// validation of values (index bounds, an integer power's sign), which needs data to read.
TEST(MetaBackend, RawOpsHoldNoPlanningSpecialCases) {
  std::vector<std::string> found;
  for (const fs::path& folder : {fs::path(KILN_SOURCE_DIR) / "core/ops", fs::path(KILN_SOURCE_DIR) / "autograd/functions"}) {
    for (const auto& entry : fs::directory_iterator(folder)) {
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        for (const char* planning : {"meta_stands_for", "route_device_type", "MetaStandsForGuard"}) {
          if (line.find(planning) != std::string::npos) {
            found.push_back(entry.path().filename().string() + ":" + std::to_string(number) + ": " + planning);
          }
        }
      }
    }
  }
  std::ostringstream listed;
  for (const std::string& f : found) listed << f << "\n";
  EXPECT_TRUE(found.empty()) << listed.str();
}

}  // namespace
}  // namespace kiln
