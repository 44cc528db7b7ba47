// autograd/saved_variable.h — a tensor saved by a forward op for its backward, with the
// two checks that make saving safe:
//   - the version counter: if the bytes were modified in place after saving, backward
//     raises "one of the variables needed for gradient computation has been modified by an
//     inplace operation" instead of computing a wrong gradient (Note [Version counters]);
//   - release: after a backward without retain_graph the data is freed, and a second
//     backward raises "Trying to backward through the graph a second time".
// A node's own output is saved without its grad_fn (which is the node itself: a cycle) and
// gets it back when unpacked. Under a SavedTensorsHooksGuard the tensor itself is not kept:
// what the guard's pack returned is, and unpack brings the tensor back (no version check then:
// the tensor unpack returns is a new one, as in PyTorch's hooked saved variables).
// Read next: autograd/function.h.
#pragma once

#include <any>
#include <memory>

#include "autograd/saved_tensors_hooks.h"
#include "core/tensor.h"

namespace kiln::autograd {

class Node;

class SavedVariable {
 public:
  SavedVariable() = default;
  /// `output_nr` >= 0 marks the tensor as output `output_nr` of the node that saves it.
  SavedVariable(const Tensor& t, int output_nr);

  /// The saved tensor. For outputs, `owner` is the saving node, which becomes the unpacked
  /// tensor's grad_fn again. Throws if released or modified in place since saving.
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void release() {
    data_ = Tensor();
    packed_.reset();
    hooks_.reset();
    released_ = true;
  }
  bool defined() const { return data_.defined() || hooks_ || released_; }
  /// "[kiln.FloatTensor [3]]"-style summary for graphs.
  std::string summary() const;
  /// The saved data, unchecked (for memory tests and graph export); undefined when packed.
  const Tensor& data() const { return data_; }

 private:
  /// `data` as unpack returns it: an output of the saving node gets that node as grad_fn.
  Tensor with_grad_fn(const Tensor& data, const std::shared_ptr<Node>& owner) const;

  Tensor data_;
  std::shared_ptr<const SavedTensorsHooks> hooks_;  // set when saved under a guard...
  std::any packed_;                                 // ...with what its pack returned
  std::uint32_t saved_version_ = 0;
  int output_nr_ = -1;
  bool requires_grad_ = false;
  bool released_ = false;
  // For the version error message: which node made the saved tensor.
  std::weak_ptr<Node> producer_;
  std::uint32_t producer_output_ = 0;
};

/// "kiln.FloatTensor [3]" — PyTorch's legacy type name and shape, used in error messages.
std::string type_and_shape(const Tensor& t);

}  // namespace kiln::autograd
