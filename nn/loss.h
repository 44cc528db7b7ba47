// nn/loss.h — the losses as modules (the functions live in autograd/functions/nn.h):
// CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss, with PyTorch's options and
// defaults (reduction mean, ignore_index -100). Class weights are registered as buffers.
// Read next: optim/optimizer.h.
#pragma once

#include "autograd/functions/nn.h"
#include "nn/module.h"

namespace kiln::nn {

struct CrossEntropyLossOptions {
  Tensor weight{};
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions options = {});
  using Module::forward;  // the one-input form stays visible (and says a loss needs a target)
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_two_tensors(input, target, [this](const Tensor& i, const Tensor& t) { return forward(i, t); });
  }
  const CrossEntropyLossOptions options;
  Tensor& weight;
};

struct NLLLossOptions {
  Tensor weight{};
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(NLLLossOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_two_tensors(input, target, [this](const Tensor& i, const Tensor& t) { return forward(i, t); });
  }
  const NLLLossOptions options;
  Tensor& weight;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : Module("MSELoss"), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_two_tensors(input, target, [this](const Tensor& i, const Tensor& t) { return forward(i, t); });
  }
  const Reduction reduction;
};

class L1Loss : public Module {
 public:
  explicit L1Loss(Reduction reduction = Reduction::Mean) : Module("L1Loss"), reduction(reduction) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return l1_loss(input, target, reduction); }
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_two_tensors(input, target, [this](const Tensor& i, const Tensor& t) { return forward(i, t); });
  }
  const Reduction reduction;
};

struct BCEWithLogitsLossOptions {
  Tensor weight{};
  Tensor pos_weight{};
  Reduction reduction = Reduction::Mean;
};

class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return call_two_tensors(input, target, [this](const Tensor& i, const Tensor& t) { return forward(i, t); });
  }
  const Reduction reduction;
  Tensor& weight;
  Tensor& pos_weight;
};

}  // namespace kiln::nn
