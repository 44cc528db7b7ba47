// examples/support/failure_cases.h — the catalogue of classic tensor-creation failures from
// the reference articles, each reproduced with Kiln, explained, and fixed. The failures
// program (examples/failures.cpp) prints them; tests/examples/test_failures.cpp asserts that
// every case still reproduces with its documented message and that every fix still works.
// docs/failure-cases.md is the same catalogue as prose.
// Read next: docs/failure-cases.md.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "kiln.h"
#include "fgsm.h"

namespace kiln::examples {

struct FailureCase {
  std::string name;      // the subcommand
  std::string title;     // one line: the symptom
  std::string expected;  // what the reproduction must show (a substring of its output)
  std::string cause;     // three or four lines
  bool gpu_only = false;
  /// Reproduces the failure; returns what the user sees (the error message, or the measured
  /// symptom), or nullopt when the failure did not happen.
  std::function<std::optional<std::string>(std::ostream&)> reproduce;
  /// Runs the fix; true when it works.
  std::function<bool(std::ostream&)> fix;
  /// Where the failure can be seen coming: predicts it without running it (true when the
  /// prediction says it will fail). Empty for cases that cannot be predicted.
  std::function<bool(std::ostream&)> predict{};
};

namespace failure_detail {

/// The message of the kiln::Error `fn` throws, or nullopt when it throws nothing.
template <class Fn>
std::optional<std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return std::nullopt;
}

/// Resident memory of this process in MB (from /proc/self/statm).
inline double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}

template <class Fn>
double milliseconds(Fn&& fn) {
  const auto begin = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
}

inline std::string format(const char* fmt, double a, double b = 0.0, double c = 0.0) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, fmt, a, b, c);
  return buffer;
}

/// A module that creates a tensor with requires_grad but forgets to register it.
struct ForgetfulScale : nn::Module {
  Tensor scale = ones({1}, requires_grad());  // not registered: invisible to parameters()
  std::shared_ptr<nn::Linear> fc;
  ForgetfulScale() : Module("ForgetfulScale") { fc = register_module("fc", std::make_shared<nn::Linear>(2, 1)); }
  Tensor forward(const Tensor& x) override { return fc->forward(x) * scale; }
};

struct RegisteredScale : nn::Module {
  Tensor& scale;
  std::shared_ptr<nn::Linear> fc;
  RegisteredScale() : Module("RegisteredScale"), scale(register_parameter("scale", ones({1}))) {
    fc = register_module("fc", std::make_shared<nn::Linear>(2, 1));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x) * scale; }
};

/// Trains `model` on y = 3x1 - x2 for a few steps; returns how much `watched` moved.
inline double train_and_measure(nn::Module& model, const Tensor& watched) {
  const Tensor before = watched.detach().clone();
  optim::SGD opt(model.parameters(), optim::SGDOptions(0.05));
  manual_seed(0);
  const Tensor x = randn({64, 2});
  const Tensor y = (x.select(1, 0) * 3 - x.select(1, 1)).unsqueeze(1);
  for (int i = 0; i < 20; ++i) {
    opt.zero_grad();
    mse_loss(model.forward(x), y).backward();
    opt.step();
  }
  return (watched.detach() - before).abs().sum().item<double>();
}

/// Bytes the CPU allocator holds for live tensors after `steps` of accumulating a metric.
inline std::int64_t metric_growth(int steps, bool no_grad) {
  manual_seed(0);
  const Tensor w = randn({4096}, requires_grad());
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  Tensor running = zeros({});
  for (int i = 0; i < steps; ++i) {
    const Tensor batch = randn({4096});
    std::optional<NoGradGuard> guard;
    if (no_grad) guard.emplace();
    running = running + (batch * w).sum();  // with grad: every batch stays saved in the graph
  }
  return cpu_allocator_stats().allocated_bytes - before;
}

