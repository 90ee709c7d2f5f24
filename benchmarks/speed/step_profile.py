"""Where a training step of the reference architecture spends its time: matrix products
(by role, with their GFLOP/s) against everything else, and the bound that the matrix
products alone set on target tokens/s.
  python benchmarks/speed/step_profile.py PRECISION [STEPS]
Random batches shaped like Multi30k (synthetic.py), 2 threads; the first 5 steps warm up,
the next STEPS (default 10) are timed without the profiler, then the same batches again
under torch.profiler. "bound" is target tokens over the profiled matrix-product time:
the tokens/s with every other op (elementwise, casts, dropout, softmax, Adam, autograd and
Python bookkeeping) taking no time."""

import collections
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_trainer

GEMM = ("aten::mm", "aten::addmm", "aten::bmm")
ROLE = {
    1536: "decoder GRU",
    1024: "attentional layer W_c",
    768: "encoder GRU",
    8000: "output layer",
}


def role(name, shapes):
    dims = [tuple(s) for s in shapes if isinstance(s, (list, tuple)) and len(s) >= 2]
    if name == "aten::bmm":
        return "attention context (bmm)", 2 * dims[0][0] * dims[0][1] * dims[0][2] * dims[1][2]
    a, b = dims[-2], dims[-1]
    flops = 2 * a[0] * a[1] * b[1]
    sizes = set(a) | set(b)
    for size in (8000, 1536, 1024, 768):
        if size in sizes:
            return ROLE[size], flops
    if 1 in sizes:
        return "additive score v (matrix-vector)", flops
    return "query projection W s (512x512)", flops


def main(precision: str, steps: int) -> None:
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as d:
        tr, model, batches = synthetic_trainer(d, [f"train.precision={precision}"])
        for b in batches[:5]:
            tr.train_step(b)
        timed = batches[5 : 5 + steps]
        t0, tokens = time.perf_counter(), 0
        for b in timed:
            tokens += tr.train_step(b)
        wall = time.perf_counter() - t0
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for b in timed:
                tr.train_step(b)
    events = prof.key_averages(group_by_input_shape=True)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    gemm = collections.defaultdict(lambda: [0.0, 0.0, 0])
    other = collections.Counter()
    for e in events:
        if e.key in GEMM:
            r, flops = role(e.key, e.input_shapes)
            g = gemm[r]
            g[0] += e.self_cpu_time_total / 1e6
            g[1] += flops * e.count
            g[2] += e.count
        else:
            other[e.key] += e.self_cpu_time_total / 1e6
    gemm_s = sum(g[0] for g in gemm.values())
    print(f"{precision}, {steps} steps, {tokens} target tokens, torch {torch.__version__}")
    print(f"without profiler: {wall:.2f} s, {tokens / wall:.0f} target tokens/s")
    print(
        f"profiled op time: {total:.2f} s; matrix products {gemm_s:.2f} s "
        f"({100 * gemm_s / total:.0f}%), everything else {total - gemm_s:.2f} s "
        f"({100 * (total - gemm_s) / total:.0f}%)"
    )
    print(f"bound with everything else free: {tokens / gemm_s:.0f} target tokens/s")
    print("matrix products by role: seconds, share of op time, calls, GFLOP/s")
    for r, (s, flops, n) in sorted(gemm.items(), key=lambda kv: -kv[1][0]):
        print(f"  {r:34s} {s:6.2f} {100 * s / total:5.1f}% {n:6d} {flops / s / 1e9:7.1f}")
    print("other ops, the 20 largest: seconds, share of op time")
    for k, s in other.most_common(20):
        print(f"  {k:34s} {s:6.3f} {100 * s / total:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10)
