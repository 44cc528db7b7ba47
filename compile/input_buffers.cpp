// compile/input_buffers.cpp — buffers that share memory as the step's arguments do, and the
// gradients of inputs that require grad (Note [A step's inputs]).
#include "compile/input_buffers.h"

#include <algorithm>
#include <mutex>

#include "compile/graph.h"
#include "core/autograd_meta.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace kiln::compiler {

namespace {

/// One past the last element `t` reaches in its storage (t has elements; strides are not negative).
std::int64_t end_of(const Tensor& t) {
  std::int64_t end = t.storage_offset() + 1;
  for (std::size_t d = 0; d < t.sizes().size(); ++d) end += (t.sizes()[d] - 1) * t.strides()[d];
  return end;
}

bool same_geometry(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset() &&
         a.dtype() == b.dtype();
}

}  // namespace

std::string_view parameter_name(const Tensor& t) {
  const AutogradMeta* meta = t.impl()->autograd_meta_if_exists();
  return meta == nullptr ? std::string_view() : std::string_view(meta->name);
}

bool has_grad_hooks(const Tensor& leaf) {
  AutogradMeta* meta = leaf.impl()->autograd_meta_if_exists();
  if (meta == nullptr) return false;
  std::lock_guard<std::mutex> lock(meta->mutex);
  return !meta->hooks.empty() || !meta->post_accumulate_grad_hooks.empty();
}

std::string inputs_not_replayable(const std::vector<Tensor>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const std::string which = "input " + std::to_string(i);
    if (const std::string_view name = parameter_name(x); !name.empty()) {
      return which + " is the parameter " + std::string(name) + " itself, which the step's module and optimizer reach "
             "directly: a replay would compute on a copy of it, and the two would part; read it through its "
             "module instead of passing it";
    }
    if (!is_grad_enabled() || !x.requires_grad()) continue;
    if (!x.is_leaf()) {
      return which + " requires grad and is not a leaf (" + x.describe() +
             "): a backward inside the step goes on into the graph that made it, outside the step, which a "
             "replay cannot run; pass it detached, or as a leaf";
    }
    if (has_grad_hooks(x)) {
      return which + " has a hook on its gradient, which a replay would not run (the hook is the caller's "
             "tensor's, the replay's backward reaches the graph's copy)";
    }
  }
  return "";
}

std::vector<SharedMemory> shared_memory(const std::vector<Tensor>& inputs) {
  std::vector<SharedMemory> shared(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].numel() == 0) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (inputs[j].is_same(inputs[i])) {
        shared[i] = {static_cast<int>(j), 0, true};  // the same tensor again wins over the first sharer
        break;
      }
      if (shared[i].with >= 0 || inputs[j].numel() == 0 || inputs[j].impl()->storage() != inputs[i].impl()->storage()) {
        continue;
      }
      shared[i] = {static_cast<int>(j),
                   inputs[i].storage_offset() * static_cast<std::int64_t>(inputs[i].element_size()) -
                       inputs[j].storage_offset() * static_cast<std::int64_t>(inputs[j].element_size()),
                   false};
    }
  }
  return shared;
}

std::vector<Tensor> make_input_buffers(const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  const std::vector<SharedMemory> shared = shared_memory(inputs);
  std::vector<Tensor> buffers(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (buffers[i].defined()) continue;  // a view of a span made for an earlier argument
    const Tensor& x = inputs[i];
    if (shared[i].same_tensor) {
      buffers[i] = buffers[static_cast<std::size_t>(shared[i].with)];
      continue;
    }
    // The arguments after this one over its storage; `i` is the first of its group unless it
    // is a view of another dtype or a leaf of its own that requires grad (buffers of their own).
    std::vector<std::size_t> group{i};
    if (shared[i].with < 0) {
      for (std::size_t k = i + 1; k < inputs.size(); ++k) {
        if (shared[k].with == static_cast<int>(i) && !shared[k].same_tensor) group.push_back(k);
      }
    }
    const bool one_span = group.size() > 1 && std::ranges::all_of(group, [&](std::size_t k) {
      return inputs[k].dtype() == x.dtype() && !inputs[k].requires_grad();
    });
    if (!one_span) {
      Tensor b = ops::clone(x);
      if (x.requires_grad()) b = b.as_leaf(true);
      buffers[i] = std::move(b);
      continue;
    }
    std::int64_t begin = x.storage_offset(), end = end_of(x);
    for (std::size_t k : group) {
      begin = std::min(begin, inputs[k].storage_offset());
      end = std::max(end, end_of(inputs[k]));
    }
    const Tensor span = ops::clone(ops::as_strided(x, {end - begin}, {1}, begin));
    for (std::size_t n = 0; n < group.size(); ++n) {
      const std::size_t k = group[n];
      // Identical views share one tensor, as one tensor passed twice does.
      const auto twin = std::ranges::find_if(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(n),
                                             [&](std::size_t m) { return same_geometry(inputs[m], inputs[k]); });
      buffers[k] = twin != group.begin() + static_cast<std::ptrdiff_t>(n)
                       ? buffers[*twin]
                       : ops::as_strided(span, inputs[k].sizes(), inputs[k].strides(), inputs[k].storage_offset() - begin);
    }
  }
  return buffers;
}

void hold_callers_grads(const Graph& g, const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  for (const Graph::GradInput& in : g.grad_inputs) {
    if (in.held.defined()) ops::copy_(in.held, values[in.input].grad());
    g.inputs[in.input].mutable_grad() = in.held;
  }
}

void hand_grads_to_callers(const Graph& g, const std::vector<Tensor>& values, const std::vector<Tensor>& bound) {
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < g.grad_inputs.size(); ++k) {
    const Graph::GradInput& in = g.grad_inputs[k];
    Tensor& grad = g.inputs[in.input].mutable_grad();
    Tensor& callers = values[in.input].mutable_grad();
    if (!grad.defined()) {
      callers = Tensor();  // the step set it to none
    } else if (grad.is_same(in.held)) {
      ops::copy_(callers, in.held);  // added to in place: into the caller's own tensor, as eagerly
    } else {
      callers = bound[k].defined() ? bound[k] : ops::clone(grad);  // bound anew
    }
    grad = Tensor();
  }
}

}  // namespace kiln::compiler
