"""Where a training run's resident memory is: synthetic steps of the reference model
(benchmarks/speed/synthetic.py), then the peak (VmHWM), the resident set by kind of
mapping (/proc/self/smaps: the malloc heap, anonymous mappings, files), glibc's own count of
heap bytes in use and free (mallinfo2), and the resident set after malloc_trim(0).
  python benchmarks/speed/memory_breakdown.py fp32|bf16 [STEPS] [override ...]
e.g. `... bf16 60 train.batch_multiple=8` (the synthetic set has 49 batches);
ONEDNN_PRIMITIVE_CACHE_CAPACITY=N and LRU_CACHE_CAPACITY=N in the environment set the two
kernel caches (nmt/ops/primitive_cache.py; nmt caps both at 128 where they are unset)."""

import ctypes
import re
import sys
import tempfile

import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from synthetic import synthetic_trainer


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()
    ]


def status(field):
    return int(re.search(rf"{field}:\s+(\d+)", open("/proc/self/status").read()).group(1)) // 1024


def smaps_rss():
    """MiB resident by mapping kind: heap, anon (anonymous mmap), file."""
    out = {"heap": 0, "anon": 0, "file": 0, "other": 0}
    kind = "other"
    for line in open("/proc/self/smaps"):
        head = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            name = head[5] if len(head) > 5 else ""
            kind = (
                "heap"
                if name == "[heap]"
                else "anon"
                if not name
                else "file"
                if name.startswith("/")
                else "other"
            )
        elif head[0] == "Rss:":
            out[kind] += int(head[1])
    return {k: v // 1024 for k, v in out.items()}


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
torch.set_num_threads(2)
prec = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(d, [f"train.precision={prec}", *sys.argv[3:]])
    print("after setup: VmHWM", status("VmHWM"), "MiB")
    run = batches[:steps]
    for i, b in enumerate(run):
        tr.train_step(b)
        if i in (0, 4, 19, len(run) - 1):
            print(f"step {i}: VmHWM {status('VmHWM')} VmRSS {status('VmRSS')} MiB", flush=True)
    m = libc.mallinfo2()
    mib = 1 << 20
    print("by mapping (MiB):", smaps_rss())
    print(
        f"malloc: heap arenas {m.arena // mib}, in use {m.uordblks // mib}, free {m.fordblks // mib}, "
        f"mmapped blocks {m.hblks} of {m.hblkhd // mib} MiB"
    )
    libc.malloc_trim(0)
    print("after malloc_trim(0): VmRSS", status("VmRSS"), "MiB; by mapping", smaps_rss())
