// core/cuda/host_kernels.cpp — the host side of every CUDA kernel: turning Tensors into the
// plain launch structs of core/cuda/launch.h (broadcast strides, merged dimensions, contiguous
// copies where a kernel needs them) and launching on the current stream of the tensors'
// device. The registration list that files them into the table is core/cuda/register.cpp.
// Read next: core/cuda/elementwise.cu.
#include <algorithm>
#include <array>
#include <string>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/elementwise_launch.h"
#include "core/cuda/launch.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace kiln::cuda {

namespace {

/// Raises PyTorch's "\"exp_cuda\" not implemented for 'Long'" when a launcher had no kernel
/// for the dtype.
void require(bool launched, const std::string& op, DType dtype) {
  KILN_CHECK_NOT_IMPLEMENTED(launched, "\"", op, "_cuda\" not implemented for '", scalar_type_name(dtype), "'");
}

/// Sets the tensors' device current for the launch and names its current stream.
class OnDevice {
 public:
  explicit OnDevice(const Tensor& t) : guard_(device_of(t)), stream_(current_cuda_stream(device_of(t))) {}
  StreamHandle stream() const { return stream_; }

 private:
  DeviceGuard guard_;
  StreamHandle stream_;
};

template <UnaryOp Op>
void unary(const Tensor& out, const Tensor& in) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  require(launch_unary(Op, elementwise_launch<2>({&out, &in}), on.stream()), op_name(Op), in.dtype());
}

template <BinaryOp Op>
void binary(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  require(launch_binary(Op, elementwise_launch<3>({&out, &a, &b}), on.stream()), op_name(Op), a.dtype());
}

template <std::size_t... I>
std::array<UnaryKernel, sizeof...(I)> unary_table(std::index_sequence<I...>) {
  return {&unary<static_cast<UnaryOp>(I)>...};
}
template <std::size_t... I>
std::array<BinaryKernel, sizeof...(I)> binary_table(std::index_sequence<I...>) {
  return {&binary<static_cast<BinaryOp>(I)>...};
}

/// Appends a dim to one side of a Reduction (its sizes, and one stride array per tensor that
/// walks it), merged into the side's last dim when that one steps over it exactly in every
/// array: a contiguous tensor's full sum walks one dim, and the kernels divide less per element.
template <std::size_t N>
void append_dim(std::int64_t* sizes, const std::array<std::int64_t*, N>& strides, int& count, std::int64_t size,
                const std::array<std::int64_t, N>& steps, const char* kind) {
  bool merges = count > 0;
  for (std::size_t k = 0; k < N && merges; ++k) merges = strides[k][count - 1] == size * steps[k];
  const int at = merges ? count - 1 : count;
  if (merges) {
    sizes[at] *= size;
  } else {
    KILN_CHECK(count < kMaxDims, "CUDA reductions support at most ", kMaxDims, " ", kind, " dims");
    sizes[at] = size;
    ++count;
  }
  for (std::size_t k = 0; k < N; ++k) strides[k][at] = steps[k];
}

template <ReduceOp Op>
void reduce(const Tensor& out, const Tensor& in, IntArrayRef dims, double divisor) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  Reduction r{};
  r.divisor = divisor;
  r.out = static_cast<char*>(out.raw_data_ptr());
  r.in = static_cast<const char*>(in.numel() == 0 ? nullptr : in.raw_data_ptr());
  r.outputs = out.numel();
  r.inner = 1;
  for (std::int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    const std::int64_t size = in.sizes()[d], stride = in.strides()[d];
    if (size == 1) continue;
    if (reduced) {
      append_dim<1>(r.inner_sizes, {r.inner_strides}, r.inner_dims, size, {stride}, "reduced");
      r.inner *= size;
    } else {
      append_dim<2>(r.outer_sizes, {r.outer_in_strides, r.outer_out_strides}, r.outer_dims, size,
                    {stride, out.strides()[d]}, "kept");
    }
  }
  if (in.numel() == 0) r.inner = 0;  // identity everywhere
  r.parts = reduction_parts(r.outputs, r.inner);
  Tensor partials;  // freed here, reused only after the stream has run the kernels reading it
  if (r.parts > 1) {
    partials = ops::empty_output({r.outputs * r.parts * 8}, DType::UInt8, out.device(), "reduction partials");
    r.partials = partials.raw_data_ptr();
  }
  require(launch_reduce(Op, in.dtype(), r, on.stream()), "reduce", in.dtype());
}

/// A contiguous tensor to compute into: `t` itself, or a scratch copy written back by
/// finish() (for outputs the front-end handed over with another layout).
class DenseOut {
 public:
  explicit DenseOut(const Tensor& t, bool copy_in) : target_(t) {
    dense_ = t.is_contiguous() ? t : (copy_in ? ops::contiguous(t) : ops::empty_output(t.sizes(), t.dtype(), t.device(), "cuda"));
  }
  char* data() const { return static_cast<char*>(dense_.numel() == 0 ? nullptr : dense_.raw_data_ptr()); }
  const Tensor& tensor() const { return dense_; }
  void finish() const {
    if (!dense_.is_same(target_)) copy_kernel(target_, dense_);
  }

