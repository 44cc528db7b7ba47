// nn/loss.cpp — loss modules.
#include "nn/loss.h"

namespace kiln::nn {

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyLossOptions o)
    : Module("CrossEntropyLoss"), options(o), weight(register_buffer("weight", o.weight)) {}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, options.ignore_index, options.reduction, options.label_smoothing);
}

NLLLoss::NLLLoss(NLLLossOptions o) : Module("NLLLoss"), options(o), weight(register_buffer("weight", o.weight)) {}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, options.ignore_index, options.reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsLossOptions o)
    : Module("BCEWithLogitsLoss"),
      reduction(o.reduction),
      weight(register_buffer("weight", o.weight)),
      pos_weight(register_buffer("pos_weight", o.pos_weight)) {}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
}

}  // namespace kiln::nn
