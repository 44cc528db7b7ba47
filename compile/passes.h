// compile/passes.h — the passes a captured graph goes through before its first replay, each
// one function from graph to graph in a file of its own under compile/passes/, with a Note
// saying what it assumes. They run in the order listed; KILN_COMPILE_PASSES picks them
// ("all", "none", or a comma-separated list such as "fuse_conv_relu,plan_memory"), so each
// can be switched off to measure it or to find a bug. Every pass keeps the step's results
// exactly (tests/compile runs each graph before and after its pass on the same inputs), except
// where its Note says it changes a reduction's order (fuse_conv_bias_backward, on oneDNN's
// route; fuse_attention's products): such a pass is tested against Float64 instead.
// Read next: compile/passes/plan_memory.cpp.
#pragma once

#include <string>
#include <vector>

#include "compile/graph.h"

namespace kiln::compiler {

/// Drops a call that repeats an earlier one on the same values, its readers reading the earlier
/// result (Note [The same value made twice]).
void eliminate_common_subexpressions(Graph& g);
/// conv2d.forward + relu as one kernel (Note [Convolution and relu in one pass]).
void fuse_conv_relu(Graph& g);
/// max_pool2d_backward + relu's backward as one kernel (Note [Relu's backward through a max pool]).
void fuse_pool_relu_backward(Graph& g);
/// conv2d.forward_relu + a 2x2 max pool as one kernel on the thin route, once relu's backward
/// reads the pool's values (Note [A thin convolution pooled as it is made]).
void fuse_conv_pool(Graph& g);
/// bmm + bias add [+ relu] (nn::Linear's forward) as one kernel (Note [Linear in one kernel]).
void fuse_linear(Graph& g);
/// conv2d.backward_weight + the bias gradient's sum as one kernel (Note [The bias gradient inside
/// the weight gradient]).
void fuse_conv_bias_backward(Graph& g);
/// max_pool2d_backward_relu + a first layer's backward_weight_bias of its result as one kernel
/// (Note [A thin layer's weight gradient read through its pool]).
void fuse_unpool_weight_gradient(Graph& g);
/// max_pool2d_backward_relu + a oneDNN convolution's backward_input and backward_weight_bias of
/// its result as one kernel (Note [Unpooled into the convolution's layout]).
void fuse_unpool_conv_backward(Graph& g);
/// A fused convolution + relu + 2x2 max pool keeps a byte per window for its backward instead of
/// Int64 indices and the pooled values (Note [Records instead of indices]).
void record_pool_windows(Graph& g);
/// The activation between a thin first layer and a oneDNN convolution, and its gradient, cross in
/// the primitives' channel blocks instead of NCHW (Note [Layouts that flow between layers]).
void propagate_channel_blocks(Graph& g);
/// Drops the calls whose values depend on nothing the step changes, keeping the values the
/// capture made (Note [Values computed once]).
void fold_constants(Graph& g);
/// Attention's products, scale, mask and softmax as one kernel forward and one backward
/// (Note [Attention as one kernel]).
void fuse_attention(Graph& g);
/// The fused attention kernels read q, k and v where the packed projection wrote them and write
/// their gradients into the cat's result: the copies and the cat go (Note [Heads read where the
/// projection wrote them]).
void read_heads_in_place(Graph& g);
/// A run of elementwise ops, each the only reader of the one before, becomes one kernel that
/// takes each element through all of them (Note [Elementwise chains in one pass]).
void fuse_elementwise_chains(Graph& g);
/// Places every temporary in one arena: a replay allocates nothing (Note [One arena per step]).
void plan_memory(Graph& g);

/// Drops the nodes marked in `removed` (a fusion pass's absorbed calls), keeping the others' order.
void remove_nodes(Graph& g, const std::vector<bool>& removed);

struct Pass {
  const char* name;
  void (*run)(Graph&);
  const char* what;
};

/// Every pass, in the order they run.
const std::vector<Pass>& all_passes();

/// The passes `selection` names ("all", "none", or names separated by commas); an unknown name
/// is an error listing the known ones. An empty selection reads KILN_COMPILE_PASSES, and
/// without it means "all".
std::vector<Pass> selected_passes(const std::string& selection = "");

/// Runs `passes` on `g` in order.
void run_passes(Graph& g, const std::vector<Pass>& passes);

}  // namespace kiln::compiler
