// tests/onnx/test_export_file.cpp — what export_model writes, read back with ONNX's own
// protobuf classes (names, initializers, the symbolic batch axis, metadata), how long the
// CNN's export takes, and the errors it gives for what it cannot write. No ONNX Runtime needed.
#include <onnx/onnx_pb.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "examples/support/models.h"
#include "onnx/onnx_runtime.h"
#include "support/test_util.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

std::string file_for(const std::string& name) {
  const fs::path folder = fs::current_path() / "onnx_files";
  fs::create_directories(folder);
  return (folder / (name + ".onnx")).string();
}

::onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  return model;
}

TEST(OnnxFile, HoldsNamedWeightsABatchAxisAndMetadata) {
  manual_seed(20);
  examples::Mlp mlp;
  const std::string path = file_for("mlp_file");
  const onnx::ExportReport report =
      onnx::export_model(mlp, {randn({4, 784})}, path,
                         {.dynamic_axes = {"batch"}, .input_names = {"input"}, .output_names = {"logits"},
                          .metadata = {{"classes", "10"}}});
  const ::onnx::ModelProto model = read_model(path);
  EXPECT_EQ(report.bytes, fs::file_size(path));
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), 17);
  const ::onnx::GraphProto& g = model.graph();
  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), "input");
  EXPECT_EQ(g.input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(g.input(0).type().tensor_type().shape().dim(1).dim_value(), 784);
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(g.output(0).name(), "logits");
  EXPECT_EQ(g.output(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(g.output(0).type().tensor_type().shape().dim(1).dim_value(), 10);
  // The weights as initializers under their module names, with the trained values.
  std::map<std::string, const ::onnx::TensorProto*> initializers;
  for (const ::onnx::TensorProto& t : g.initializer()) initializers[t.name()] = &t;
  for (const auto& [name, p] : mlp.named_parameters()) {
    ASSERT_TRUE(initializers.count(name)) << name;
    const ::onnx::TensorProto& t = *initializers[name];
    EXPECT_EQ(t.raw_data().size(), p.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw_data().data(), p.raw_data_ptr(), p.nbytes()), 0) << name;
  }
  // MatMul for each Linear, Relu between them; no node left unexplained.
  std::map<std::string, int> ops;
  for (const ::onnx::NodeProto& n : g.node()) ++ops[n.op_type()];
  EXPECT_EQ(ops["MatMul"], 3);
  EXPECT_EQ(ops["Relu"], 2);
  ASSERT_EQ(model.metadata_props_size(), 1);
  EXPECT_EQ(model.metadata_props(0).key(), "classes");
  EXPECT_EQ(model.metadata_props(0).value(), "10");
}

TEST(OnnxFile, WithoutDynamicAxesEveryDimIsFixed) {
  examples::Mlp mlp;
  const std::string path = file_for("mlp_fixed");
  onnx::export_model(mlp, {randn({1, 784})}, path);
  const ::onnx::ModelProto model = read_model(path);
  EXPECT_EQ(model.graph().input(0).name(), "input0");
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(0).dim_value(), 1);
  EXPECT_EQ(model.graph().output(0).name(), "output0");
}

TEST(OnnxFile, TheCnnExportsInUnderASecond) {
  manual_seed(21);
  auto cnn = std::make_shared<examples::Cnn>();
  Lambda m([cnn](const Tensor& x) { return cnn->forward(examples::normalize_fashion(x)); }, {{"model", cnn}});
  const std::string path = file_for("cnn_timed");
  const Tensor x = rand({3, 1, 28, 28});
  onnx::export_model(m, {x}, path, {.dynamic_axes = {"batch"}});  // warm: oneDNN's primitives built
  const auto start = std::chrono::steady_clock::now();
  const onnx::ExportReport report = onnx::export_model(m, {x}, path, {.dynamic_axes = {"batch"}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[onnx] CNN export: %.3f s, %zu nodes, %zu initializers, %zu bytes\n", seconds, report.nodes,
              report.initializers, report.bytes);
  EXPECT_LT(seconds, 1.0);
}

TEST(OnnxFile, TheModuleKeepsItsTrainingMode) {
  examples::Mlp mlp;
  mlp.train();
  mlp.fc1->eval();  // a layer the caller froze stays frozen
  onnx::export_model(mlp, {randn({2, 784})}, file_for("mode"));
  EXPECT_TRUE(mlp.is_training());
  EXPECT_FALSE(mlp.fc1->is_training());
}

TEST(OnnxErrors, AKernelWithoutExportIsNamed) {
  Lambda noisy([](const Tensor& x) { return x + rand_like(x); });
  const std::string message = error_of<NotImplementedError>(
      [&] { onnx::export_model(noisy, {randn({2, 3})}, file_for("noisy")); });
  EXPECT_NE(message.find("onnx export: random has no ONNX export"), std::string::npos) << message;
}

// nn::ConvTranspose2d is written as ONNX's ConvTranspose (onnx/layer_export.h); the bare
// function is matmul + fold (col2im), and col2im has no ONNX form in opset 17.
TEST(OnnxErrors, FunctionalConvTransposeIsNotExportedAndSaysSo) {
  const Tensor weight = randn({3, 4, 3, 3});
  Lambda m([weight](const Tensor& x) { return conv_transpose2d(x, weight); });
  const std::string message = error_of<NotImplementedError>(
      [&] { onnx::export_model(m, {randn({2, 3, 5, 5})}, file_for("deconv")); });
  EXPECT_NE(message.find("onnx export: col2im has no ONNX export"), std::string::npos) << message;
}

TEST(OnnxErrors, HostCodeReadingAComputedValueIsRefused) {
  Lambda host([](const Tensor& x) { return x * (x.sum().item<double>()); });
  const std::string message = error_of<NotImplementedError>(
      [&] { onnx::export_model(host, {randn({2, 3})}, file_for("host")); });
  EXPECT_NE(message.find("onnx export: the forward cannot be captured"), std::string::npos) << message;
  EXPECT_NE(message.find("item"), std::string::npos) << message;
}

TEST(OnnxErrors, OptionsAreChecked) {
  examples::Mlp mlp;
  EXPECT_ERROR(onnx::export_model(mlp, {randn({1, 784})}, file_for("bad"), {.dynamic_axes = {"batch"}}),
               "with dynamic_axes the example inputs need a batch (dim 0) of at least 2");
  EXPECT_ERROR(onnx::export_model(mlp, {randn({2, 784})}, file_for("bad"), {.opset = 13}),
               "onnx export: opset 13 is not supported");
  EXPECT_ERROR(onnx::export_model(mlp, {randn({2, 784})}, file_for("bad"), {.input_names = {"a", "b"}}),
               "onnx export: 2 input_names for 1 inputs");
  EXPECT_ERROR(onnx::export_model(mlp, {randn({2, 784})}, file_for("bad"), {.dynamic_axes = {"a", "b", "c"}}),
               "onnx export: dynamic_axes names the batch axis and, optionally, the sequence axis, got 3 names");
  EXPECT_ERROR(onnx::export_model(mlp, {randn({2, 784})}, file_for("bad"),
                                  {.dynamic_axes = {"batch"}, .batch_dims = {2}}),
               "onnx export: batch_dims[0] is 2 but input 0 has 2 dims");
  EXPECT_ERROR(onnx::export_model(mlp, {randn({2, 784})}, file_for("bad"), {.dynamic_axes = {"batch", "sequence"}}),
               "onnx export: dynamic_axes names the sequence axis 'sequence', but no recurrent layer");
}

}  // namespace
}  // namespace kiln::testing
