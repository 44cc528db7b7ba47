// autograd/functions/nn.cpp — losses, dropout, embedding and batch normalisation, all composed
// from differentiable primitives (so gradcheck covers them through their parts, and their
// double backward comes for free); batch_norm in training hands over to native_batch_norm
// where the backend has batch-norm kernels (cuDNN). Formulas follow PyTorch's, including its reductions and
// error messages.
// Read next: autograd/functions/conv.cpp.
#include "autograd/functions/nn.h"

#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/functions/float_math.h"
#include "autograd/functions/index.h"
#include "core/capture_hooks.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "core/ops/allocate.h"
#include "core/ops/batch_norm.h"
#include "core/ops/random.h"
#include "core/ops/reduce.h"
#include "core/routes.h"

namespace kiln {

Tensor softmax(const Tensor& x, std::int64_t dim) { return x.softmax(dim); }
Tensor log_softmax(const Tensor& x, std::int64_t dim) { return x.log_softmax(dim); }
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) { return x.logsumexp(dims, keepdim); }

namespace {

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return loss.sum();
    case Reduction::Mean: return loss.mean();
  }
  return loss;
}

/// nll_loss's check that every target (but ignore_index) names a class. It reads the targets
/// on the host, so a captured step runs it again at each replay (core/capture_hooks.h).
void check_targets(const Tensor& target, std::int64_t classes, std::int64_t ignore_index) {
  capture::Region region("check_targets", [=] { check_targets(target, classes, ignore_index); }, {&target});
  std::int64_t lo = 0, hi = 0;
  if (target.is_cpu() && target.is_contiguous()) {
    // One pass on the host: no kernels, no allocation.
    const std::int64_t* p = target.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < target.numel(); ++i) {
      if (p[i] == ignore_index) continue;
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
  } else {
    const Tensor checked = where(target != ignore_index, target, 0);
    lo = ops::amin(checked, {}, false).item<std::int64_t>();
    hi = ops::amax(checked, {}, false).item<std::int64_t>();
  }
  KILN_CHECK_INDEX(lo >= 0 && hi < classes, "Target ", lo < 0 ? lo : hi, " is out of bounds.");
}

/// Moves the class dim (1) last and flattens: [N, C, d1, ...] -> [N*d1*..., C].
Tensor classes_last(const Tensor& input) {
  if (input.dim() <= 2) return input;
  Shape order{0};
  for (std::int64_t d = 2; d < input.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return input.permute(order).reshape({-1, input.sizes()[1]});
}

}  // namespace

static Tensor nll_loss_impl(const Tensor& input, const Tensor& target, const Tensor& weight,
                            std::int64_t ignore_index, Reduction reduction) {
  KILN_CHECK_TYPE(target.dtype() == DType::Int64, msg::scalar_type(DType::Int64, target.dtype()),
                  " (nll_loss expects class indices as Int64)\n", msg::blame("target", target));
  KILN_CHECK(input.dim() >= 1, "input tensor should be 1D or more");
  const bool unbatched = input.dim() == 1;
  const Tensor logp = unbatched ? input.unsqueeze(0) : classes_last(input);
  const Tensor tgt = unbatched ? target.reshape({1}) : target.reshape({-1});
  const std::int64_t classes = logp.sizes()[1];
  KILN_CHECK(logp.sizes()[0] == tgt.numel(), "Expected input batch_size (", logp.sizes()[0],
             ") to match target batch_size (", tgt.numel(), ").");
  KILN_CHECK(!weight.defined() || weight.numel() == classes, "weight tensor should be defined "
             "either for all ", classes, " classes or no classes but got weight tensor of shape: ",
             weight.sizes());
  const Tensor valid = tgt != ignore_index;
  if (tgt.numel() > 0 && !tgt.is_meta()) check_targets(tgt, classes, ignore_index);
  const Tensor safe = where(valid, tgt, 0);
  Tensor w = valid.to(logp.dtype());
  if (weight.defined()) w = w * weight.index_select(0, safe);
  const Tensor picked = -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * w;
  switch (reduction) {
    case Reduction::None: return unbatched ? picked.squeeze(0) : picked.reshape(target.sizes());
    case Reduction::Sum: return picked.sum();
    case Reduction::Mean: return picked.sum() / w.sum();
  }
  return picked;
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                std::int64_t ignore_index, Reduction reduction) {
  return amp::run<amp::CastPolicy::Fp32>(nll_loss_impl, input, target, weight, ignore_index, reduction);
}

