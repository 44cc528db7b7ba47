// core/cuda/cudnn_conv.cpp — conv2d forward and both backward passes through cuDNN 9, on the
// current stream, with the workspace taken from the caching allocator (a byte tensor that is
// freed once the call is queued: the allocator's stream rule keeps it from being reused
// before the kernel has run). cuDNN status codes become Kiln errors naming the call.
//
// The calls are cuDNN's "legacy" descriptor API (cudnnConvolutionForward and friends):
// deprecated in cuDNN 9 in favour of the graph API, whose C++ front end is not a Debian
// package, but shipped and supported in every 9.x release, and a fraction of the code.
// Algorithms come from cuDNN's heuristics (the _v7 queries), best first; the first one whose
// workspace can be allocated runs, and the choice is cached per shape.
// Float32 runs in FMA math unless cuda::set_allow_tf32(true), as for cuBLAS (PyTorch's cuDNN
// default is TF32; Kiln keeps one switch for both so results match the CPU by default).
// Read next: core/cuda/cudnn_batch_norm.cpp.
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cudnn_common.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "core/ops/allocate.h"
#include "core/tensor.h"

namespace kiln::cuda {

namespace {

void set_4d(const TensorDescriptor& d, cudnnDataType_t type, IntArrayRef s) {
  check_cudnn(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, type, cudnn_int(s[0], "a batch size"),
                                         cudnn_int(s[1], "a channel count"), cudnn_int(s[2], "a height"),
                                         cudnn_int(s[3], "a width")),
              "cudnnSetTensor4dDescriptor");
}

/// The descriptors of one convolution: input x, weight w, output y.
struct ConvDescriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;

  ConvDescriptors(IntArrayRef x_sizes, IntArrayRef w_sizes, IntArrayRef y_sizes, DType dtype,
                  const Im2ColGeometry& g, std::int64_t groups) {
    const cudnnDataType_t type = cudnn_data_type(dtype, "cudnn_convolution");
    set_4d(x, type, x_sizes);
    set_4d(y, type, y_sizes);
    check_cudnn(cudnnSetFilter4dDescriptor(w.get(), type, CUDNN_TENSOR_NCHW, cudnn_int(w_sizes[0], "out_channels"),
                                           cudnn_int(w_sizes[1], "in_channels / groups"),
                                           cudnn_int(w_sizes[2], "kernel_h"), cudnn_int(w_sizes[3], "kernel_w")),
                "cudnnSetFilter4dDescriptor");
    // Half types accumulate in float, as cuBLAS does; Float64 in double.
    check_cudnn(cudnnSetConvolution2dDescriptor(conv.get(), cudnn_int(g.pad_h, "pad_h"), cudnn_int(g.pad_w, "pad_w"),
                                                cudnn_int(g.stride_h, "stride_h"), cudnn_int(g.stride_w, "stride_w"),
                                                cudnn_int(g.dilation_h, "dilation_h"),
                                                cudnn_int(g.dilation_w, "dilation_w"), CUDNN_CROSS_CORRELATION,
                                                dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(conv.get(), cudnn_int(groups, "groups")), "cudnnSetConvolutionGroupCount");
    if (dtype == DType::Float16 || dtype == DType::BFloat16) {
      math = CUDNN_TENSOR_OP_MATH;
    } else if (dtype == DType::Float32 && !allow_tf32()) {
      math = CUDNN_FMA_MATH;
    }
    check_cudnn(cudnnSetConvolutionMathType(conv.get(), math), "cudnnSetConvolutionMathType");
  }
};

/// Which of the three convolution passes a choice is for.
enum class Pass : int { Forward, BackwardData, BackwardFilter };

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

/// Heuristic choices already made, per pass, device, dtype, shapes and geometry.
class ChoiceCache {
 public:
  using Key = std::vector<std::int64_t>;
  static Key key(Pass pass, int device, DType dtype, IntArrayRef x, IntArrayRef w, const Im2ColGeometry& g,
                 std::int64_t groups, bool tf32) {
    Key k{static_cast<std::int64_t>(pass), device, static_cast<std::int64_t>(dtype), groups, tf32 ? 1 : 0};
    k.insert(k.end(), x.begin(), x.end());
    k.insert(k.end(), w.begin(), w.end());
    for (std::int64_t v : {g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w}) k.push_back(v);
    return k;
  }
  bool find(const Key& k, std::vector<Choice>& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = choices_.find(k);
    if (it == choices_.end()) return false;
    out = it->second;
    return true;
  }
  void store(const Key& k, std::vector<Choice> choices) {
    std::lock_guard<std::mutex> lock(mutex_);
    choices_[k] = std::move(choices);
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::vector<Choice>> choices_;
};

ChoiceCache& choice_cache() {
  static ChoiceCache cache;
  return cache;
}

/// The algorithms cuDNN's heuristics rank for `pass`, best first, keeping those that run in
/// the descriptors' math (so Float32 without TF32 never gets a tensor-op algorithm).
template <class Perf>
std::vector<Choice> usable(const Perf* perf, int count, const ConvDescriptors& d) {
  std::vector<Choice> out;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (d.math == CUDNN_FMA_MATH && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH) {
      continue;
    }
    out.push_back({static_cast<int>(perf[i].algo), d.math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : perf[i].mathType});
  }
  return out;
}

std::vector<Choice> ranked_algorithms(Pass pass, cudnnHandle_t handle, const ConvDescriptors& d) {
  int returned = 0;
  switch (pass) {
    case Pass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                  "cudnnGetConvolutionForwardAlgorithm_v7");
      return usable(perf, returned, d);
    }
    case Pass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf),
                  "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      return usable(perf, returned, d);
    }
    case Pass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.x.get(), d.y.get(), d.conv.get(),
                                                                d.w.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                &returned, perf),
                  "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      return usable(perf, returned, d);
    }
  }
  return {};
}

