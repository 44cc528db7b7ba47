// compile/passes/fuse_elementwise_chains.cpp — a run of elementwise ops, each reading only the
// one before it, becomes one kernel that takes every element through all of them. See Note
// [Elementwise chains in one pass].
#include <sstream>

#include "compile/passes/fusion.h"
#include "core/cpu/elementwise_chain.h"

namespace kiln::compiler {

// Note [Elementwise chains in one pass]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eagerly each elementwise op reads its operands from memory and writes a whole tensor back:
// attention's `scores * scale + mask` is two passes over a [heads, T, T] tensor, the second
// reading what the first wrote; a gradient that sums three projections' gradients is two adds.
// When a value is only ever read by the next elementwise op, it need not exist: the pass
// replaces `A1 = op1(x, y); A2 = op2(A1, z); ...; B = opk(Ak-1, w)` by one call of
// cpu::elementwise_chain_kernel, which takes each element of x through op1 ... opk in a block
// that stays in L1, and writes B alone. The pass extends a chain from its first op while:
//  - the value so far covers its storage, is written once, read once, and not pinned (an
//    output, a region's read, a gradient), and the next op is its one reader;
//  - that reader is a unary or binary elementwise op that joins chains in the dtype
//    (cpu::joins_chain: floating, not a comparison, not a unary op Eigen vectorises), reads
//    the value once as one of its operands, whole, and writes a value of the same sizes;
//  - the chain reads at most cpu::kMaxChainInputs tensors, and none of them is written between
//    the op that read it and the chain's last op, where the fused call runs; the result is no
//    input's memory unless it is that input exactly (an in-place op: each element is read
//    before it is written).
// Exactness: each link computes its op's functor on the same operands in the same dtype and
// rounds its result as the op's kernel stores it; no two links contract into one FMA (Note in
// core/cpu/elementwise_chain.cpp), so B is the unfused ops' bit for bit.

namespace {

using UnaryCall = TypedCall<const Tensor&, const Tensor&>;
using BinaryCall = TypedCall<const Tensor&, const Tensor&, const Tensor&>;

/// The fused call: out = the links applied to inputs, element by element.
class ChainCall final : public KernelCall {
 public:
  ChainCall(Tensor out, std::vector<Tensor> inputs, std::vector<cpu::ChainLink> links)
      : KernelCall({KernelFamily::ElementwiseChain, -1}),
        out_(std::move(out)),
        inputs_(std::move(inputs)),
        links_(std::move(links)) {}
  void run() const override { cpu::elementwise_chain_kernel(out_, inputs_, links_); }
  std::vector<Tensor*> tensors() override {
    std::vector<Tensor*> all{&out_};
    for (Tensor& t : inputs_) all.push_back(&t);
    return all;
  }
  /// "mul(v, %), add(v, %), neg(v)": each link with the value so far as v.
  std::string attributes() const override {
    std::ostringstream os;
    for (std::size_t l = 0; l < links_.size(); ++l) {
      const cpu::ChainLink& link = links_[l];
      os << (l == 0 ? "" : ", ");
      if (link.unary) {
        os << op_name(static_cast<UnaryOp>(link.op)) << "(v)";
      } else {
        os << op_name(static_cast<BinaryOp>(link.op)) << (link.value_first ? "(v, %)" : "(%, v)");
      }
    }
    return os.str();
  }

