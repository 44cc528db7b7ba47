// core/tensor.h — Tensor: the cheap, shared handle users hold. Copying a Tensor copies a
// pointer; two handles to one TensorImpl are the same tensor. The accessors below are defined
// in core/; the ops (arithmetic, views, backward) are declared here so that `x.add(y)` reads
// like PyTorch, but are defined by the autograd layer, which records their history.
// See Note [Layering].
// Read next: core/creation.h (how tensors are made), autograd/function.h (how ops record).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <source_location>
#include <string>
#include <tuple>
#include <vector>

#include "core/array_ref.h"
#include "core/capture_hooks.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "core/tensor_options.h"

namespace kiln {

// Note [Layering]
// ~~~~~~~~~~~~~~~
// Kiln is built in layers, and a layer uses only the layers below it. Each is an object
// library of its own (kiln_core, kiln_autograd, ...; CMakeLists.txt) that is also linked, with
// the layers below it and nothing else, into a check program, so a call that climbs a layer is
// an undefined symbol and the build fails; tests/api/test_layering.cpp holds every #include to
// the same table, which it reads from the build:
//
//   layer        uses
//   checkpoint   amp data optim nn autograd core
//   memory       optim nn autograd core
//   amp          optim nn autograd core     (GradScaler steps an optimizer)
//   onnx         compile nn autograd core
//   distributed  nn autograd core           (DistributedDataParallel is a Module)
//   optim        nn autograd core           (nn::current follows a moved parameter)
//   compile      autograd core
//   data         autograd core
//   nn           autograd core
//   profiler     core
//   autograd     core                       (autocast is a stage of its op pipeline)
//   core                                    (grad mode and StateDict are here: all above use them)
//
// A layer not listed is not used, though it sits lower (data knows nothing of nn, compile
// nothing of optim). Inside core, two seams keep PyTorch's method syntax while core never
// calls autograd:
//   1. TensorImpl holds its grad_fn as a pointer to a forward-declared autograd::Node; core
//      never calls into it.
//   2. Tensor's op methods (x.add(y), x.backward()) are declared here and defined in
//      autograd/, which is the layer that knows how to record them. core/ never calls them:
//      raw ops in core/ops take and return Tensors but only use the accessors defined here.
// Layers above reach back down only through hooks core declares and they install: the capture
// (core/capture_hooks.h) and the profiler (core/profiler_hooks.h). The CUDA backend is reached
// only through core/cuda/cuda.h, whose stub stands in when nvcc is absent, so no file outside
// core/cuda needs #ifdef.

class Tensor;
struct ValuesIndices;
namespace indexing {
class TensorIndex;
}  // namespace indexing
using TensorList = std::vector<Tensor>;
/// A gradient hook: receives the gradient flowing into a tensor; may return a replacement
/// (or an undefined Tensor to keep it).
using GradHook = std::function<Tensor(const Tensor&)>;
/// Runs after backward accumulated a leaf's gradient into its .grad; receives the leaf.
using PostAccumulateGradHook = std::function<void(const Tensor&)>;

/// Returned by register_hook; remove() detaches the hook.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  void remove() {
    if (remover_) std::exchange(remover_, nullptr)();
  }

 private:
  std::function<void()> remover_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // --- terms (fixed at creation) -------------------------------------------------------
  IntArrayRef sizes() const { return checked().sizes(); }
  std::int64_t size(std::int64_t dim) const;
  IntArrayRef strides() const { return checked().strides(); }
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return checked().dim(); }
  std::int64_t numel() const { return checked().numel(); }
  std::int64_t storage_offset() const { return checked().storage_offset(); }
  DType dtype() const { return checked().dtype(); }
  DType scalar_type() const { return dtype(); }
  Device device() const { return checked().device(); }
  bool is_contiguous() const { return checked().is_contiguous(); }
  bool is_floating_point() const { return kiln::is_floating_point(dtype()); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  bool is_pinned() const { return checked().storage()->is_pinned(); }
  std::size_t element_size() const { return itemsize(dtype()); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  TensorOptions options() const;

  bool requires_grad() const { return checked().requires_grad(); }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return checked().grad_fn(); }
  std::uint32_t output_nr() const { return checked().output_nr(); }
  bool is_leaf() const { return checked().is_leaf(); }

  /// How this tensor and its memory were made. See Note [Provenance].
  const Provenance& provenance() const { return checked().provenance(); }
  /// One line for messages: "created by from_blob at loader.cpp:42 (zero-copy: ...)".
  std::string describe() const;
  /// True when the two tensors' elements may overlap in memory.
  bool shares_memory(const Tensor& other) const;
  /// Times the bytes under this tensor were modified in place. See Note [Version counters].
  std::uint32_t _version() const { return checked().storage()->version(); }

  // --- data access ------------------------------------------------------------------------
  /// Typed pointer to the first element. Asking for a type that is not the tensor's dtype
  /// throws (no silent reinterpretation), naming both types.
  /// (A step being captured hears of each access made outside a kernel: core/capture_hooks.h.)
  template <class T>
  T* data_ptr(std::source_location where = std::source_location::current()) const {
    check_data_access(dtype_v<T>);
    if (capture::observer()) capture::host_access(*this, "data_ptr", where);
    return static_cast<T*>(checked().data());
  }
  void* raw_data_ptr(std::source_location where = std::source_location::current()) const {
    if (capture::observer()) capture::host_access(*this, "raw_data_ptr", where);
    return checked().data();
  }
  /// The single value of a one-element tensor, converted to T.
  template <class T>
  T item(std::source_location where = std::source_location::current()) const {
    return item(where).to<T>();
  }
  Scalar item(std::source_location where = std::source_location::current()) const;

  // --- autograd (defined in autograd/) ------------------------------------------------------
  /// The accumulated gradient (undefined until a backward reaches this tensor).
  const Tensor& grad() const;
  /// The gradient slot itself, for optimizers and zero_grad (`x.mutable_grad() = {}`).
  Tensor& mutable_grad() const;
  /// Backpropagates from this tensor. A non-scalar tensor needs `gradient`.
  /// `retain_graph` defaults to `create_graph`, as in PyTorch.
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// Keeps `.grad` for this non-leaf tensor after backward.
  void retain_grad() const;
  bool retains_grad() const;
  /// Calls `hook` with the gradient flowing into this tensor; a defined return value
  /// replaces the gradient.
  HookHandle register_hook(GradHook hook) const;
  /// Calls `hook` with this leaf each time backward has accumulated into its .grad (torch's
  /// register_post_accumulate_grad_hook). DistributedDataParallel starts its bucket
  /// all-reduces from here, while the rest of backward still runs.
  HookHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  /// Same memory and version counter, no history, requires_grad false.
  Tensor detach() const;
  /// A new leaf over the same memory, with the requires_grad you give: the zero-copy way to
  /// sign a new contract (PyTorch's `x.detach().requires_grad_()`).
  Tensor as_leaf(bool requires_grad = true) const;
  /// PyTorch's requires_grad_: changes a *leaf's* flag in place, seen by every handle to it
  /// (freezing: `for (auto& p : model.parameters()) p.requires_grad_(false);`). An op's output
  /// keeps its history: requires_grad_(false) on it is refused, as in PyTorch; detach() it.
  /// See Note [The creation contract].
  const Tensor& requires_grad_(bool requires_grad = true) const;

  // --- conversions (copy only when a term changes) ------------------------------------------
  Tensor to(DType dtype, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(const TensorOptions& options, bool non_blocking = false, bool copy = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda() const { return to(kCUDA); }
  /// to(kFloat16) and to(kBFloat16), as LibTorch spells them (`double()` and `long()` are C++
  /// keywords there too: write to(kFloat64), to(kInt64)).
  Tensor half() const { return to(kFloat16); }
  Tensor bfloat16() const { return to(kBFloat16); }
  /// Returns this tensor when already contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A copy with new memory (differentiable: gradient passes through unchanged).
  Tensor clone() const;
  /// A copy in page-locked memory (needs CUDA).
  Tensor pin_memory() const;

  // --- elementwise (broadcasting, PyTorch type promotion) -----------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor gelu() const;
  Tensor erf() const;
  Tensor square() const;
  Tensor reciprocal() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  /// self where `condition`, else `other` (torch.where(condition, self, other)).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor where(const Tensor& condition, const Scalar& other) const;
  /// Elementwise |self - other| <= atol + rtol * |other|, and whether all are (kiln::isclose;
  /// NaN is close to NaN only with `equal_nan`).
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  /// Same shape and every element equal (kiln::equal).
  bool equal(const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;

  // --- reductions ---------------------------------------------------------------------------
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false,
             std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dims, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  /// Over one dim (prod(1)) or several (prod({0, 1})), like every reduction here.
  Tensor prod(IntArrayRef dims, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt) const;
  /// Largest element (gradient split evenly between ties, like amax).
  Tensor max() const;
  Tensor min() const;
  /// .values and .indices along `dim`; gradient flows to the returned index.
  ///   auto [values, indices] = x.max(1);    // or x.max(1).values
  ValuesIndices max(std::int64_t dim, bool keepdim = false) const;
  ValuesIndices min(std::int64_t dim, bool keepdim = false) const;
  /// Sorted along `dim` (NaN counts as the largest value, as in PyTorch; equal values keep their
  /// order). Differentiable: values are gathered from the input at the indices.
  ValuesIndices sort(std::int64_t dim = -1, bool descending = false) const;
  /// The k largest (or smallest) along `dim`, sorted.
  ValuesIndices topk(std::int64_t k, std::int64_t dim = -1, bool largest = true, bool sorted = true) const;
  /// The k-th smallest (1-based) along `dim`.
  ValuesIndices kthvalue(std::int64_t k, std::int64_t dim = -1, bool keepdim = false) const;
  /// The most frequent value along `dim` (the smallest among ties) and its last index.
  ValuesIndices mode(std::int64_t dim = -1, bool keepdim = false) const;
  /// Reductions over a list of dims treat an empty list as "all dims", as PyTorch does.
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// Whether every (any) element is nonzero, over all elements or along `dim`: a Bool tensor.
  Tensor all() const;
  Tensor all(std::int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(std::int64_t dim, bool keepdim = false) const;
  Tensor argmin(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// Variance over `dims` (all when empty); `unbiased` divides by N - 1 (Bessel's correction).
  Tensor var(IntArrayRef dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(IntArrayRef dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2) const;
  Tensor norm(const Scalar& p, IntArrayRef dims, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor softmax(std::int64_t dim) const;
  Tensor log_softmax(std::int64_t dim) const;

  // --- linear algebra ------------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
               const Scalar& alpha = 1) const;

  // --- views (share storage and version counter) ---------------------------------------------
  Tensor view(IntArrayRef sizes) const;
  Tensor reshape(IntArrayRef sizes) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;
  Tensor permute(IntArrayRef dims) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor expand(IntArrayRef sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  /// Python's x[start:end:step] along `dim` (negative and out-of-range bounds clamp).
  Tensor slice(std::int64_t dim = 0, std::optional<std::int64_t> start = std::nullopt,
               std::optional<std::int64_t> end = std::nullopt, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor operator[](std::int64_t index) const { return select(0, index); }
  /// Python's x[...]: x.index({Slice(), 0}) is x[:, 0]; see core/tensor_index.h.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor unflatten(std::int64_t dim, IntArrayRef sizes) const;
  TensorList split(std::int64_t split_size, std::int64_t dim = 0) const;
  TensorList split_with_sizes(IntArrayRef split_sizes, std::int64_t dim = 0) const;
  /// `split({2, 3}, 1)`: pieces of the given sizes (split_with_sizes), as LibTorch's overload.
  /// A lone size (`split(2)`) still means pieces of that size.
  TensorList split(IntArrayRef split_sizes, std::int64_t dim = 0) const {
    return split_with_sizes(split_sizes, dim);
  }
  TensorList chunk(std::int64_t chunks, std::int64_t dim = 0) const;
  TensorList unbind(std::int64_t dim = 0) const;
  Tensor diagonal(std::int64_t offset = 0, std::int64_t dim1 = 0, std::int64_t dim2 = 1) const;
  /// The upper (lower) triangle of the last two dims, the rest zero (kiln::triu, kiln::tril).
  Tensor triu(std::int64_t diagonal = 0) const;
  Tensor tril(std::int64_t diagonal = 0) const;

  // --- indexing (new memory) ------------------------------------------------------------------
  Tensor index_select(std::int64_t dim, const Tensor& index) const;
  Tensor index_add(std::int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor gather(std::int64_t dim, const Tensor& index) const;
  Tensor scatter(std::int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(std::int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor scatter_add(std::int64_t dim, const Tensor& index, const Tensor& src) const;
  /// The elements where `mask` (Bool, broadcast with self) is true, as a 1-D tensor; its
  /// gradient flows back to those positions.
  Tensor masked_select(const Tensor& mask) const;
  /// Int64 [count, dim()]: the positions of the nonzero elements (ops::nonzero).
  Tensor nonzero(std::source_location where = std::source_location::current()) const;

  // --- in-place (refused on tensors that require grad while grad mode is on) ------------------
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  /// Copies `src` (broadcast, converted to this dtype, possibly from another device).
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor& uniform_(double from = 0.0, double to = 1.0);
  Tensor& normal_(double mean = 0.0, double std = 1.0);
  // The const overloads let a temporary or a const handle be updated, as in PyTorch, where
  // in-place ops mutate the shared TensorImpl, not the handle.
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& mul_(const Scalar& other) const;
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  const Tensor& fill_(const Scalar& value) const;
  const Tensor& zero_() const;

 private:
  const TensorImpl& checked() const {
    KILN_CHECK(impl_ != nullptr, msg::undefined_tensor());
    return *impl_;
  }
  void check_data_access(DType requested) const;

  std::shared_ptr<TensorImpl> impl_;
};

// --- free functions mirroring the methods (defined in autograd/) ------------------------------
Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other);
Tensor where(const Tensor& condition, const Scalar& input, const Tensor& other);
Tensor where(const Tensor& condition, const Tensor& input, const Scalar& other);
Tensor cat(const TensorList& tensors, std::int64_t dim = 0);
Tensor stack(const TensorList& tensors, std::int64_t dim = 0);

// --- operators ------------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
/// On Bool tensors: logical and / or / xor / not (PyTorch's bitwise ops on bool).
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

/// What max/min/sort/topk/kthvalue/mode along a dim return (PyTorch's torch.return_types): use
/// .values and .indices, or structured bindings (auto [values, indices] = x.max(1)).
struct ValuesIndices {
  Tensor values;
  Tensor indices;
  /// LibTorch returns a std::tuple; code written for it can take one from here.
  operator std::tuple<Tensor, Tensor>() const { return {values, indices}; }  // NOLINT: implicit
};

/// Prints like PyTorch: `tensor([[1., 2.],\n        [3., 4.]], dtype=kiln.float64)`. Defined by
/// autograd, which names the grad_fn (autograd/tensor_print.cpp; core/print.h has the rest).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
/// The same text as a string.
std::string to_string(const Tensor& t);

}  // namespace kiln

#include "core/tensor_index.h"  // Tensor::index's argument type, which holds a Tensor
