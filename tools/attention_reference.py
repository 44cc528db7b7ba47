#!/usr/bin/env python3
"""tools/attention_reference.py — writes tests/nn/attention_reference.h: PyTorch's outputs for
scaled dot-product attention, MultiheadAttention and the Transformer encoder on weights and
inputs given by a formula both sides compute (tools/rnn_reference.py's), in Float64, and the
modules' state-dict keys in PyTorch's order.

Needs PyTorch (Debian: python3-torch, run with /usr/bin/python3); Kiln never does.
  /usr/bin/python3 tools/attention_reference.py > tests/nn/attention_reference.h
"""
import math

import torch

torch.set_default_dtype(torch.float64)


def fill(shape, salt):
    n = math.prod(shape)
    return torch.tensor([0.4 * math.sin(0.37 * k + 0.11 * salt + 0.05) for k in range(n)]).reshape(shape)


def load_formula(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(fill(p.shape, len(name)))


def emit(name, values):
    body = ", ".join(repr(v) for v in values.detach().reshape(-1).tolist())
    print(f"inline const std::vector<double> {name} = {{{body}}};")


def keys(name, module):
    print(f"inline const std::vector<std::string> {name} = {{" + ", ".join(f'"{k}"' for k in module.state_dict()) + "};")


def attention(q, k, v, additive):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if additive is not None:
        scores = scores + additive
    return scores.softmax(-1) @ v


print("// tests/nn/attention_reference.h — written by tools/attention_reference.py from PyTorch "
      f"{torch.__version__}; do not edit.")
print("#pragma once\n\n#include <string>\n#include <vector>\n\nnamespace kiln::attention_reference {\n")

# Scaled dot-product attention, written out (PyTorch 1.13 has no F.scaled_dot_product_attention).
q, k, v = fill((2, 3, 5, 4), 1), fill((2, 3, 6, 4), 2), fill((2, 3, 6, 2), 3)
emit("sdpa_plain", attention(q, k, v, None))
allowed = (torch.arange(30).reshape(5, 6) % 4) != 1  # true: take part
emit("sdpa_bool_mask", attention(q, k, v, torch.zeros(5, 6).masked_fill(~allowed, float("-inf"))))
kq = fill((2, 3, 5, 4), 2)
causal = torch.ones(5, 5).tril().bool()
emit("sdpa_causal", attention(q, kq, fill((2, 3, 5, 2), 3), torch.zeros(5, 5).masked_fill(~causal, float("-inf"))))

# MultiheadAttention: E = 8, 2 heads, batch first, a padding mask and a 2-D boolean mask.
mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
keys("mha_keys", mha)
load_formula(mha)
x, mem = fill((2, 4, 8), 1), fill((2, 5, 8), 2)
padding = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])
not_allowed = (torch.arange(20).reshape(4, 5) % 3) == 2
out, weights = mha(x, mem, mem, key_padding_mask=padding, attn_mask=not_allowed)
emit("mha_output", out)
emit("mha_weights", weights)
out, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
emit("mha_self_output", out)
emit("mha_self_weights_per_head", weights)

# Transformer encoder: 2 layers, d_model 8, 2 heads, feed-forward 16, no dropout (eval).
for norm_first, activation in ((False, "relu"), (True, "gelu")):
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    encoder.eval()
    load_formula(encoder)
    tag = "prenorm" if norm_first else "postnorm"
    if not norm_first:
        keys("encoder_keys", encoder)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    with torch.no_grad():
        emit(f"encoder_{tag}", encoder(fill((2, 4, 8), 1), mask=mask))

print("\n}  // namespace kiln::attention_reference")
