// core/cpu/loops.h — the one strided, broadcasting loop every CPU elementwise kernel uses.
//
//   cpu_map<float, float, float>([](float a, float b) { return a + b; }, out, {&a, &b});
//
// The loop's geometry is make_loop()'s (core/loop_geometry.h, shared with CUDA's launches): a
// contiguous tensor of any rank becomes one flat loop the compiler vectorises. The innermost
// loop has fast paths for all-contiguous operands and for a broadcast scalar.
// Read next: core/cpu/unary.cpp, core/cpu/binary.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "core/cpu/parallel.h"
#include "core/loop_geometry.h"
#include "core/error.h"
#include "core/tensor.h"

namespace kiln::cpu {

/// Runs inner(pointers, inner_strides, n) over the rows of [begin, end) (linear indices).
template <int N, class Inner>
void loop_range(const Loop<N>& loop, const std::array<char*, N>& base, std::int64_t begin,
                std::int64_t end, const Inner& inner) {
  std::int64_t index[kMaxLoopDims];
  std::int64_t rest = begin;
  for (int d = 0; d < loop.ndim; ++d) {
    index[d] = rest % loop.sizes[d];
    rest /= loop.sizes[d];
  }
  while (begin < end) {
    std::array<char*, N> ptrs = base;
    for (int d = 0; d < loop.ndim; ++d) {
      for (int k = 0; k < N; ++k) ptrs[k] += index[d] * loop.strides[d][k];
    }
    const std::int64_t n = std::min(loop.sizes[0] - index[0], end - begin);
    inner(ptrs, loop.strides[0], n);
    begin += n;
    index[0] += n;
    for (int d = 0; d + 1 < loop.ndim && index[d] == loop.sizes[d]; ++d) {
      index[d] = 0;
      ++index[d + 1];
    }
  }
}

namespace detail {

template <class Out, class... In, class F, std::size_t... I>
void map_row(const F& f, const std::array<char*, sizeof...(In) + 1>& p,
             const std::array<std::int64_t, sizeof...(In) + 1>& s, std::int64_t n,
             std::index_sequence<I...>) {
  constexpr bool kBinary = sizeof...(In) == 2;
  const bool out_contiguous = s[0] == static_cast<std::int64_t>(sizeof(Out));
  if (out_contiguous && ((s[I + 1] == static_cast<std::int64_t>(sizeof(In))) && ...)) {
    Out* __restrict__ o = reinterpret_cast<Out*>(p[0]);
    const std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(std::get<I>(in)[i]...);
    return;
  }
  if constexpr (kBinary) {
    // x * 2.0, x - mean: one operand broadcast as a scalar along the row.
    using A = std::tuple_element_t<0, std::tuple<In...>>;
    using B = std::tuple_element_t<1, std::tuple<In...>>;
    if (out_contiguous && s[1] == static_cast<std::int64_t>(sizeof(A)) && s[2] == 0) {
      Out* __restrict__ o = reinterpret_cast<Out*>(p[0]);
      const A* a = reinterpret_cast<const A*>(p[1]);
      const B b = *reinterpret_cast<const B*>(p[2]);
      for (std::int64_t i = 0; i < n; ++i) o[i] = f(a[i], b);
      return;
    }
    if (out_contiguous && s[1] == 0 && s[2] == static_cast<std::int64_t>(sizeof(B))) {
      Out* __restrict__ o = reinterpret_cast<Out*>(p[0]);
      const A a = *reinterpret_cast<const A*>(p[1]);
      const B* b = reinterpret_cast<const B*>(p[2]);
      for (std::int64_t i = 0; i < n; ++i) o[i] = f(a, b[i]);
      return;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) =
        f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
  }
}

}  // namespace detail

/// out[i] = f(inputs[0][i], inputs[1][i], ...) with broadcasting; `out` may be strided.
/// Out and In... must be the dtypes of the tensors (callers dispatch first).
template <class Out, class... In, class F>
void cpu_map(const F& f, const Tensor& out, const std::array<const Tensor*, sizeof...(In)>& inputs) {
  constexpr int N = sizeof...(In) + 1;
  std::array<const Tensor*, N> operands;
  operands[0] = &out;
  for (std::size_t k = 0; k < sizeof...(In); ++k) operands[k + 1] = inputs[k];
  const Loop<N> loop = make_loop<N>(out.sizes(), operands);
  if (loop.numel == 0) return;
  std::array<char*, N> base;
  for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(operands[k]->raw_data_ptr());
  parallel_for(0, loop.numel, kGrainSize, [&](std::int64_t b, std::int64_t e) {
    loop_range<N>(loop, base, b, e, [&](const std::array<char*, N>& p,
                                         const std::array<std::int64_t, N>& s, std::int64_t n) {
      detail::map_row<Out, In...>(f, p, s, n, std::index_sequence_for<In...>{});
    });
  });
}

}  // namespace kiln::cpu
