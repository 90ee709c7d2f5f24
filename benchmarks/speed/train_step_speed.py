"""Training-step speed of the reference architecture on random batches.
python benchmarks/speed/train_step_speed.py THREADS STEPS [time|prof] [KEY=VALUE ...]"""

import sys
import tempfile
import time

import torch
from synthetic import synthetic_trainer

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
mode = sys.argv[3] if len(sys.argv) > 3 else "time"
with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(d, sys.argv[4:])
    for b in batches[:3]:
        tr.train_step(b)
    if mode == "prof":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for b in batches[3 : 3 + steps]:
                tr.train_step(b)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    else:
        t0 = time.perf_counter()
        c0 = time.process_time()
        tok = 0
        for b in batches[3 : 3 + steps]:
            tok += tr.train_step(b)
        print(
            f"{tok / (time.perf_counter() - t0):.0f} target tok/s wall, {tok / (time.process_time() - c0):.0f} per CPU-second over {steps} steps"
        )