 private:
  Tensor target_, dense_;
};

const char* cdata(const Tensor& t) { return static_cast<const char*>(t.numel() == 0 ? nullptr : t.raw_data_ptr()); }
const std::int64_t* idata(const Tensor& t) {
  return static_cast<const std::int64_t*>(t.numel() == 0 ? nullptr : t.raw_data_ptr());
}

/// `t` narrowed to index's sizes in every dim but `dim` (gather/scatter may use a smaller
/// index than self).
Tensor narrowed_to(const Tensor& t, const Tensor& index, std::int64_t dim) {
  Tensor view = t;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    if (d != dim && index.sizes()[d] != t.sizes()[d]) view = ops::narrow(view, d, 0, index.sizes()[d]);
  }
  return view;
}

}  // namespace

std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary_kernels() {
  return unary_table(std::make_index_sequence<static_cast<std::size_t>(UnaryOp::kCount)>{});
}

std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary_kernels() {
  return binary_table(std::make_index_sequence<static_cast<std::size_t>(BinaryOp::kCount)>{});
}

std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce_kernels() {
  return exactly_one_per<ReduceKernel, ReduceOp>(&reduce<ReduceOp::Sum>, &reduce<ReduceOp::Prod>, &reduce<ReduceOp::Amax>,
                                                 &reduce<ReduceOp::Amin>);
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  require(launch_where(elementwise_launch<4>({&out, &cond, &a, &b}), on.stream()), "where", out.dtype());
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  OnDevice on(dst);
  require(launch_copy(elementwise_launch<2>({&dst, &src}), on.stream()), "copy", src.dtype());
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  if (dst.numel() == 0) return;
  OnDevice on(dst);
  require(launch_fill(elementwise_launch<1>({&dst}), value.to_double(), value.to_int(), on.stream()), "fill", dst.dtype());
}

void arange_kernel(const Tensor& out, const Scalar& start, const Scalar& step) {
  OnDevice on(out);
  require(launch_arange(static_cast<char*>(out.numel() == 0 ? nullptr : out.raw_data_ptr()), out.dtype(), out.numel(),
                        start.to_double(), step.to_double(), on.stream()),
          "arange", out.dtype());
}

void arg_reduce_kernel(const Tensor& values, const Tensor& indices, const Tensor& in, std::int64_t dim, bool is_max) {
  if (values.numel() == 0) return;
  OnDevice on(values);
  const Tensor dense = ops::contiguous(in);
  DenseOut v(values, false), i(indices, false);
  const DimSplit a = split_at_dim(dense.sizes(), dim);
  require(launch_arg_reduce(in.dtype(), v.data(), reinterpret_cast<std::int64_t*>(i.data()), cdata(dense), a.outer,
                            a.size, a.inner, is_max, on.stream()),
          is_max ? "argmax" : "argmin", in.dtype());
  v.finish();
  i.finish();
}

void cat_kernel(const Tensor& out, const TensorList& inputs, std::int64_t dim) {
  std::int64_t offset = 0;
  for (const Tensor& t : inputs) {
    if (t.numel() == 0 && t.dim() == 1) continue;  // legacy empty inputs, skipped as in PyTorch
    const std::int64_t n = t.sizes()[dim];
    copy_kernel(ops::narrow(out, dim, offset, n), t);
    offset += n;
  }
}

void index_select_kernel(const Tensor& out, const Tensor& in, std::int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor dense = ops::contiguous(in), idx = ops::contiguous(index);
  DenseOut o(out, false);
  const DimSplit a = split_at_dim(dense.sizes(), dim);
  require(launch_index_select(out.dtype(), o.data(), cdata(dense), idata(idx), a.outer, a.size, idx.numel(), a.inner,
                              on.stream()),
          "index_select", out.dtype());
  o.finish();
}

void index_add_kernel(const Tensor& out, std::int64_t dim, const Tensor& index, const Tensor& source) {
  if (source.numel() == 0) return;
  OnDevice on(out);
  const Tensor src = ops::contiguous(source), idx = ops::contiguous(index);
  DenseOut o(out, true);
  const DimSplit a = split_at_dim(o.tensor().sizes(), dim);
  require(launch_index_add(out.dtype(), o.data(), cdata(src), idata(idx), a.outer, a.size, idx.numel(), a.inner,
                           on.stream()),
          "index_add", out.dtype());
  o.finish();
}

void gather_kernel(const Tensor& out, const Tensor& in, std::int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  const Tensor dense = ops::contiguous(narrowed_to(in, index, dim)), idx = ops::contiguous(index);
  DenseOut o(out, false);
  const DimSplit a = split_at_dim(idx.sizes(), dim);
  require(launch_gather(out.dtype(), o.data(), cdata(dense), idata(idx), a.outer, dense.sizes()[dim], a.size, a.inner,
                        on.stream()),
          "gather", out.dtype());
  o.finish();
}

