"""Does work slow down when two threads of one process do it at once? The same loop run
once alone and then by two threads together (each doing the whole loop), one torch thread
each: an int8 step product of the shipped model's output-layer shape (64 x 512 @ 512 x
7,931, nmt/ops/int8.py), the same product in fp32, and 30,000 in-place additions on a
4-number tensor (what a search step's small operations cost in the interpreter).

  python benchmarks/speed/thread_contention.py

Prints seconds alone and together; on a machine with two idle cores, "together" equal to
"alone" means the two threads did not slow each other.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nmt.ops.int8 import Int8Weight


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    w = torch.randn(7931, 512) / 22
    q, x = Int8Weight(w), torch.rand(64, 512) * 2 - 1
    small = torch.zeros(4)

    def int8_products(n: int = 300) -> None:
        for _ in range(n):
            q.addmm(None, x)

    def fp32_products(n: int = 300) -> None:
        for _ in range(n):
            torch.nn.functional.linear(x, w)

    def small_ops(n: int = 30_000) -> None:
        for _ in range(n):
            small.add_(1)

    print(f"torch {torch.__version__}, 1 torch thread per Python thread")
    for name, work in (
        ("int8 products", int8_products),
        ("fp32 products", fp32_products),
        ("small operations", small_ops),
    ):
        work()  # warm-up
        start = time.perf_counter()
        work()
        alone = time.perf_counter() - start
        threads = [threading.Thread(target=work) for _ in range(2)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        both = time.perf_counter() - start
        print(
            f"{name:18s} alone {alone:.3f} s, two threads together {both:.3f} s ({both / alone:.2f}x)"
        )


if __name__ == "__main__":
    main()
