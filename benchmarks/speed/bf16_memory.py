"""Peak resident memory (VmHWM) over 40 synthetic training steps of the reference model:
python benchmarks/speed/bf16_memory.py bf16|fp32   [ONEDNN_PRIMITIVE_CACHE_CAPACITY=N]"""

import re
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from synthetic import synthetic_trainer

torch.set_num_threads(2)
prec = sys.argv[1]


def hwm():
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) // 1024


with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(d, [f"train.precision={prec}"])
    print("after setup", hwm())
    t0 = time.perf_counter()
    tok = 0
    for i, b in enumerate(batches[:40]):
        tok += tr.train_step(b)
        if i in (0, 4, 19, 39):
            print(prec, "step", i, "VmHWM MiB", hwm(), flush=True)
    print(prec, f"{tok / (time.perf_counter() - t0):.0f} tok/s")