void scatter_kernel(const Tensor& out, std::int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  if (index.numel() == 0) return;
  OnDevice on(out);
  const Tensor idx = ops::contiguous(index), source = ops::contiguous(narrowed_to(src, index, dim));
  DenseOut o(narrowed_to(out, index, dim), true);
  const DimSplit a = split_at_dim(idx.sizes(), dim);
  require(launch_scatter(out.dtype(), o.data(), cdata(source), idata(idx), a.outer, o.tensor().sizes()[dim], a.size,
                         a.inner, accumulate, on.stream()),
          accumulate ? "scatter_add" : "scatter", out.dtype());
  o.finish();
}

void im2col_kernel(const Tensor& cols, const Tensor& input, const Im2ColGeometry& g, double pad_value) {
  if (cols.numel() == 0) return;
  OnDevice on(cols);
  const Tensor dense = ops::contiguous(input);
  require(launch_im2col(cols.dtype(), static_cast<char*>(cols.raw_data_ptr()), cols.strides()[0], cols.strides()[1],
                        cdata(dense), dense.sizes()[0], g, pad_value, on.stream()),
          "im2col", cols.dtype());
}

void col2im_kernel(const Tensor& out, const Tensor& cols, const Im2ColGeometry& g) {
  if (out.numel() == 0) return;
  OnDevice on(out);
  KILN_CHECK(cols.strides()[2] == 1, "col2im: columns need a unit innermost stride");
  DenseOut o(out, true);
  require(launch_col2im(out.dtype(), o.data(), cdata(cols), cols.strides()[0], cols.strides()[1], out.sizes()[0], g,
                        on.stream()),
          "col2im", out.dtype());
  o.finish();
}

void max_pool2d_kernel(const Tensor& values, const Tensor& indices, const Tensor& input, const Im2ColGeometry& g) {
  if (values.numel() == 0) return;
  OnDevice on(values);
  const Tensor dense = ops::contiguous(input);
  DenseOut v(values, false), i(indices, false);
  require(launch_max_pool2d(input.dtype(), v.data(), reinterpret_cast<std::int64_t*>(i.data()), cdata(dense),
                            dense.sizes()[0] * dense.sizes()[1], g, on.stream()),
          "max_pool2d", input.dtype());
  v.finish();
  i.finish();
}

void random_kernel(const Tensor& self, RandomKind kind, double a, double b) {
  if (self.numel() == 0) return;
  OnDevice on(self);
  DenseOut o(self, false);
  const auto [seed, offset] = philox_seed_and_offset(static_cast<std::uint64_t>((self.numel() + 3) / 4));
  require(launch_random(self.dtype(), o.data(), self.numel(), kind, a, b, seed, offset, on.stream()), "random",
          self.dtype());
  o.finish();
}

void adam_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
          const Tensor& max_exp_avg_sq, const AdamStep& step) {
  OnDevice on(param);
  if (param.numel() == 0) return;
  require(launch_adam(param.dtype(), static_cast<char*>(param.raw_data_ptr()), cdata(grad),
                      static_cast<char*>(exp_avg.raw_data_ptr()), static_cast<char*>(exp_avg_sq.raw_data_ptr()),
                      step.amsgrad ? static_cast<char*>(max_exp_avg_sq.raw_data_ptr()) : nullptr, param.numel(), step,
                      on.stream()),
          "adam", param.dtype());
}

void lstm_cell_forward_kernel(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                       const Tensor& projected, const Tensor& c_prev) {
  OnDevice on(h);
  require(launch_lstm_cell_forward(h.dtype(), static_cast<char*>(gates.raw_data_ptr()), static_cast<char*>(c.raw_data_ptr()),
                                   static_cast<char*>(h.raw_data_ptr()), cdata(recurrent), cdata(projected), cdata(c_prev),
                                   h.sizes()[0], h.sizes()[1], on.stream()),
          "lstm_cell", h.dtype());
}

void lstm_cell_backward_kernel(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h, const Tensor& grad_output,
                        const Tensor& gates, const Tensor& c, const Tensor& c_prev) {
  OnDevice on(c);
  require(launch_lstm_cell_backward(c.dtype(), static_cast<char*>(grad_gates.raw_data_ptr()),
                                    static_cast<char*>(grad_c.raw_data_ptr()), cdata(grad_h),
                                    grad_output.defined() ? cdata(grad_output) : nullptr, cdata(gates), cdata(c),
                                    cdata(c_prev), c.sizes()[0], c.sizes()[1], on.stream()),
          "lstm_cell_backward", c.dtype());
}

void unscale_kernel(const Tensor& grad, double inv_scale, const Tensor& found_inf) {
  OnDevice on(grad);
  if (grad.numel() == 0) return;
  require(launch_unscale_and_check(grad.dtype(), static_cast<char*>(grad.raw_data_ptr()), grad.numel(),
                                   static_cast<float>(inv_scale), static_cast<float*>(found_inf.raw_data_ptr()),
                                   on.stream()),
          "_amp_foreach_non_finite_check_and_unscale", grad.dtype());
}

}  // namespace kiln::cuda
