// autograd/autocast.h — automatic mixed precision: inside an `autocast` region, each op runs in
// the dtype its policy names (PyTorch's torch.autocast, as an RAII guard LibTorch lacks).
//
//   {
//     kiln::amp::autocast guard(kiln::DeviceType::CPU);      // BFloat16 on the CPU
//     Tensor logits = model.forward(x);                       // linear/conv in BFloat16
//     Tensor loss = kiln::cross_entropy(logits, y);           // losses in Float32
//   }
//   loss.backward();  // casts are differentiable: Float32 parameters get Float32 grads
//
// This is step 1 of the op pipeline (STYLE.md): an op declares its policy on its own struct
// (`static constexpr amp::CastPolicy autocast_policy = ...`), and Function::apply or the
// composite op's front end calls amp::run before anything else. See Note [Autocast policies].
// It lives in autograd/, not amp/, because it is a stage of the differentiable op pipeline:
// Function::apply calls it, and its casts are autograd's own differentiable `to()`. amp/
// holds the training utility above the optimizers, GradScaler (Note [Layering]).
// Read next: amp/grad_scaler.h.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scoped_value.h"
#include "core/tensor.h"

namespace kiln::amp {

// Note [Autocast policies]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's lists (aten/src/ATen/autocast_mode.cpp), and where Kiln's ops fall:
//
//   LowerPrecision  PyTorch: conv*, matmul, mm, bmm, addmm, baddbmm, linear, prelu, ... —
//                   ops that are fast in low precision and tolerate its rounding.
//                   Kiln: mm, bmm (Functions), matmul, addmm, linear, conv2d (composites).
//   Fp32            PyTorch: exp, log, pow, reciprocal, rsqrt, softmax, log_softmax, sum,
//                   prod, norm, layer_norm, every *_loss, ... — ops whose range or
//                   accumulation overflows or loses too much in 16 bits.
//                   Kiln: exp, log, pow, reciprocal, rsqrt, sum, prod, 2-norm (Functions),
//                   mean, softmax, log_softmax, logsumexp, nll_loss, cross_entropy, mse_loss,
//                   l1_loss, binary_cross_entropy_with_logits, layer_norm, batch_norm.
//   Promote         PyTorch: cat, stack, where-like and add-like ops with mixed inputs
//                   (addcmul, index_put, scatter_add, ...): run in the widest input dtype.
//                   Kiln: add, sub, mul, div, where, cat (Functions); stack through cat.
//   (none)          everything else runs in whatever dtype its inputs have: relu, max_pool2d,
//                   views, ... (PyTorch's "pass-through" ops).
//
// Differences from PyTorch, on purpose: mean is Fp32 (the issue asks it; PyTorch leaves it
// out because its kernel accumulates in float anyway); batch_norm computes its statistics in
// Float32 and returns the input's dtype (what cuDNN's mixed batch norm does), so the next conv
// needs no cast; a dtype other than Float16/BFloat16 is an error instead of a warning; the
// cast cache also notices in-place updates of a cached parameter (version counter) and keeps
// separate entries for grad mode on and off, where PyTorch documents both as caveats.
//
// Only tensors that autocast may touch are cast ("eligible"): floating, not Float64, on the
// region's device type. The region's device type is that of the op's first tensor argument.
// Inside an op that autocast already handled, its internal ops are not autocast again
// (PyTorch excludes the Autocast dispatch key the same way).
enum class CastPolicy : std::uint8_t { LowerPrecision, Fp32, Promote };

/// An autocast region for one device type on this thread. Nesting restores the outer state;
/// `enabled = false` switches autocast off inside a region. The cast cache is cleared when
/// the outermost guard of the thread exits.
///
///   amp::autocast outer(DeviceType::CUDA);                 // Float16
///   { amp::autocast off(DeviceType::CUDA, false); ... }    // Float32 in here
///   amp::autocast bf(DeviceType::CUDA, kBFloat16);
class autocast {
 public:
  explicit autocast(DeviceType device_type, bool enabled = true, std::optional<DType> dtype = std::nullopt);
  autocast(DeviceType device_type, DType dtype) : autocast(device_type, true, dtype) {}
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

/// Whether an autocast region is active for `device_type` on this thread.
bool is_autocast_enabled(DeviceType device_type);
/// The lower-precision dtype of `device_type`'s region (its default when none is active:
/// Float16 for CUDA, BFloat16 for CPU).
DType get_autocast_dtype(DeviceType device_type);

/// Entries in this thread's cast cache (Float32 leaf parameters cast to the low dtype).
std::size_t autocast_cache_size();
/// Casts autocast has made on this thread so far (cache hits do not count).
std::int64_t autocast_cast_count();

namespace detail {

/// True when some region is active on this thread and no autocast op is running: the one
/// check every op pays when autocast is off.
bool pending() noexcept;

/// While alive, ops run without autocast (set while an autocast-handled op runs).
class ExcludeGuard {
 public:
  ExcludeGuard() noexcept;

 private:
  ScopedValue<bool> excluded_;
};

/// Collects the op's tensor arguments; non-tensor arguments are skipped.
class Inputs {
 public:
  void add(const Tensor& t) {
    if (t.defined()) tensors_.push_back(&t);
  }
  void add(const TensorList& ts) {
    for (const Tensor& t : ts) add(t);
  }
  template <class T>
  void add(const T&) {}
  /// The dtype this policy casts eligible inputs to, or nullopt when nothing is to be cast.
  std::optional<DType> target(CastPolicy policy) const;

 private:
  SmallVector<const Tensor*, 6> tensors_;
};

/// `t` cast to `dtype` when autocast may touch it (eligible for the active region), else `t`.
Tensor cast(const Tensor& t, DType dtype);
inline TensorList cast(const TensorList& ts, DType dtype) {
  TensorList out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cast(t, dtype));
  return out;
}
template <class T>
const T& cast(const T& arg, DType) {
  return arg;
}

}  // namespace detail

/// Runs `op(args...)` under the policy: when a region is active for the arguments' device,
/// eligible tensor arguments are cast (differentiably) first, and `op` runs with autocast
/// excluded. Otherwise just `op(args...)`.
template <CastPolicy Policy, class Op, class... Args>
auto run(const Op& op, const Args&... args) -> decltype(op(args...)) {
  if (!detail::pending()) return op(args...);
  detail::Inputs inputs;
  (inputs.add(args), ...);
  const std::optional<DType> to = inputs.target(Policy);
  detail::ExcludeGuard inside;
  if (!to) return op(args...);
  return op(detail::cast(args, *to)...);
}

}  // namespace kiln::amp
