"""Microseconds per call of dropout on the CPU: torch's F.dropout against nmt's
(nmt/ops/dropout.py), forward alone and forward + backward, p = 0.2, 2 threads, on the
shapes of a reference-model training step: a decoder step's (B, 512) and a batch's source
embeddings (B, S, 256).
  python benchmarks/speed/dropout_op.py"""

import time

import torch
import torch.nn.functional as F

from nmt.ops.dropout import dropout

torch.set_num_threads(2)


def per_call(f, calls=300):
    for _ in range(20):
        f()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - t0) / calls * 1e6


def forward_backward(drop, x):
    def run():
        drop(x).sum().backward()

    return run


def ours(a):
    return dropout(a, 0.2)


def theirs(a):
    return F.dropout(a, 0.2, True)


print(f"torch {torch.__version__}, 2 threads, p = 0.2, microseconds per call")
for shape in ((95, 512), (95, 21, 256)):
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(shape).to(dtype)
        xr = x.clone().requires_grad_()
        print(
            f"{str(tuple(shape)):14s} {str(dtype)[6:]:8s} forward: F.dropout "
            f"{per_call(lambda x=x: theirs(x)):7.0f}, nmt {per_call(lambda x=x: ours(x)):6.0f};  "
            f"forward+backward: F.dropout {per_call(forward_backward(theirs, xr)):7.0f}, "
            f"nmt {per_call(forward_backward(ours, xr)):6.0f}"
        )
