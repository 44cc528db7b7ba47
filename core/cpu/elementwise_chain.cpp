// core/cpu/elementwise_chain.cpp — elementwise_chain_kernel (see core/cpu/elementwise_chain.h).
// The loop is cpu_map's (make_loop's geometry, loop_range's rows, the same grain per thread);
// each row is cut into blocks of kBlock elements, and the links run over a block one after
// another, each a short loop the compiler vectorises, so a block's values stay in L1 between
// links. Each link is a separate loop over memory, not one expression, so no multiply and add
// of two links contract into one FMA: every link rounds as its own kernel does.
//
// Note [A chain's block]
// ~~~~~~~~~~~~~~~~~~~~~~
// Where the first input is contiguous the first link reads it in place, and where the output
// is contiguous the last link writes it in place; the block in between holds only what the
// links pass along. Copying the first input into the block and the block out to the output
// element by element, through a byte stride known only at run time, was one scalar load and
// store per element and made a chain ten times slower than one binary op over the same
// tensors: attention's scale and mask on [64, 64, 64] took 153 µs, where a mul takes 14.
// Strided first inputs and outputs (a transposed view) still go through the block.
// Read next: compile/passes/fuse_elementwise_chains.cpp (which chains it is given).
#include "core/cpu/elementwise_chain.h"

#include <algorithm>
#include <array>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/kernels.h"

namespace kiln::cpu {

namespace {

constexpr std::int64_t kBlock = 256;

/// One link over a block: `to[i]` becomes op(from[i]) or op(from[i], input[i]) or
/// op(input[i], from[i]) for n elements, the input's elements `stride` bytes apart (0: one
/// broadcast element). `from` and `to` are the block, or the first link reads the first input
/// and the last writes the output where they are contiguous.
template <class T>
using LinkFn = void (*)(T* to, const T* from, const char* input, std::int64_t stride, std::int64_t n, bool value_first);

template <class T, class F>
void apply_unary(T* to, const T* from, const char*, std::int64_t, std::int64_t n, bool) {
  for (std::int64_t i = 0; i < n; ++i) to[i] = from_op_math<T>(F{}(to_op_math(from[i])));
}

template <class T, class F, class Element>
void apply_binary_with(T* to, const T* from, std::int64_t n, bool value_first, const Element& element) {
  if (value_first) {
    for (std::int64_t i = 0; i < n; ++i) to[i] = from_op_math<T>(F{}(to_op_math(from[i]), to_op_math(element(i))));
  } else {
    for (std::int64_t i = 0; i < n; ++i) to[i] = from_op_math<T>(F{}(to_op_math(element(i)), to_op_math(from[i])));
  }
}

template <class T, class F>
void apply_binary(T* to, const T* from, const char* input, std::int64_t stride, std::int64_t n, bool value_first) {
  const T* in = reinterpret_cast<const T*>(input);
  if (stride == static_cast<std::int64_t>(sizeof(T))) {
    apply_binary_with<T, F>(to, from, n, value_first, [in](std::int64_t i) { return in[i]; });
  } else if (stride == 0) {
    const T scalar = *in;
    apply_binary_with<T, F>(to, from, n, value_first, [scalar](std::int64_t) { return scalar; });
  } else {
    apply_binary_with<T, F>(to, from, n, value_first,
                            [input, stride](std::int64_t i) { return *reinterpret_cast<const T*>(input + i * stride); });
  }
}

/// The first input's `count` values, `stride` bytes apart, gathered into a block; and a block
/// scattered out to the output. Only for strided data: contiguous data is read and written in
/// place by the first and last links (Note [A chain's block]).
template <class T>
void load_block(T* value, const char* from, std::int64_t stride, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) value[i] = *reinterpret_cast<const T*>(from + i * stride);
}

template <class T>
void store_block(char* to, std::int64_t stride, const T* value, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) *reinterpret_cast<T*>(to + i * stride) = value[i];
}

template <class T>
LinkFn<T> unary_fn(UnaryOp op) {
  using namespace functors;
  // Same order as the UnaryOp enum.
  static constexpr auto table = exactly_one_per<LinkFn<T>, UnaryOp>(
      &apply_unary<T, Neg>, &apply_unary<T, Exp>, &apply_unary<T, Log>, &apply_unary<T, Sqrt>,
      &apply_unary<T, Rsqrt>, &apply_unary<T, Abs>, &apply_unary<T, Sign>, &apply_unary<T, Relu>,
      &apply_unary<T, Sigmoid>, &apply_unary<T, Tanh>, &apply_unary<T, Gelu>, &apply_unary<T, Erf>,
      &apply_unary<T, Reciprocal>);
  return table[static_cast<std::size_t>(op)];
}

