#!/usr/bin/env python3
"""tools/rnn_reference.py — writes tests/nn/rnn_reference.h: PyTorch's outputs for the recurrent
layers on weights and inputs given by a formula both sides can compute (no random numbers to
match), in Float64, plus each module's state-dict keys in PyTorch's order. tests/nn/test_rnn.cpp
builds the same modules in Kiln, loads the same values by name and compares.

Needs PyTorch (Debian: python3-torch, run with /usr/bin/python3); Kiln never does.
  /usr/bin/python3 tools/rnn_reference.py > tests/nn/rnn_reference.h
"""
import math

import torch

torch.set_default_dtype(torch.float64)


def value(k, salt):
    """The formula: the k-th element (row-major) of a tensor whose name has length `salt`."""
    return 0.4 * math.sin(0.37 * k + 0.11 * salt + 0.05)


def fill(t, salt):
    flat = torch.tensor([value(k, salt) for k in range(t.numel())])
    return flat.reshape(t.shape)


def load_formula(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(fill(p, len(name)))


cases = []  # (name, module, input sizes, initial state sizes or None, batch_first)


def emit(name, values):
    flat = values.detach().reshape(-1).tolist()
    body = ", ".join(repr(v) for v in flat)
    print(f"inline const std::vector<double> {name} = {{{body}}};")


print("// tests/nn/rnn_reference.h — written by tools/rnn_reference.py from PyTorch "
      f"{torch.__version__}; do not edit.")
print("// PyTorch's outputs for weights and inputs given by the formula in that script.")
print("#pragma once\n\n#include <string>\n#include <vector>\n\nnamespace kiln::rnn_reference {\n")

# LSTM: 2 layers, bidirectional, batch_first, with (h0, c0).
lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
load_formula(lstm)
x = fill(torch.empty(2, 5, 3), 1)
h0, c0 = fill(torch.empty(4, 2, 4), 2), fill(torch.empty(4, 2, 4), 3)
out, (hn, cn) = lstm(x, (h0, c0))
print("inline const std::vector<std::string> lstm_keys = {" + ", ".join(f'"{k}"' for k in lstm.state_dict()) + "};")
emit("lstm_output", out)
emit("lstm_h_n", hn)
emit("lstm_c_n", cn)
out.sum().backward()
emit("lstm_grad_weight_hh_l1_reverse", lstm.weight_hh_l1_reverse.grad)

# GRU: 2 layers, sequence first, no initial state.
gru = torch.nn.GRU(3, 4, num_layers=2)
load_formula(gru)
x = fill(torch.empty(5, 2, 3), 1)
out, hn = gru(x)
print("inline const std::vector<std::string> gru_keys = {" + ", ".join(f'"{k}"' for k in gru.state_dict()) + "};")
emit("gru_output", out)
emit("gru_h_n", hn)

# RNN with relu, bidirectional, unbatched input, with h0.
rnn = torch.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True)
load_formula(rnn)
x = fill(torch.empty(5, 3), 1)
h0 = fill(torch.empty(2, 4), 2)
out, hn = rnn(x, h0)
emit("rnn_output", out)
emit("rnn_h_n", hn)

# The cells, one step from a given state.
x = fill(torch.empty(2, 3), 1)
h = fill(torch.empty(2, 4), 2)
c = fill(torch.empty(2, 4), 3)
cell = torch.nn.LSTMCell(3, 4)
load_formula(cell)
hc = cell(x, (h, c))
emit("lstm_cell_h", hc[0])
emit("lstm_cell_c", hc[1])
cell = torch.nn.GRUCell(3, 4)
load_formula(cell)
emit("gru_cell_h", cell(x, h))
cell = torch.nn.RNNCell(3, 4)
load_formula(cell)
emit("rnn_cell_h", cell(x, h))

print("\n}  // namespace kiln::rnn_reference")
