// compile/passes.cpp — the list of passes and KILN_COMPILE_PASSES (see compile/passes.h).
#include "compile/passes.h"

#include <cstdlib>
#include <set>
#include <sstream>

#include "core/error.h"

namespace kiln::compiler {

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes = {
      {"eliminate_common_subexpressions", &eliminate_common_subexpressions,
       "a call that repeats an earlier one on the same values (self-attention's three copies of one input) is "
       "dropped; its readers read the earlier result"},
      {"fuse_conv_relu", &fuse_conv_relu, "conv2d.forward + relu as one kernel (relu as the thin kernel stores its rows)"},
      {"fuse_pool_relu_backward", &fuse_pool_relu_backward,
       "max_pool2d_backward + threshold_backward as one kernel, masked on the pooled values"},
      {"fuse_conv_pool", &fuse_conv_pool,
       "conv2d.forward_relu + a max pool as one kernel (a thin layer's rows pooled as they are made, a oneDNN "
       "layer's blocked output pooled where it lies)"},
      {"fuse_linear", &fuse_linear, "bmm + bias add [+ relu] as one kernel (oneDNN's bias, relu while in cache)"},
      {"fuse_conv_bias_backward", &fuse_conv_bias_backward,
       "conv2d.backward_weight + the bias gradient's sum as one kernel (oneDNN's diff_bias; sums in its own order)"},
      {"fuse_unpool_weight_gradient", &fuse_unpool_weight_gradient,
       "max_pool2d_backward_relu + a first layer's weight and bias gradients as one kernel (a thin layer unpools "
       "each plane as it reads it, a oneDNN layer into its weight primitive's layout)"},
      {"fuse_unpool_conv_backward", &fuse_unpool_conv_backward,
       "max_pool2d_backward_relu + a oneDNN convolution's two backward passes as one kernel (the gradient "
       "unpooled into the primitives' blocked layout)"},
      {"record_pool_windows", &record_pool_windows,
       "a fused convolution + relu + 2x2 max pool keeps one byte per window (winner and relu's verdict) for its "
       "backward instead of Int64 indices and the pooled values"},
      {"propagate_channel_blocks", &propagate_channel_blocks,
       "the activation between a thin first layer and a oneDNN convolution, and its gradient, cross in the "
       "primitives' channel blocks (no reorder to or from NCHW)"},
      {"fold_constants", &fold_constants,
       "calls that compute from constants alone (a causal mask, a cast scalar) run once, at capture"},
      {"fuse_attention", &fuse_attention,
       "scaled dot-product attention's products, scale, mask and softmax as one kernel forward and one "
       "backward, a head at a time in cache (sums in the products' own order)"},
      {"read_heads_in_place", &read_heads_in_place,
       "the fused attention kernels read q, k and v where the packed projection wrote them and write their "
       "gradients where the cat puts them: MultiheadAttention's copies of the heads and the cat leave the step"},
      {"fuse_elementwise_chains", &fuse_elementwise_chains,
       "a run of elementwise ops, each reading only the one before (attention's scale and mask, a sum of "
       "gradients), as one pass over the elements"},
      {"plan_memory", &plan_memory, "every temporary in one arena: a replay allocates nothing"},
  };
  return passes;
}

std::vector<Pass> selected_passes(const std::string& selection) {
  std::string names = selection;
  if (names.empty()) {
    const char* env = std::getenv("KILN_COMPILE_PASSES");
    names = env != nullptr && *env != '\0' ? env : "all";
  }
  if (names == "all") return all_passes();
  std::vector<Pass> out;
  if (names == "none") return out;
  std::set<std::string> named;
  std::istringstream in(names);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    named.insert(name);
    bool found = false;
    for (const Pass& p : all_passes()) {
      if (name == p.name) {
        found = true;
        break;
      }
    }
    std::string known;
    for (const Pass& p : all_passes()) known += (known.empty() ? "" : ", ") + std::string(p.name);
    KILN_CHECK_VALUE(found, "KILN_COMPILE_PASSES: unknown pass '", name, "' (known: ", known, "; or all, none)");
  }
  // In their own order, whatever the order named.
  for (const Pass& p : all_passes()) {
    if (named.count(p.name) != 0) out.push_back(p);
  }
  return out;
}

void remove_nodes(Graph& g, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    if (!removed[n]) kept.push_back(std::move(g.nodes[n]));
  }
  g.nodes = std::move(kept);
}

void run_passes(Graph& g, const std::vector<Pass>& passes) {
  for (const Pass& p : passes) p.run(g);
}

}  // namespace kiln::compiler
