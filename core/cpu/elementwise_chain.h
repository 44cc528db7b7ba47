// core/cpu/elementwise_chain.h — a chain of elementwise ops evaluated in one pass: each element
// goes through every op while it is in a register or L1, instead of each op reading and writing
// a whole tensor. A compiled step's fused kernel (compile/passes/fuse_elementwise_chains.cpp,
// Note [Elementwise chains in one pass]); eager ops never call it.
//   y = elementwise_chain(out, {x, scale, mask}, {{Mul}, {Add}})   // (x * scale) + mask
// Read next: core/cpu/loops.h (the loop it shares with every elementwise kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/ops/functors.h"
#include "core/tensor.h"

namespace kiln::cpu {

/// One link of a chain: the value so far goes through a unary op, or meets the chain's next
/// input in a binary op, as the op's first operand or its second.
struct ChainLink {
  bool unary = false;
  std::uint8_t op = 0;  // a UnaryOp or a BinaryOp
  bool value_first = true;
};

inline ChainLink unary_link(UnaryOp op) { return {true, static_cast<std::uint8_t>(op), true}; }
inline ChainLink binary_link(BinaryOp op, bool value_first) {
  return {false, static_cast<std::uint8_t>(op), value_first};
}

/// The most inputs one chain reads (its first value and one per binary link).
inline constexpr std::size_t kMaxChainInputs = 6;

/// Whether `link` can join a chain in `dtype` and give the bits its own kernel gives: a
/// floating dtype; an arithmetic binary op (a comparison writes Bool); a unary op its kernel
/// computes with the shared functor (not Eigen's vectorised exp, log, tanh, sqrt, rsqrt or
/// sigmoid on Float32 and Float64, whose last bits depend on where an element falls in a run).
bool joins_chain(const ChainLink& link, DType dtype);

/// out[i] = the chain at element i: the value starts as inputs[0][i]; each link applies its
/// op, a binary one with the next input's element; each result is rounded to out's dtype, as
/// the op's own kernel stores it. Inputs have out's dtype and broadcast to out's shape; out
/// may be strided, and may be an input with the same geometry (read before it is written).
void elementwise_chain_kernel(const Tensor& out, const std::vector<Tensor>& inputs,
                              const std::vector<ChainLink>& links);

}  // namespace kiln::cpu