static Tensor cross_entropy_impl(const Tensor& input, const Tensor& target, const Tensor& weight,
                                 std::int64_t ignore_index, Reduction reduction, double label_smoothing) {
  KILN_CHECK_VALUE(label_smoothing >= 0.0 && label_smoothing <= 1.0,
                   "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  const std::int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const std::int64_t classes = input.sizes()[class_dim];
  const Tensor logp = input.log_softmax(class_dim);
  // A weight [C] broadcast along the class dim of logp.
  auto class_weight = [&]() {
    Shape shape(static_cast<std::size_t>(input.dim()), 1);
    shape[static_cast<std::size_t>(class_dim)] = classes;
    return weight.reshape(shape);
  };
  if (target.is_floating_point()) {
    // Class probabilities: -sum_c target_c log p_c.
    KILN_CHECK(target.sizes() == input.sizes(), "Expected input and target of the same shape for "
               "class-probability targets, got ", input.sizes(), " and ", target.sizes());
    Tensor t = label_smoothing > 0 ? target * (1 - label_smoothing) + label_smoothing / classes : target;
    Tensor per = logp * t;
    if (weight.defined()) per = per * class_weight();
    const Tensor loss = -per.sum(class_dim);
    if (reduction == Reduction::Mean) return loss.sum() / static_cast<double>(input.numel() / classes);
    return reduce(loss, reduction);
  }
  const Tensor nll = nll_loss(logp, target, weight, ignore_index, reduction);
  if (label_smoothing == 0.0) return nll;
  // PyTorch's label smoothing: (1 - eps) * nll + eps / C * (-sum_c log p_c), ignoring the
  // ignored targets and normalised like nll_loss.
  const Tensor ignored = target == ignore_index;
  Tensor smooth = -(weight.defined() ? logp * class_weight() : logp).sum(class_dim);
  smooth = smooth.masked_fill(ignored, 0.0);
  Tensor smooth_reduced;
  switch (reduction) {
    case Reduction::None: smooth_reduced = smooth; break;
    case Reduction::Sum: smooth_reduced = smooth.sum(); break;
    case Reduction::Mean: {
      const Tensor kept = ignored.logical_not();
      const Tensor denom = weight.defined()
                               ? (weight.index_select(0, where(kept, target, 0).reshape({-1})) *
                                  kept.reshape({-1}))
                                     .sum()
                               : kept.sum().to(smooth.dtype());
      smooth_reduced = smooth.sum() / denom;
      break;
    }
  }
  return (1 - label_smoothing) * nll + smooth_reduced * (label_smoothing / classes);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     std::int64_t ignore_index, Reduction reduction, double label_smoothing) {
  return amp::run<amp::CastPolicy::Fp32>(cross_entropy_impl, input, target, weight, ignore_index, reduction,
                                         label_smoothing);
}

static Tensor mse_loss_impl(const Tensor& input, const Tensor& target, Reduction reduction) {
  const Tensor diff = input - target;
  return reduce(diff * diff, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return amp::run<amp::CastPolicy::Fp32>(mse_loss_impl, input, target, reduction);
}

static Tensor l1_loss_impl(const Tensor& input, const Tensor& target, Reduction reduction) {
  return reduce((input - target).abs(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return amp::run<amp::CastPolicy::Fp32>(l1_loss_impl, input, target, reduction);
}

static Tensor binary_cross_entropy_with_logits_impl(const Tensor& input, const Tensor& target,
                                                    const Tensor& weight, const Tensor& pos_weight,
                                                    Reduction reduction) {
  KILN_CHECK(target.sizes() == input.sizes(), "Target size (", target.sizes(),
             ") must be the same as input size (", input.sizes(), ")");
  // loss = (1 - y) x + l (log(1 + e^-|x|) + max(-x, 0)),  l = 1 + (pos_weight - 1) y:
  // stable for any x (no exp of a large positive number).
  const Tensor softplus_neg = (-input.abs()).exp().add(1).log() + (-input).clamp_min(0);
  Tensor loss;
  if (pos_weight.defined()) {
    const Tensor log_weight = (pos_weight - 1) * target + 1;
    loss = (1 - target) * input + log_weight * softplus_neg;
  } else {
    loss = (1 - target) * input + softplus_neg;
  }
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        Reduction reduction) {
  return amp::run<amp::CastPolicy::Fp32>(binary_cross_entropy_with_logits_impl, input, target, weight,
                                         pos_weight, reduction);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0;
  // PyTorch's recipe: a Bernoulli(1 - p) mask scaled by 1/(1 - p), drawn from the global
  // generator (so manual_seed makes it reproducible).
  Tensor noise = ops::empty_output(x.sizes(), x.dtype(), x.device(), "dropout");
  ops::random_data(noise, RandomKind::Bernoulli, 1.0 - p, 0.0);
  return x * (noise / (1.0 - p));
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<std::int64_t> padding_idx) {
  KILN_CHECK_TYPE(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32,
                  "Expected tensor for argument #1 'indices' to have one of the following scalar "
                  "types: Long, Int; but got ", scalar_type_name(indices.dtype()), " instead\n",
                  msg::blame("indices", indices));
  KILN_CHECK(weight.dim() == 2, "'weight' must be 2-D, got ", weight.sizes());
  const Tensor idx = indices.to(DType::Int64).reshape({-1});
  Shape out_shape = indices.sizes().vec();
  out_shape.push_back(weight.sizes()[1]);
  Tensor rows = weight.index_select(0, idx);
  if (padding_idx) {
    std::int64_t pad = *padding_idx;
    if (pad < 0) pad += weight.sizes()[0];
    // Same values, but rows read at the padding index are cut from the graph.
    rows = where((idx == pad).unsqueeze(1), rows.detach(), rows);
  }
  return rows.reshape(out_shape);
}

static Tensor batch_norm_impl(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                              const Tensor& weight, const Tensor& bias, bool training, double momentum,
                              double eps) {
  KILN_CHECK(input.dim() >= 2, "batch_norm expects an input of at least 2 dims [N, C, ...], got ",
             input.sizes());
  const std::int64_t channels = input.sizes()[1];
  Shape dims{0};
  Shape stat_shape(static_cast<std::size_t>(input.dim()), 1);
  stat_shape[1] = channels;
  for (std::int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  const std::int64_t per_channel = input.numel() / std::max<std::int64_t>(channels, 1);
  Tensor x_hat;
  if (training) {
    KILN_CHECK_VALUE(per_channel > 1, "Expected more than 1 value per channel when training, "
                     "got input size ", input.sizes(), "\n", msg::blame("input", input),
                     "\nHint: use drop_last in the DataLoader, call eval() for inference, or "
                     "make batches of at least 2.");
    if (routes::batch_norm(input, weight, bias, running_mean, running_var) != routes::Route::Composite) {
      return std::get<0>(native_batch_norm(input, weight, bias, running_mean, running_var, true, momentum, eps));
    }
    const Tensor mean = input.mean(dims, true);
    const Tensor var = input.var(dims, false, true);
    x_hat = (input - mean) / (var + eps).sqrt();
    if (running_mean.defined() && running_var.defined()) {
      NoGradGuard no_grad;
      // The running variance is unbiased (n / (n - 1)), the normalisation biased: PyTorch's mix.
      const double unbias = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
      running_mean.mul_(1 - momentum).add_(mean.detach().reshape({channels}) * momentum);
      running_var.mul_(1 - momentum).add_(var.detach().reshape({channels}) * (momentum * unbias));
    }
  } else {
    KILN_CHECK(running_mean.defined() && running_var.defined(),
               "batch_norm in evaluation mode needs running_mean and running_var");
    x_hat = (input - running_mean.reshape(stat_shape)) / (running_var.reshape(stat_shape) + eps).sqrt();
  }
  if (weight.defined()) x_hat = x_hat * weight.reshape(stat_shape);
  if (bias.defined()) x_hat = x_hat + bias.reshape(stat_shape);
  return x_hat;
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  // Statistics in Float32; the output keeps the input's dtype (Note [Autocast policies]).
  return amp::run<amp::CastPolicy::Fp32>(batch_norm_impl, input, running_mean, running_var, weight, bias,
                                         training, momentum, eps)
      .to(input.dtype());
}

}  // namespace kiln