template <class T>
LinkFn<T> binary_fn(BinaryOp op) {
  using namespace functors;
  // Same order as the BinaryOp enum; comparisons and logical ops write Bool and join no chain.
  static constexpr auto table = exactly_one_per<LinkFn<T>, BinaryOp>(
      &apply_binary<T, Add>, &apply_binary<T, Sub>, &apply_binary<T, Mul>, &apply_binary<T, Div>,
      &apply_binary<T, Pow>, &apply_binary<T, Maximum>, &apply_binary<T, Minimum>,
      &apply_binary<T, ThresholdBackward>, &apply_binary<T, GeluBackward>, nullptr, nullptr, nullptr, nullptr,
      nullptr, nullptr, nullptr, nullptr, nullptr);
  return table[static_cast<std::size_t>(op)];
}

template <class T, int N>
void run_chain(const Tensor& out, const std::vector<Tensor>& inputs, const std::vector<ChainLink>& links) {
  std::array<const Tensor*, N> operands;
  operands[0] = &out;
  for (int k = 1; k < N; ++k) operands[k] = &inputs[static_cast<std::size_t>(k - 1)];
  const Loop<N> loop = make_loop<N>(out.sizes(), operands);
  if (loop.numel == 0) return;
  std::array<char*, N> base;
  for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(operands[k]->raw_data_ptr());
  std::vector<LinkFn<T>> apply;
  for (const ChainLink& link : links) {
    apply.push_back(link.unary ? unary_fn<T>(static_cast<UnaryOp>(link.op)) : binary_fn<T>(static_cast<BinaryOp>(link.op)));
  }
  parallel_for(0, loop.numel, kGrainSize, [&](std::int64_t begin, std::int64_t end) {
    T value[kBlock];
    loop_range<N>(loop, base, begin, end, [&](const std::array<char*, N>& p, const std::array<std::int64_t, N>& s,
                                              std::int64_t n) {
      const bool first_contiguous = s[1] == static_cast<std::int64_t>(sizeof(T));
      const bool out_contiguous = s[0] == static_cast<std::int64_t>(sizeof(T));
      for (std::int64_t start = 0; start < n; start += kBlock) {
        const std::int64_t count = std::min(kBlock, n - start);
        const T* from = reinterpret_cast<const T*>(p[1] + start * s[1]);
        if (!first_contiguous) {
          load_block(value, p[1] + start * s[1], s[1], count);
          from = value;
        }
        int next = 2;
        for (std::size_t l = 0; l < links.size(); ++l) {
          T* to = l + 1 == links.size() && out_contiguous ? reinterpret_cast<T*>(p[0] + start * s[0]) : value;
          bool binary = false;
          if constexpr (N > 2) {
            binary = !links[l].unary;
            if (binary) {
              apply[l](to, from, p[next] + start * s[next], s[next], count, links[l].value_first);
              ++next;
            }
          }
          if (!binary) apply[l](to, from, nullptr, 0, count, true);  // a unary link (the only kind with one input)
          from = to;
        }
        if (!out_contiguous) store_block(p[0] + start * s[0], s[0], value, count);
      }
    });
  });
}

template <class T, std::size_t... I>
void run_with_inputs(std::size_t count, const Tensor& out, const std::vector<Tensor>& inputs,
                     const std::vector<ChainLink>& links, std::index_sequence<I...>) {
  ((count == I + 1 ? run_chain<T, static_cast<int>(I) + 2>(out, inputs, links) : void()), ...);
}

}  // namespace

bool joins_chain(const ChainLink& link, DType dtype) {
  if (!is_floating_point(dtype)) return false;
  if (link.unary) return link.op < static_cast<std::uint8_t>(UnaryOp::kCount) &&
                         !unary_has_vectorised_form(static_cast<UnaryOp>(link.op), dtype);
  const auto op = static_cast<BinaryOp>(link.op);
  return link.op < static_cast<std::uint8_t>(BinaryOp::kCount) && !is_comparison(op) && !is_logical(op);
}

void elementwise_chain_kernel(const Tensor& out, const std::vector<Tensor>& inputs,
                              const std::vector<ChainLink>& links) {
  const std::size_t binary_links = static_cast<std::size_t>(
      std::count_if(links.begin(), links.end(), [](const ChainLink& l) { return !l.unary; }));
  KILN_CHECK(!inputs.empty() && inputs.size() <= kMaxChainInputs && inputs.size() == binary_links + 1,
             "elementwise_chain: ", inputs.size(), " inputs for ", binary_links, " binary links (at most ",
             kMaxChainInputs, " inputs)");
  for (const ChainLink& link : links) {
    KILN_CHECK(joins_chain(link, out.dtype()), "elementwise_chain: an op that joins no chain in ", out.dtype());
  }
  for (const Tensor& input : inputs) {
    KILN_CHECK(input.dtype() == out.dtype(), "elementwise_chain: an input of ", input.dtype(), " for an output of ",
               out.dtype());
  }
  dispatch_dtype<CpuTypes<FloatingDTypes>>(out.dtype(), "elementwise_chain_cpu", [&]<typename T>() {
    run_with_inputs<T>(inputs.size(), out, inputs, links, std::make_index_sequence<kMaxChainInputs>{});
  });
}

}  // namespace kiln::cpu
