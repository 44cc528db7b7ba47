// autograd/functions/copy.cpp — to(), contiguous(), clone() and pin_memory(): the ways to
// get a tensor with different terms. Each says whether it copies: to() and contiguous()
// return the very same tensor when nothing would change (no copy, same handle), unless
// copy=true. Casts are differentiable, so a Float16 activation's gradient reaches a Float32
// parameter in Float32 (the AMP issue relies on this).
// Read next: autograd/functions/inplace.cpp.
#include "autograd/function.h"
#include "core/cuda/cuda.h"
#include "core/ops/allocate.h"
#include "core/ops/copy.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct ToCopyFn : Function<ToCopyFn> {
  static constexpr const char* name = "ToCopyBackward0";
  struct Saved { DType dtype; Device device; };
  static Tensor forward(Context<ToCopyFn>& ctx, const Tensor& x, Device device, DType dtype,
                        bool non_blocking) {
    ctx.saved = {x.dtype(), x.device()};
    Tensor out = ops::empty_output(x.sizes(), dtype, device, "to");
    ops::copy_data(out, x, non_blocking);
    return out;
  }
  // a cast is the identity on values: cast the gradient back to the input's dtype and device
  static TensorList backward(Context<ToCopyFn>& ctx, const TensorList& g) {
    return {g[0].to(ctx.saved.device, ctx.saved.dtype)};
  }
};

struct CloneFn : Function<CloneFn> {
  static constexpr const char* name = "CloneBackward0";
  static Tensor forward(Context<CloneFn>&, const Tensor& x) { return ops::clone(x); }
  // a copy passes its gradient through unchanged
  static TensorList backward(Context<CloneFn>&, const TensorList& g) { return {g[0]}; }
};

Device resolve(Device d) {
  return d.is_cuda() && !d.has_index() ? Device(DeviceType::CUDA, cuda::current_device()) : d;
}

}  // namespace

Tensor Tensor::to(Device device, DType dtype, bool non_blocking, bool copy) const {
  device = resolve(device);
  if (!copy && device == this->device() && dtype == this->dtype()) return *this;
  return ToCopyFn::apply(*this, device, dtype, non_blocking);
}
Tensor Tensor::to(DType dtype, bool copy) const { return to(device(), dtype, false, copy); }
Tensor Tensor::to(Device device, bool non_blocking, bool copy) const {
  return to(device, dtype(), non_blocking, copy);
}
Tensor Tensor::to(const TensorOptions& options, bool non_blocking, bool copy) const {
  KILN_CHECK(!options.requires_grad(), "to(options): options.requires_grad(true) is not a "
             "conversion; create a leaf with as_leaf(true) or a factory instead");
  Tensor out = to(options.has_device() ? options.device() : device(), options.dtype_or(dtype()),
                  non_blocking, copy);
  return options.pinned_memory() ? out.pin_memory() : out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : CloneFn::apply(*this); }
Tensor Tensor::clone() const { return CloneFn::apply(*this); }

Tensor Tensor::pin_memory() const {
  KILN_CHECK(is_cpu(), "cannot pin '", device(), "' memory: only dense CPU tensors can be pinned");
  if (is_pinned()) return *this;
  KILN_CHECK(!requires_grad(), "pin_memory(): pin the data before creating tensors that require "
             "grad from it (pinning copies the bytes into page-locked memory)");
  auto storage = Storage::allocate(nbytes(), kCPU, true, {MemoryOrigin::Copied, "pin_memory", {}});
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), sizes().vec(),
                                          contiguous_strides(sizes()), 0, dtype(), AutogradTerms{},
                                          Provenance{TensorOrigin::OpOutput, "pin_memory", {}}));
  ops::copy_data(out, *this);
  return out;
}

}  // namespace kiln
