"""A jemalloc heap profile of the live memory after synthetic training steps of the reference
model (benchmarks/speed/synthetic.py): which C/C++ call sites hold what a training process
keeps between steps, where Python's view of the tensors cannot see it.
  LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=prof:true,lg_prof_sample:16 \\
    python benchmarks/speed/heap_profile.py fp32|bf16 OUT.heap [STEPS]
  jeprof --text --inuse_space [--cum] .venv/bin/python OUT.heap
Needs jemalloc built with profiling (Debian: apt-get install libjemalloc2 libjemalloc-dev,
which brings jeprof). Record: results/speed/2026-12-07-zen5-caches/jeprof_live_memory.txt."""

import ctypes
import pathlib
import sys
import tempfile

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from synthetic import synthetic_trainer

torch.set_num_threads(2)
prec, out = sys.argv[1], sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
try:
    jemalloc = ctypes.CDLL("libjemalloc.so.2")
except OSError:
    sys.exit("heap_profile.py: no libjemalloc.so.2; run it under LD_PRELOAD as the docstring says")
with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(d, [f"train.precision={prec}"])
    for b in batches[:steps]:
        tr.train_step(b)
    name = ctypes.c_char_p(out.encode())
    # mallctl("prof.dump"): writes the profile of what is allocated now; 0 on success
    rc = jemalloc.mallctl(b"prof.dump", None, None, ctypes.byref(name), ctypes.sizeof(name))
    print(f"prof.dump -> {out}: rc {rc} (non-zero: was MALLOC_CONF=prof:true set?)")
