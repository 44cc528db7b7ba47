// nn/layers.cpp — constructors and printing of the parameter-free layers and Embedding.
#include "nn/layers.h"

#include "core/creation.h"
#include "core/grad_mode.h"
#include "nn/init.h"

namespace kiln::nn {

namespace {
std::string pair_text(Pair p) { return detail::str_cat("(", p[0], ", ", p[1], ")"); }
}  // namespace

Dropout::Dropout(double prob) : Module("Dropout"), p(prob) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
}

MaxPool2d::MaxPool2d(Pair k, OptionalPair s, Pair pad, Pair dil)
    : Module("MaxPool2d"), kernel_size(k), stride(s.value_or(k)), padding(pad), dilation(dil) {}

std::string MaxPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", pair_text(kernel_size), ", stride=", pair_text(stride), ", padding=",
                         pair_text(padding), ", dilation=", pair_text(dilation), ", ceil_mode=False");
}

AvgPool2d::AvgPool2d(Pair k, OptionalPair s, Pair pad, bool include)
    : Module("AvgPool2d"), kernel_size(k), stride(s.value_or(k)), padding(pad), count_include_pad(include) {}

std::string AvgPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", pair_text(kernel_size), ", stride=", pair_text(stride),
                         ", padding=", pair_text(padding));
}

Embedding::Embedding(std::int64_t n, std::int64_t dim, std::optional<std::int64_t> pad)
    : Module("Embedding"),
      num_embeddings(n),
      embedding_dim(dim),
      padding_idx(pad && *pad < 0 ? std::optional<std::int64_t>(*pad + n) : pad),
      weight(register_parameter("weight", empty({n, dim}))) {
  KILN_CHECK_VALUE(!padding_idx || (*padding_idx >= 0 && *padding_idx < n),
                   "Padding_idx must be within num_embeddings");
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}

std::string Embedding::extra_repr() const {
  std::string s = detail::str_cat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += detail::str_cat(", padding_idx=", *padding_idx);
  return s;
}

}  // namespace kiln::nn
