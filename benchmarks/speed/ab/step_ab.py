"""In-process A/B of training-step variants, interleaved step by step, so that the machine's
drift (a shared, noisy 2-core VM) falls on every variant alike.
  python benchmarks/speed/ab/step_ab.py STEPS VARIANTS.py
VARIANTS.py defines VARIANTS = {name: (enter(model), leave(model))}; random batches of the
reference architecture (configs/bench_reference.yaml), 2 threads; PRECISION=bf16 (or fp16)
sets train.precision; WARM=N warms every variant on N batches first (default 2; more
for variants that compile)."""

import importlib.util
import os
import pathlib
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/speed
from synthetic import synthetic_trainer

torch.set_num_threads(2)
steps = int(sys.argv[1])
spec = importlib.util.spec_from_file_location("variants", sys.argv[2])
V = importlib.util.module_from_spec(spec)
spec.loader.exec_module(V)
with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(
        d, [f"train.precision={os.environ.get('PRECISION', 'fp32')}"]
    )
    names = list(V.VARIANTS)
    tot = {n: [0.0, 0] for n in names}
    warm = int(os.environ.get("WARM", 2))
    for b in batches[:warm]:
        for n in names:
            V.VARIANTS[n][0](model)
            tr.train_step(b)
            V.VARIANTS[n][1](model)
    for k, b in enumerate(batches[warm : warm + steps]):
        order = names if k % 2 == 0 else names[::-1]
        for n in order:
            V.VARIANTS[n][0](model)
            t0 = time.perf_counter()
            tok = tr.train_step(b)
            dt = time.perf_counter() - t0
            V.VARIANTS[n][1](model)
            tot[n][0] += dt
            tot[n][1] += tok
    for n in names:
        print(f"{n}: {tot[n][1] / tot[n][0]:.0f} target tok/s over {steps} steps")
