// core/cuda/conv.cu — the data movement behind convolution and pooling on the GPU (see
// Note [Convolution as unfold + GEMM] in core/ops/conv.h): im2col, col2im and max-pool with
// indices. col2im gathers (each input pixel sums the columns that read it) instead of
// scattering with atomics, so it is deterministic.
// Read next: core/cuda/random.cu.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

struct Geometry {
  std::int64_t channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w,
      out_h, out_w;
};

Geometry plain(const Im2ColGeometry& g) {
  return {g.channels, g.height,   g.width,    g.kernel_h,   g.kernel_w,   g.pad_h, g.pad_w,
          g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.out_h, g.out_w};
}

/// One thread per column element: cols[n, (c*kh + i)*kw + j, oy*ow + ox].
template <class T>
__global__ void im2col_kernel(T* cols, std::int64_t image_stride, std::int64_t row_stride, const T* input,
                              std::int64_t batch, Geometry g, T pad) {
  const std::int64_t L = g.out_h * g.out_w, KK = g.kernel_h * g.kernel_w;
  const std::int64_t n_total = batch * g.channels * KK * L;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n_total; p += stride) {
    const std::int64_t l = p % L, row = (p / L) % (g.channels * KK), n = p / (L * g.channels * KK);
    const std::int64_t c = row / KK, ki = (row % KK) / g.kernel_w, kj = row % g.kernel_w;
    const std::int64_t oy = l / g.out_w, ox = l % g.out_w;
    const std::int64_t iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
    const std::int64_t ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
    const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
    cols[n * image_stride + row * row_stride + l] =
        inside ? input[((n * g.channels + c) * g.height + iy) * g.width + ix] : pad;
  }
}

/// One thread per input pixel: adds the sum of every column entry that read it.
template <class T>
__global__ void col2im_kernel(T* out, const T* cols, std::int64_t image_stride, std::int64_t row_stride,
                              std::int64_t batch, Geometry g) {
  using A = DeviceAcc<T>;
  const std::int64_t KK = g.kernel_h * g.kernel_w;
  const std::int64_t n_total = batch * g.channels * g.height * g.width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n_total; p += stride) {
    const std::int64_t x = p % g.width, y = (p / g.width) % g.height, c = (p / (g.width * g.height)) % g.channels,
                       n = p / (g.width * g.height * g.channels);
    A sum = A(0);
    for (std::int64_t ki = 0; ki < g.kernel_h; ++ki) {
      const std::int64_t ty = y + g.pad_h - ki * g.dilation_h;  // = oy * stride_h
      if (ty < 0 || ty % g.stride_h != 0) continue;
      const std::int64_t oy = ty / g.stride_h;
      if (oy >= g.out_h) continue;
      for (std::int64_t kj = 0; kj < g.kernel_w; ++kj) {
        const std::int64_t tx = x + g.pad_w - kj * g.dilation_w;
        if (tx < 0 || tx % g.stride_w != 0) continue;
        const std::int64_t ox = tx / g.stride_w;
        if (ox >= g.out_w) continue;
        const std::int64_t row = c * KK + ki * g.kernel_w + kj;
        sum += convert<A>(cols[n * image_stride + row * row_stride + oy * g.out_w + ox]);
      }
    }
    out[p] = convert<T>(convert<A>(out[p]) + sum);  // out arrives zeroed; += keeps the contract
  }
}

/// One thread per output: the window's first maximum in row-major order, the first NaN
/// winning for good, padding never chosen (the CPU kernel's rule).
template <class T>
__global__ void max_pool2d_kernel(T* values, std::int64_t* indices, const T* input, std::int64_t planes, Geometry g) {
  using M = DeviceOpMath<T>;
  const std::int64_t L = g.out_h * g.out_w, n_total = planes * L;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n_total; p += stride) {
    const std::int64_t plane = p / L, oy = (p % L) / g.out_w, ox = p % g.out_w;
    const T* x = input + plane * g.height * g.width;
    M best = M(0);
    std::int64_t at = -1;
    for (std::int64_t ki = 0; ki < g.kernel_h; ++ki) {
      const std::int64_t iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
      if (iy < 0 || iy >= g.height) continue;
      for (std::int64_t kj = 0; kj < g.kernel_w; ++kj) {
        const std::int64_t ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
        if (ix < 0 || ix >= g.width) continue;
        const M v = convert<M>(x[iy * g.width + ix]);
        if (at < 0 || (!device_is_nan(best) && (v > best || device_is_nan(v)))) {
          best = v;
          at = iy * g.width + ix;
        }
      }
    }
    values[p] = convert<T>(best);
    indices[p] = at;
  }
}

}  // namespace

bool launch_im2col(DType dtype, char* cols, std::int64_t cols_image_stride, std::int64_t cols_row_stride,
                   const char* input, std::int64_t batch, const Im2ColGeometry& g, double pad_value,
                   StreamHandle stream) {
  const std::int64_t n = batch * g.channels * g.kernel_h * g.kernel_w * g.out_h * g.out_w;
  if (n == 0) return true;
  return dispatch<AllTypes>(dtype, [&]<typename T>() {
    im2col_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(cols), cols_image_stride, cols_row_stride, reinterpret_cast<const T*>(input), batch,
        plain(g), convert<T>(pad_value));
    check_launch("im2col_cuda");
  });
}

bool launch_col2im(DType dtype, char* out, const char* cols, std::int64_t cols_image_stride,
                   std::int64_t cols_row_stride, std::int64_t batch, const Im2ColGeometry& g, StreamHandle stream) {
  const std::int64_t n = batch * g.channels * g.height * g.width;
  if (n == 0) return true;
  return dispatch<NumericTypes>(dtype, [&]<typename T>() {
    col2im_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(out), reinterpret_cast<const T*>(cols), cols_image_stride, cols_row_stride, batch,
        plain(g));
    check_launch("col2im_cuda");
  });
}

bool launch_max_pool2d(DType dtype, char* values, std::int64_t* indices, const char* input, std::int64_t planes,
                       const Im2ColGeometry& g, StreamHandle stream) {
  const std::int64_t n = planes * g.out_h * g.out_w;
  if (n == 0) return true;
  return dispatch<NumericTypes>(dtype, [&]<typename T>() {
    max_pool2d_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(values), indices, reinterpret_cast<const T*>(input), planes, plain(g));
    check_launch("max_pool2d_cuda");
  });
}

}  // namespace kiln::cuda
