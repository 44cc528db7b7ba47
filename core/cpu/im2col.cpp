// core/cpu/im2col.cpp — im2col and col2im on the CPU: the data movement that turns a
// convolution into one matrix multiply (see Note [Convolution as unfold + GEMM] in
// core/ops/conv.h). Each (image, channel) plane is independent, so planes are split
// across threads.
// Read next: core/cpu/random.cpp.
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"

namespace kiln::cpu {

// input [N, C, H, W] is contiguous; cols [N, C*kh*kw, oh*ow] may be any view with a unit
// innermost stride (conv2d writes a [C*kh*kw, N, L] buffer through a permuted view, so that
// the whole batch becomes one GEMM).
void im2col_kernel(const Tensor& cols, const Tensor& input, const Im2ColGeometry& g,
                   double pad_value) {
  dispatch_dtype<AllTypes>(input.dtype(), "im2col_cpu", [&]<typename T>() {
    const std::int64_t N = input.sizes()[0], C = g.channels, H = g.height, W = g.width;
    const std::int64_t L = g.out_h * g.out_w, KK = g.kernel_h * g.kernel_w;
    const T* x = input.data_ptr<T>();
    T* c = cols.data_ptr<T>();
    const std::int64_t s_image = cols.strides()[0], s_row = cols.strides()[1];
    const T pad = convert<T>(pad_value);
    parallel_for(0, N * C, std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(KK * L, 1)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t nc = b; nc < e; ++nc) {
        const T* plane = x + nc * H * W;
        // rows (c*kh + ki)*kw + kj of image n
        T* rows = c + (nc / C) * s_image + (nc % C) * KK * s_row;
        for (std::int64_t ki = 0; ki < g.kernel_h; ++ki) {
          for (std::int64_t kj = 0; kj < g.kernel_w; ++kj) {
            T* row = rows + (ki * g.kernel_w + kj) * s_row;
            for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
              const std::int64_t iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
              T* dst = row + oy * g.out_w;
              if (iy < 0 || iy >= H) {
                for (std::int64_t ox = 0; ox < g.out_w; ++ox) dst[ox] = pad;
                continue;
              }
              const T* src = plane + iy * W;
              for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
                const std::int64_t ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
                dst[ox] = (ix >= 0 && ix < W) ? src[ix] : pad;
              }
            }
          }
        }
      }
    });
  });
}

// out [N, C, H, W] (zeroed, contiguous) += the windows of cols [N, C*kh*kw, oh*ow] (any view
// with a unit innermost stride, as for im2col).
void col2im_kernel(const Tensor& out, const Tensor& cols, const Im2ColGeometry& g) {
  dispatch_dtype<NumericTypes>(out.dtype(), "col2im_cpu", [&]<typename T>() {
    using M = OpMath<T>;
    const std::int64_t N = out.sizes()[0], C = g.channels, H = g.height, W = g.width;
    const std::int64_t L = g.out_h * g.out_w, KK = g.kernel_h * g.kernel_w;
    T* x = out.data_ptr<T>();
    const T* c = cols.data_ptr<T>();
    const std::int64_t s_image = cols.strides()[0], s_row = cols.strides()[1];
    parallel_for(0, N * C, std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(KK * L, 1)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t nc = b; nc < e; ++nc) {
        T* plane = x + nc * H * W;
        const T* rows = c + (nc / C) * s_image + (nc % C) * KK * s_row;
        for (std::int64_t ki = 0; ki < g.kernel_h; ++ki) {
          for (std::int64_t kj = 0; kj < g.kernel_w; ++kj) {
            const T* row = rows + (ki * g.kernel_w + kj) * s_row;
            for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
              const std::int64_t iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
              if (iy < 0 || iy >= H) continue;
              T* dst = plane + iy * W;
              const T* src = row + oy * g.out_w;
              for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
                const std::int64_t ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
                if (ix >= 0 && ix < W) dst[ix] = static_cast<T>(static_cast<M>(dst[ix]) + static_cast<M>(src[ox]));
              }
            }
          }
        }
      }
    });
  });
}

}  // namespace kiln::cpu
