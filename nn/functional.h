// nn/functional.h — kiln::nn::functional: the functional forms under PyTorch's
// torch.nn.functional names and argument orders (mostly the same functions as in kiln::;
// where ATen's order differs from torch.nn.functional's, this namespace has F's).
//   namespace F = kiln::nn::functional;
//   F::embedding(indices, weight);   // kiln::embedding(weight, indices) is ATen's torch.embedding
#pragma once

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"

namespace kiln::nn::functional {

using kiln::adaptive_avg_pool2d;
using kiln::avg_pool2d;
using kiln::batch_norm;
using kiln::binary_cross_entropy_with_logits;
using kiln::conv2d;
using kiln::conv_transpose2d;
using kiln::cross_entropy;
using kiln::dropout;
using kiln::fold;
using kiln::gelu;
using kiln::l1_loss;
using kiln::layer_norm;
using kiln::leaky_relu;
using kiln::linear;
using kiln::log_softmax;
using kiln::max_pool2d;
using kiln::mse_loss;
using kiln::nll_loss;
using kiln::one_hot;
using kiln::relu;
using kiln::sigmoid;
using kiln::softmax;
using kiln::tanh;
using kiln::unfold;

/// Rows of `weight` at `input` (torch.nn.functional.embedding's order: input first).
inline Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<std::int64_t> padding_idx = std::nullopt) {
  return kiln::embedding(weight, input, padding_idx);
}

}  // namespace kiln::nn::functional
