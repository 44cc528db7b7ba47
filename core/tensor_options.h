// core/tensor_options.h — the terms you ask for when creating a tensor: dtype, device,
// requires_grad, pinned_memory. Chainable, PyTorch-style:
//
//   auto w = kiln::zeros({3, 4}, kiln::dtype(kiln::kFloat64).requires_grad(true));
//
// An unset dtype means "the natural one" (the default float dtype for factories, the source's
// own type for from_blob/as_tensor). Read next: core/creation.h.
#pragma once

#include <cstddef>
#include <optional>

#include "core/device.h"
#include "core/dtype.h"

namespace kiln {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}     // NOLINT: implicit, zeros({2}, kDouble)
  TensorOptions(Device d) : device_(d) {}   // NOLINT: implicit, zeros({2}, kMeta)
  /// A device string literal: zeros({2}, "meta"). (A template on the array so that a literal
  /// 0 does not convert here as a null pointer.)
  template <std::size_t N>
  TensorOptions(const char (&device)[N]) : device_(Device(device)) {}  // NOLINT: implicit

  TensorOptions dtype(DType t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions dtype(std::optional<DType> t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r) const { auto o = *this; o.requires_grad_ = r; return o; }
  TensorOptions pinned_memory(bool p) const { auto o = *this; o.pinned_ = p; return o; }

  bool has_dtype() const { return dtype_.has_value(); }
  std::optional<DType> dtype_opt() const { return dtype_; }
  /// The dtype asked for, or the default float dtype.
  DType dtype() const { return dtype_.value_or(default_dtype()); }
  DType dtype_or(DType natural) const { return dtype_.value_or(natural); }
  bool has_device() const { return device_.has_value(); }
  Device device() const { return device_.value_or(kCPU); }
  bool requires_grad() const { return requires_grad_; }
  bool pinned_memory() const { return pinned_; }

 private:
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
  bool pinned_ = false;
};

inline TensorOptions dtype(DType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }
inline TensorOptions pinned_memory(bool p = true) { return TensorOptions().pinned_memory(p); }

}  // namespace kiln