 private:
  Tensor out_;
  std::vector<Tensor> inputs_;
  std::vector<cpu::ChainLink> links_;
};

/// An elementwise call as a link: its output, its operands, and the link it makes when
/// operand `value` (0 or 1) is the value so far.
struct ElementwiseCall {
  Tensor out;
  std::vector<Tensor> operands;  // (in) or (a, b)
  KernelId id;
  cpu::ChainLink link(std::size_t value) const {
    return id.family == KernelFamily::Unary ? cpu::unary_link(static_cast<UnaryOp>(id.op))
                                            : cpu::binary_link(static_cast<BinaryOp>(id.op), value == 0);
  }
};

std::optional<ElementwiseCall> as_elementwise(const Node& node) {
  if (const auto* unary = kernel_call<const UnaryCall>(node, KernelFamily::Unary)) {
    const auto& [out, in] = unary->arguments();
    return ElementwiseCall{out, {in}, unary->id()};
  }
  if (const auto* binary = kernel_call<const BinaryCall>(node, KernelFamily::Binary)) {
    const auto& [out, a, b] = binary->arguments();
    return ElementwiseCall{out, {a, b}, binary->id()};
  }
  return std::nullopt;
}

bool joins(const ElementwiseCall& call) {
  if (!cpu::joins_chain(call.link(0), call.out.dtype())) return false;
  for (const Tensor& operand : call.operands) {
    if (operand.dtype() != call.out.dtype()) return false;
  }
  return true;
}

/// A chain as it grows: its inputs, the node that first read each, and its links.
struct Chain {
  std::vector<Tensor> inputs;
  std::vector<std::size_t> read_at;
  std::vector<cpu::ChainLink> links;
  std::vector<std::size_t> nodes;
  void add_input(const Tensor& t, std::size_t node) {
    inputs.push_back(t);
    read_at.push_back(node);
  }
};

/// Whether `out` may take the chain's result: it is no input's memory, or is that input exactly.
bool may_write(const Tensor& out, const Chain& chain) {
  for (const Tensor& input : chain.inputs) {
    if (storage_of(input) != storage_of(out)) continue;
    if (input.sizes() != out.sizes() || input.strides() != out.strides() ||
        input.storage_offset() != out.storage_offset()) {
      return false;
    }
  }
  return true;
}

}  // namespace

void fuse_elementwise_chains(Graph& g) {
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    if (removed[n]) continue;
    std::optional<ElementwiseCall> first = as_elementwise(g.nodes[n]);
    if (!first || !joins(*first)) continue;
    Chain chain;
    chain.add_input(first->operands[0], n);
    chain.links.push_back(first->link(0));
    if (first->operands.size() == 2) chain.add_input(first->operands[1], n);
    chain.nodes.push_back(n);
    Tensor value = first->out;
    for (;;) {
      if (!covers_storage(value)) break;
      const std::optional<std::size_t> m = only_reader(uses[storage_of(value)]);
      if (!m || *m <= chain.nodes.back() || removed[*m]) break;
      std::optional<ElementwiseCall> next = as_elementwise(g.nodes[*m]);
      if (!next || !joins(*next) || next->out.sizes() != value.sizes()) break;
      if (handles_on(*g.nodes[*m].call, storage_of(value)) != 1) break;  // read once, as an operand
      std::size_t at = 0;
      while (at < next->operands.size() && storage_of(next->operands[at]) != storage_of(value)) ++at;
      if (at == next->operands.size() || !is_whole_value(next->operands[at], value)) break;
      const bool binary = next->operands.size() == 2;
      if (binary && chain.inputs.size() == cpu::kMaxChainInputs) break;
      Chain longer = chain;
      longer.links.push_back(next->link(at));
      if (binary) longer.add_input(next->operands[1 - at], *m);
      longer.nodes.push_back(*m);
      bool inputs_kept = true;
      for (std::size_t i = 0; i < longer.inputs.size(); ++i) {
        inputs_kept = inputs_kept && !written_between(uses[storage_of(longer.inputs[i])], longer.read_at[i], *m);
      }
      if (!inputs_kept || !may_write(next->out, longer)) break;
      chain = std::move(longer);
      value = next->out;
    }
    if (chain.nodes.size() < 2) continue;
    Node& last = g.nodes[chain.nodes.back()];
    last.call = std::make_unique<ChainCall>(value, chain.inputs, chain.links);
    last.made_by = "fuse_elementwise_chains";
    for (std::size_t k = 0; k + 1 < chain.nodes.size(); ++k) removed[chain.nodes[k]] = true;
  }
  remove_nodes(g, removed);
}

}  // namespace kiln::compiler