std::size_t workspace_size(Pass pass, cudnnHandle_t handle, const ConvDescriptors& d, int algo) {
  std::size_t bytes = 0;
  switch (pass) {
    case Pass::Forward:
      check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                          static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes),
                  "cudnnGetConvolutionForwardWorkspaceSize");
      break;
    case Pass::BackwardData:
      check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                                               &bytes),
                  "cudnnGetConvolutionBackwardDataWorkspaceSize");
      break;
    case Pass::BackwardFilter:
      check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, d.x.get(), d.y.get(), d.conv.get(),
                                                                 d.w.get(),
                                                                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                                                 &bytes),
                  "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      break;
  }
  return bytes;
}

/// Runs one pass: out = pass(a, b) with the best algorithm whose workspace fits in memory.
void run_pass(Pass pass, const Tensor& out, const Tensor& a, const Tensor& b, IntArrayRef x_sizes,
              IntArrayRef w_sizes, IntArrayRef y_sizes, const Im2ColGeometry& g, std::int64_t groups) {
  const int device = device_of(out);
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device);
  ConvDescriptors d(x_sizes, w_sizes, y_sizes, out.dtype(), g, groups);

  const ChoiceCache::Key key = ChoiceCache::key(pass, device, out.dtype(), x_sizes, w_sizes, g, groups, allow_tf32());
  std::vector<Choice> choices;
  if (!choice_cache().find(key, choices)) {
    choices = ranked_algorithms(pass, handle, d);
    KILN_CHECK(!choices.empty(), "cuDNN error: no convolution algorithm supports input ", x_sizes, ", weight ",
               w_sizes, " in ", scalar_type_name(out.dtype()));
    choice_cache().store(key, choices);
  }

  const BlendFactors blend(out.dtype());
  const void* alpha = blend.one();
  const void* beta = blend.zero();

  for (std::size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    check_cudnn(cudnnSetConvolutionMathType(d.conv.get(), c.math), "cudnnSetConvolutionMathType");
    const std::size_t bytes = workspace_size(pass, handle, d, c.algo);
    Tensor workspace;
    try {
      if (bytes > 0) {
        workspace = ops::empty_output({static_cast<std::int64_t>(bytes)}, DType::UInt8, out.device(), "cudnn workspace");
      }
    } catch (const OutOfMemoryError&) {
      if (i + 1 < choices.size()) continue;  // a later algorithm may need less
      throw;
    }
    void* ws = bytes > 0 ? workspace.raw_data_ptr() : nullptr;
    switch (pass) {
      case Pass::Forward:  // a = input, b = weight
        check_cudnn(cudnnConvolutionForward(handle, alpha, d.x.get(), a.raw_data_ptr(), d.w.get(), b.raw_data_ptr(),
                                            d.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, bytes,
                                            beta, d.y.get(), out.raw_data_ptr()),
                    "cudnnConvolutionForward");
        break;
      case Pass::BackwardData:  // a = grad_output, b = weight
        check_cudnn(cudnnConvolutionBackwardData(handle, alpha, d.w.get(), b.raw_data_ptr(), d.y.get(),
                                                 a.raw_data_ptr(), d.conv.get(),
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, bytes, beta,
                                                 d.x.get(), out.raw_data_ptr()),
                    "cudnnConvolutionBackwardData");
        break;
      case Pass::BackwardFilter:  // a = grad_output, b = input
        check_cudnn(cudnnConvolutionBackwardFilter(handle, alpha, d.x.get(), b.raw_data_ptr(), d.y.get(),
                                                   a.raw_data_ptr(), d.conv.get(),
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, bytes,
                                                   beta, d.w.get(), out.raw_data_ptr()),
                    "cudnnConvolutionBackwardFilter");
        break;
    }
    return;
  }
}

}  // namespace

void cudnn_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const Im2ColGeometry& g, std::int64_t groups) {
  run_pass(Pass::Forward, out, input, weight, input.sizes(), weight.sizes(), out.sizes(), g, groups);
  if (!bias.defined()) return;
  // out += bias broadcast over [1, O, 1, 1], in place (as PyTorch's cuDNN convolution adds it)
  const int device = device_of(out);
  DeviceGuard guard(device);
  const cudnnDataType_t type = cudnn_data_type(out.dtype(), "cudnn_convolution");
  TensorDescriptor bias_desc, out_desc;
  set_4d(bias_desc, type, {1, bias.sizes()[0], 1, 1});
  set_4d(out_desc, type, out.sizes());
  const BlendFactors blend(out.dtype());
  check_cudnn(cudnnAddTensor(cudnn_handle(device), blend.one(), bias_desc.get(), bias.raw_data_ptr(), blend.one(),
                             out_desc.get(), out.raw_data_ptr()),
              "cudnnAddTensor");
}

void cudnn_conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                                 const Im2ColGeometry& g, std::int64_t groups) {
  run_pass(Pass::BackwardData, grad_input, grad_output, weight, grad_input.sizes(), weight.sizes(),
           grad_output.sizes(), g, groups);
}

void cudnn_conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                  const Im2ColGeometry& g, std::int64_t groups) {
  run_pass(Pass::BackwardFilter, grad_weight, grad_output, input, input.sizes(), grad_weight.sizes(),
           grad_output.sizes(), g, groups);
}

}  // namespace kiln::cuda