/// The fragmenting loop: a temporary and a kept result each iteration (`device_tensor(numel)`
/// makes each), then half the results dropped; returns with the kept ones dropped too.
/// `large_request` is then called for the 8 MiB request that no hole fits.
template <class MakeTensor, class LargeRequest>
void fragmenting_loop(const MakeTensor& device_tensor, bool reuse, const LargeRequest& large_request) {
  constexpr std::size_t MiB = 1 << 20;
  const auto chunk = static_cast<std::int64_t>(3 * MiB / 2 / sizeof(float));  // 1.5 MiB
  std::vector<Tensor> kept;
  Tensor scratch = reuse ? device_tensor(chunk) : Tensor();
  for (int i = 0; i < 36; ++i) {
    if (!reuse) scratch = device_tensor(chunk);  // a fresh temporary every iteration
    scratch.fill_(static_cast<double>(i));
    if (reuse && i % 2 == 0) continue;  // the fix keeps only the results it needs
    Tensor result = device_tensor(chunk);
    result.copy_(scratch);
    kept.push_back(result);
  }
  if (!reuse) {
    for (std::size_t i = 0; i < kept.size(); i += 2) kept[i] = Tensor();
  }
  scratch = Tensor();
  large_request(static_cast<std::int64_t>(8 * MiB / sizeof(float)));
}

/// The loop on a 64 MiB fake device. Returns the OOM message of the large request.
inline std::optional<std::string> fragment_until_oom(CachingAllocator& cache, std::ostream& out, bool reuse) {
  auto device_tensor = [&cache](std::int64_t numel) {
    auto* p = static_cast<float*>(cache.allocate(static_cast<std::size_t>(numel) * sizeof(float)));
    return from_blob(p, {numel}, [&cache](void* q) { cache.free(q); });
  };
  std::optional<std::string> message;
  fragmenting_loop(device_tensor, reuse, [&](std::int64_t numel) { message = error_of([&] { device_tensor(numel); }); });
  if (message) out << cache.memory_summary();
  return message;
}

/// The same loop on the meta device, planned for a 64 MiB GPU (kiln::memory::plan): the
/// caching allocator's replay runs out where the real loop will, before anything exists.
inline memory::MemoryPlan plan_fragmenting_loop(bool reuse) {
  return memory::plan(
      [&](memory::PhaseMarker& marker) {
        marker.enter(memory::Phase::Forward, 1);
        auto meta_tensor = [](std::int64_t numel) { return empty({numel}, kMeta); };
        fragmenting_loop(meta_tensor, reuse, [&](std::int64_t numel) { const Tensor big = meta_tensor(numel); });
      },
      {.device = Device("cuda:0"), .capacity = 64 << 20});
}


/// Trains a small model with Adam, a step schedule and a shuffling loader for 40 steps (four
/// epochs of 10), stopped after 15 and restarted in a fresh "process" (new model, optimizer,
/// schedule and loader, the generator reseeded) from what was saved at the stop: the weights
/// alone, or a full training checkpoint. Returns the largest difference between the final
/// weights and those of a run never stopped.
inline double resumed_weight_difference(bool full_checkpoint) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_failures_killed_run";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  set_num_threads(get_num_threads());  // one fixed thread count: see Note [Exact resumption]
  manual_seed(3);
  auto dataset = std::make_shared<data::TensorDataset>(randn({80, 6}), randn({80, 2}));
  struct Run {
    nn::Linear model{6, 2};
    optim::Adam opt{model.parameters(), optim::AdamOptions(0.05)};
    optim::StepLR schedule{opt, 10, 0.5};
    data::DataLoader loader;
    explicit Run(std::shared_ptr<data::Dataset> d) : loader(std::move(d), {.batch_size = 8, .shuffle = true, .seed = 1}) {}
    checkpoint::TrainingState state() {
      return {.model = &model, .optimizer = &opt, .scheduler = &schedule, .loader = &loader};
    }
    /// Trains until `stop_at` steps in all, counting from `step`; returns the step reached.
    std::int64_t train_until(std::int64_t step, std::int64_t stop_at) {
      while (step < stop_at) {
        for (const data::Example& b : loader) {
          opt.zero_grad();
          mse_loss(model.forward(b.data), b.target).backward();
          opt.step();
          schedule.step();
          if (++step == stop_at) break;
        }
      }
      return step;
    }
  };
  manual_seed(0);
  Run uninterrupted(dataset);
  uninterrupted.train_until(0, 40);

  manual_seed(0);
  {
    Run killed(dataset);
    // The loop breaks after step 15, in the middle of epoch 2; the state is saved there.
    killed.train_until(0, 15);
    if (full_checkpoint) checkpoint::CheckpointDir(dir.string()).save(15, killed.state());
    else save((dir / "weights.safetensors").string(), killed.model.state_dict());
  }
  manual_seed(42);  // a new process
  Run resumed(dataset);
  if (full_checkpoint) {
    checkpoint::TrainingState state = resumed.state();
    checkpoint::CheckpointDir(dir.string()).resume(state);
  } else {
    resumed.model.load_state_dict(load((dir / "weights.safetensors").string()));
  }
  resumed.train_until(15, 40);
  std::filesystem::remove_all(dir);
  return (resumed.model.weight - uninterrupted.model.weight).abs().max().item<double>();
}

}  // namespace failure_detail

