#!/usr/bin/env python3
"""tools/accuracy_vs_pytorch.py — writes the numerics cases of issue 13 as .npy files: each
case's Float32 input, PyTorch's Float32 result and PyTorch's Float64 result on the same values
(the reference). tools/accuracy_report then computes Kiln's Float32 result on the same input
and prints both errors against the reference side by side.

Needs PyTorch and NumPy (Debian: python3-torch, run with /usr/bin/python3); Kiln never does.
  /usr/bin/python3 tools/accuracy_vs_pytorch.py build/accuracy && build/tools/accuracy_report build/accuracy
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1] if len(sys.argv) > 1 else "accuracy"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)


def batch_norm(x):
    c = x.shape[1]
    running_mean = torch.zeros(c, dtype=x.dtype)
    running_var = torch.ones(c, dtype=x.dtype)
    y = torch.nn.functional.batch_norm(x, running_mean, running_var, training=True, momentum=0.1, eps=1e-5)
    return torch.cat([y.reshape(-1), running_var])


cases = {
    "sum_1e7_uniform": (rng.random(10_000_000, dtype=np.float32), lambda x: x.sum()),
    "row_means_4x1e6": (rng.random((4, 1_000_000), dtype=np.float32), lambda x: x.mean(1)),
    "var_1e6_mean1000_std1": ((rng.standard_normal(1_000_000) + 1000).astype(np.float32), lambda x: x.var()),
    "batch_norm_128x8x28x28_mean50_std0.5": ((rng.standard_normal((128, 8, 28, 28)) * 0.5 + 50).astype(np.float32),
                                             batch_norm),
    "softmax_64x4096": ((rng.standard_normal((64, 4096)) * 4).astype(np.float32), lambda x: x.softmax(1)),
    "log_softmax_64x4096": ((rng.standard_normal((64, 4096)) * 4).astype(np.float32), lambda x: x.log_softmax(1)),
    "layer_norm_64x4096_mean50_std0.5": ((rng.standard_normal((64, 4096)) * 0.5 + 50).astype(np.float32),
                                         lambda x: torch.nn.functional.layer_norm(x, (4096,))),
}
# The held-out probe of issue 32: the reduced dim is the outer one of [N, 2] (stride 2).
narrow = (rng.standard_normal((1_000_000, 2)) + 1000).astype(np.float32)
cases.update({
    "var_dim0_1e6x2_mean1000_std1": (narrow, lambda x: x.var(0)),
    "mean_dim0_1e6x2_mean1000_std1": (narrow, lambda x: x.mean(0)),
    "sum_dim0_1e6x2_mean1000_std1": (narrow, lambda x: x.sum(0)),
    "batch_norm_1e6x2_mean1000_std1": (narrow, batch_norm),
})

torch.set_num_threads(2)
for name, (x, fn) in cases.items():
    np.save(os.path.join(out, f"{name}.input.npy"), x)
    t = torch.from_numpy(x)
    np.save(os.path.join(out, f"{name}.pytorch32.npy"), np.asarray(fn(t).numpy(), dtype=np.float32))
    np.save(os.path.join(out, f"{name}.reference.npy"), np.asarray(fn(t.double()).numpy(), dtype=np.float64))
print(f"PyTorch {torch.__version__}: {len(cases)} cases written to {out}/")