/// Every case, in the catalogue's order.
inline std::vector<FailureCase> failure_cases() {
  using namespace failure_detail;
  std::vector<FailureCase> cases;

  cases.push_back({"float64-input", "data read from CSV as Float64 fed to a Float32 model",
                   "expected scalar type Float but found Double",
                   "Text formats carry no dtype: a reader that defaults to Float64 (NumPy's loadtxt, a CSV\n"
                   "reader told to keep full precision) creates Double tensors, while parameters are\n"
                   "Float32. Matmul needs one dtype and does not guess which one you meant.",
                   false,
                   [](std::ostream& out) {
                     const data::CsvTable table = data::parse_csv("a,b,c,d\n0.1,0.2,0.3,0.4\n0.5,0.6,0.7,0.8\n",
                                                            {.default_dtype = kFloat64});
                     const Tensor x = table.to_tensor();
                     out << "input dtype " << x.dtype() << ", weight dtype Float32\n";
                     nn::Linear model(4, 2);
                     return error_of([&] { model.forward(x); });
                   },
                   [](std::ostream& out) {
                     // Choose the dtype where the tensor is created: at load.
                     const data::CsvTable table = data::parse_csv("a,b,c,d\n0.1,0.2,0.3,0.4\n0.5,0.6,0.7,0.8\n",
                                                            {.default_dtype = kFloat32});
                     nn::Linear model(4, 2);
                     const Tensor y = model.forward(table.to_tensor());
                     out << "parse_csv(..., {.default_dtype = kFloat32}) -> output " << y.sizes() << " "
                         << y.dtype() << "\n";
                     return y.dtype() == kFloat32;
                   }});

  cases.push_back({"deep-copy-memory", "tensor() of a large buffer doubles its memory; from_blob does not",
                   "tensor() copy",
                   "tensor(values) always makes a deep copy: new memory, as large as the data (1e7 Float32\n"
                   "= 40 MB). from_blob / as_tensor share the caller's buffer: O(1) memory and time. The\n"
                   "reference articles measured 76 MB vs 0.12 MB for 1e7 Float64 values in PyTorch.",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     std::vector<float> source(10'000'000, 1.0f);
                     cpu_empty_cache();
                     const double before = resident_mb();
                     Tensor copy = tensor(source);
                     const double grown = resident_mb() - before;
                     out << "source: 1e7 Float32 (40 MB) already in memory\n";
                     const std::string seen = format("tensor() copy: resident memory +%.1f MB", grown);
                     if (grown < 30.0) return std::nullopt;
                     return seen;
                   },
                   [](std::ostream& out) {
                     auto source = std::make_shared<std::vector<float>>(10'000'000, 1.0f);
                     const double before = resident_mb();
                     Tensor shared = as_tensor(source);  // zero-copy, keeps the vector alive
                     const double grown = resident_mb() - before;
                     out << format("as_tensor(shared_ptr<vector>) zero-copy: resident memory +%.2f MB\n", grown);
                     return grown < 1.0 && shared.data_ptr<float>() == source->data();
                   }});

  cases.push_back({"zero-copy-aliasing", "changing the source buffer changes a zero-copy tensor",
                   "tensor changed to 100",
                   "from_blob and as_tensor do not copy: the tensor *is* the buffer. Writing to the buffer\n"
                   "(or to the tensor) changes both. That is the point when memory matters, and a bug when\n"
                   "the tensor was meant to be a snapshot.",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
                     const Tensor t = from_blob(buffer->data(), {3}, buffer);
                     (*buffer)[0] = 100;
                     out << "buffer[0] = 100 after from_blob\n";
                     if (t[0].item<float>() != 100) return std::nullopt;
                     return "tensor changed to 100: " + to_string(t);
                   },
                   [](std::ostream& out) {
                     std::vector<float> buffer{1, 2, 3};
                     const Tensor snapshot = tensor(buffer);  // deep copy: independent
                     buffer[0] = 100;
                     out << "tensor(buffer) then buffer[0] = 100: tensor[0] is still " << snapshot[0].item<float>()
                         << "\n";
                     return snapshot[0].item<float>() == 1.0f;
                   }});

  cases.push_back({"dangling-blob", "a borrowed from_blob tensor outlives its buffer",
                   "borrowed memory",
                   "from_blob_borrowed shares memory without keeping it alive: when the std::vector goes\n"
                   "out of scope the tensor points at freed memory, and reading it is undefined behaviour.\n"
                   "AddressSanitizer reports the read: cmake -B build-asan -DKILN_SANITIZE=ON -DKILN_CUDA=OFF\n"
                   "&& cmake --build build-asan -j2 --target failures && build-asan/examples/failures\n"
                   "dangling-blob --unsafe",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     Tensor t;
                     {
                       std::vector<float> buffer{1, 2, 3};
                       t = from_blob_borrowed(buffer.data(), {3});
                     }  // buffer freed here; t still points at it
                     out << "the vector went out of scope; the tensor still points at its memory.\n";
                     if (std::getenv("KILN_FAILURES_UNSAFE") != nullptr) {
                       out << "reading it (use-after-free): " << t.sum().item<float>() << "\n";
                     }
                     const std::string seen = t.describe();
                     if (seen.find("borrowed memory") == std::string::npos) return std::nullopt;
                     return "the tensor was " + seen;
                   },
                   [](std::ostream& out) {
                     Tensor t;
                     {
                       auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
                       t = from_blob(buffer->data(), {3}, buffer);  // the tensor co-owns the vector
                     }
                     out << "from_blob with an owner: after the scope, sum = " << t.sum().item<float>() << "\n";
                     return t.sum().item<float>() == 6.0f;
                   }});

  cases.push_back({"non-contiguous", "a transposed (HWC -> CHW) image is not contiguous: hidden copies",
                   "view size is not compatible with input tensor's size and stride",
                   "permute/transpose only swap strides. view() needs compatible strides and refuses;\n"
                   "reshape() and most kernels silently copy the data every time they see it. Call\n"
                   "contiguous() once, up front, so the copy happens once.",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     manual_seed(0);
                     const Tensor chw = rand({512, 512, 3}).permute({2, 0, 1});
                     out << "chw.is_contiguous() = " << (chw.is_contiguous() ? "true" : "false")
                         << ", strides " << chw.strides() << "\n";
                     const double ms = milliseconds([&] {
                       for (int i = 0; i < 20; ++i) chw.flatten().sum();
                     });
                     out << format("20 x flatten() + sum on the view: %.1f ms (flatten must copy each time)\n", ms);
                     return error_of([&] { chw.view({-1}); });
                   },
                   [](std::ostream& out) {
                     manual_seed(0);
                     const Tensor chw = rand({512, 512, 3}).permute({2, 0, 1});
                     Tensor once;
                     const double ms = milliseconds([&] {
                       once = chw.contiguous();
                       for (int i = 0; i < 20; ++i) once.view({-1}).sum();
                     });
                     out << format("contiguous() once, then 20 x view(-1) + sum: %.1f ms\n", ms);
                     return once.is_contiguous();
                   }});

  cases.push_back({"unregistered-parameter", "a tensor with requires_grad inside a module never trains",
                   "not in parameters()",
                   "requires_grad makes a tensor *track* gradients; it does not tell the module or the\n"
                   "optimizer that it exists. parameters() lists registered tensors only, so the optimizer\n"
                   "never updates the forgotten one (PyTorch: assign an nn.Parameter attribute).",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     ForgetfulScale model;
                     const double moved = train_and_measure(model, model.scale);
                     out << "parameters(): " << model.parameters().size() << " tensors (fc.weight, fc.bias)\n";
                     if (moved != 0.0) return std::nullopt;
                     return "scale is not in parameters(): after 20 SGD steps it moved by 0";
                   },
                   [](std::ostream& out) {
                     RegisteredScale model;
                     const double moved = train_and_measure(model, model.scale);
                     out << "register_parameter(\"scale\", ...): parameters() has " << model.parameters().size()
                         << " tensors; scale moved by " << moved << "\n";
                     return moved > 0.0;
                   }});

  cases.push_back({"grad-on-intermediate", "accumulating a tensor that requires grad keeps a growing graph alive",
                   "still held",
                   "Every op on a tensor that requires grad records a node that saves its inputs. A metric\n"
                   "summed over an epoch (running = running + loss) chains every step's graph to the next,\n"
                   "so nothing is ever freed. Accumulate under NoGradGuard, or a plain double via item().",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     const std::int64_t grown = metric_growth(200, false);
                     out << "200 steps of running = running + (batch * w).sum()\n";
                     // Every step's 16 KiB batch stays saved: growth proportional to the steps.
                     if (grown < 180 * 4096 * 4) return std::nullopt;
                     return format("%.2f MB still held by the graph after 200 steps", static_cast<double>(grown) / 1e6);
                   },
                   [](std::ostream& out) {
                     const std::int64_t grown = metric_growth(200, true);
                     out << format("under NoGradGuard: %.3f MB held after 200 steps\n", static_cast<double>(grown) / 1e6);
                     return grown < 64 * 1024;
                   }});

  cases.push_back({"fgsm-without-grad", "an FGSM attack on an input created without requires_grad",
                   "the input images do not require grad",
                   "The attack needs d(loss)/d(input). Autograd computes gradients only for tensors created\n"
                   "with requires_grad (the contract is fixed at creation), so the input's .grad() stays\n"
                   "undefined. Kiln's fgsm() checks first instead of dereferencing an empty gradient.",
                   false,
                   [](std::ostream&) {
                     manual_seed(0);
                     nn::Linear model(4, 2);
                     const Tensor images = rand({1, 4});
                     return error_of([&] { fgsm(model, images, tensor(std::vector<std::int64_t>{1}), 0.1); });
                   },
                   [](std::ostream& out) {
                     manual_seed(0);
                     nn::Linear model(4, 2);
                     const Tensor images = rand({1, 4}, requires_grad());  // the contract, at creation
                     const Tensor adversarial = fgsm(model, images, tensor(std::vector<std::int64_t>{1}), 0.1);
                     out << "rand({1, 4}, requires_grad()): |x_adv - x| = " << (adversarial - images.detach()).abs().max().item<float>()
                         << " = eps\n";
                     return std::abs((adversarial - images.detach()).abs().max().item<float>() - 0.1f) < 1e-6f;
                   }});

  cases.push_back({"oom-fragmentation", "out of memory while most reserved memory is free",
                   "is reserved by Kiln but unallocated",
                   "The caching allocator keeps freed blocks inside its segments for reuse. Tensors of one\n"
                   "size created in a loop, half of them kept, leave holes: plenty of memory is reserved but\n"
                   "no hole fits a larger request, and no segment can be returned. (A 64 MiB fake device,\n"
                   "the allocator's own algorithm: see core/caching_allocator.h.)",
                   false,
                   [](std::ostream& out) {
                     BoundedHostArena arena(64 << 20, "GPU 0");
                     CachingAllocator cache(arena);
                     return fragment_until_oom(cache, out, false);
                   },
                   [](std::ostream& out) {
                     BoundedHostArena arena(64 << 20, "GPU 0");
                     CachingAllocator cache(arena);
                     // Reuse one scratch buffer (fill_/copy_ into it) instead of a fresh temporary
                     // per iteration; release cached blocks with empty_cache() between phases.
                     const bool ok = !fragment_until_oom(cache, out, true).has_value();
                     cache.empty_cache();
                     out << "one reused scratch buffer: the 8 MiB request fits; reserved "
                         << format_memory_size(cache.stats().reserved_bytes.current) << " after empty_cache()\n";
                     return ok && plan_fragmenting_loop(true).fits();
                   },
                   [](std::ostream& out) {
                     // The loop run on the meta device, planned for the same 64 MiB GPU.
                     const memory::MemoryPlan plan = plan_fragmenting_loop(false);
                     out << plan.summary();
                     return !plan.fits();
                   }});

  cases.push_back({"batchnorm-batch1", "BatchNorm in training mode with a batch of one",
                   "Expected more than 1 value per channel when training, got input size [1, 256, 1, 1]",
                   "Training-mode batch norm normalises with the batch's own variance; one value per\n"
                   "channel has none. It typically happens on the last, smaller batch of an epoch, or\n"
                   "when evaluating a single sample without eval().",
                   false,
                   [](std::ostream&) {
                     nn::BatchNorm2d bn(256);
                     return error_of([&] { bn.forward(randn({1, 256, 1, 1})); });
                   },
                   [](std::ostream& out) {
                     nn::BatchNorm2d bn(256);
                     bn.eval();  // running statistics instead of the batch's
                     const Tensor y = bn.forward(randn({1, 256, 1, 1}));
                     out << "bn.eval(): output " << y.sizes()
                         << " (when training, DataLoader drop_last=true avoids a last batch of one)\n";
                     return y.sizes() == IntArrayRef({1, 256, 1, 1});
                   }});

  cases.push_back({"device-mismatch", "the model on one device, the input on another",
                   "Expected all tensors to be on the same device, but found at least two devices",
                   "Ops never move data implicitly: a copy between devices is expensive and must be asked\n"
                   "for. Parameters live where the model was moved to; the input where it was created.\n"
                   "(Without a GPU the meta device stands in: shapes only, no data.)",
                   false,
                   [](std::ostream&) {
                     nn::Linear model(4, 2);
                     model.to(cuda::is_available() ? Device("cuda") : kMeta);
                     return error_of([&] { model.forward(randn({3, 4})); });
                   },
                   [](std::ostream& out) {
                     nn::Linear model(4, 2);
                     const Device device = cuda::is_available() ? Device("cuda") : kMeta;
                     model.to(device);
                     const Tensor y = model.forward(randn({3, 4}).to(device));  // move the input once
                     out << "input.to(" << device << "): output " << y.sizes() << " on " << y.device() << "\n";
                     return y.device().type() == device.type();
                   }});

  cases.push_back({"inplace-saved-tensor", "modifying a tensor that backward still needs",
                   "one of the variables needed for gradient computation has been modified by an inplace operation",
                   "exp() saves its output for backward (d exp(x)/dx = exp(x)). Changing it in place\n"
                   "afterwards would make the gradient silently wrong, so every tensor carries a version\n"
                   "counter and backward checks that saved tensors are at the version they were saved at.",
                   false,
                   [](std::ostream&) {
                     const Tensor x = tensor({1.0f, 2.0f, 3.0f}, requires_grad());
                     const Tensor y = x.exp();
                     {
                       NoGradGuard no_grad;
                       y.mul_(2);
                     }
                     return error_of([&] { y.sum().backward(); });
                   },
                   [](std::ostream& out) {
                     const Tensor x = tensor({1.0f, 2.0f, 3.0f}, requires_grad());
                     const Tensor y = x.exp() * 2;  // out of place: the saved exp(x) is untouched
                     y.sum().backward();
                     out << "y = x.exp() * 2 (out of place): x.grad = " << to_string(x.grad()) << "\n";
                     return allclose(x.grad(), x.detach().exp() * 2);
                   }});

  cases.push_back({"backward-twice", "calling backward() twice on one graph",
                   "Trying to backward through the graph a second time",
                   "backward() frees the tensors each node saved as soon as it has used them, so a\n"
                   "training step's memory is released at once. A second backward through the same graph\n"
                   "finds them gone. Keep them with retain_graph=true when you really need two passes.",
                   false,
                   [](std::ostream&) {
                     const Tensor x = tensor({1.0f, 2.0f}, requires_grad());
                     const Tensor loss = (x * x).sum();
                     loss.backward();
                     return error_of([&] { loss.backward(); });
                   },
                   [](std::ostream& out) {
                     const Tensor x = tensor({1.0f, 2.0f}, requires_grad());
                     const Tensor loss = (x * x).sum();
                     loss.backward({}, /*retain_graph=*/true);
                     loss.backward();
                     out << "backward(retain_graph=true), then backward(): x.grad = " << to_string(x.grad())
                         << " (2x accumulated twice)\n";
                     return allclose(x.grad(), x.detach() * 4);
                   }});

  cases.push_back({"non-blocking-pageable", "to(cuda, non_blocking=true) from pageable memory does not overlap",
                   "pageable",
                   "The GPU can copy asynchronously only from page-locked memory. From ordinary (pageable)\n"
                   "memory the driver stages the bytes through its own pinned buffer, and the call returns\n"
                   "only when the copy is done: non_blocking changes nothing. Pin the batch (DataLoader\n"
                   "pin_memory=true, or tensor.pin_memory()).",
                   true,
                   [](std::ostream& out) -> std::optional<std::string> {
                     const Tensor pageable = ones({32 << 20});  // 128 MiB
                     const double ms = milliseconds([&] { pageable.to(Device("cuda"), /*non_blocking=*/true); });
                     cuda::synchronize();
                     out << format("pageable.to(cuda, non_blocking=true) kept the host for %.2f ms\n", ms);
                     return format("pageable: the call blocked for %.2f ms (the whole copy)", ms);
                   },
                   [](std::ostream& out) {
                     const Tensor pinned = ones({32 << 20}).pin_memory();
                     Tensor on_gpu;
                     const double ms = milliseconds([&] { on_gpu = pinned.to(Device("cuda"), /*non_blocking=*/true); });
                     const double total = ms + milliseconds([] { cuda::synchronize(); });
                     out << format("pinned: the call returned after %.2f ms; the copy finished at %.2f ms\n", ms, total);
                     return ms < total;
                   }});

  cases.push_back({"killed-run", "a killed run resumed from its saved weights does not continue where it stopped",
                   "weights-only resume",
                   "A run is more than its weights: Adam's moments and step counts, the schedule's position,\n"
                   "the shuffle order and position in the epoch, and the generator all shape the steps to\n"
                   "come. Reloading only model.state_dict() restarts all of them. Save a full training\n"
                   "checkpoint (checkpoint::CheckpointDir, or --checkpoint-dir and --resume).",
                   false,
                   [](std::ostream& out) -> std::optional<std::string> {
                     const double diff = resumed_weight_difference(false);
                     out << "40 steps of Adam + StepLR, stopped after 15, resumed from model.state_dict()\n";
                     if (diff == 0.0) return std::nullopt;
                     return format("weights-only resume: the final weights differ from an uninterrupted run's by "
                                   "up to %.3g", diff);
                   },
                   [](std::ostream& out) {
                     const double diff = resumed_weight_difference(true);
                     out << format("resumed from a CheckpointDir training checkpoint: the final weights differ by %g "
                                   "(bit-identical)\n", diff);
                     return diff == 0.0;
                   }});
  return cases;
}

}  // namespace kiln::examples
