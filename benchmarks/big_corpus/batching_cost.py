"""Cost of opening a prepared 5M-pair store and building one epoch's batches (what every
epoch start pays), and of reading one batch.

    python benchmarks/big_corpus/batching_cost.py RUN_DIR/data/train.arrow
"""

import resource
import sys
import time
from pathlib import Path

import numpy as np


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    import torch  # noqa: F401  (the training process has it loaded too)

    from nmt.data.store import ArrowTrainingSet

    base = rss_mib()
    began = time.perf_counter()
    store = ArrowTrainingSet(Path(sys.argv[1]))
    opened = time.perf_counter()
    batches = store.batches(512, 2000, shuffle_seed=100_003)
    built = time.perf_counter()
    rng = np.random.default_rng(0)
    picks = rng.choice(len(batches), 200, replace=False)
    t0 = time.perf_counter()
    for i in picks:
        store.collate(batches[int(i)])
    collate_ms = (time.perf_counter() - t0) / len(picks) * 1000
    sizes = np.array([len(batches[i]) for i in range(len(batches))])
    print(
        f"pairs {len(store):,}; open (import datasets, memory-map, read the length columns) "
        f"{opened - began:.1f} s; one epoch's batches {built - opened:.1f} s "
        f"({len(batches):,} batches, mean {sizes.mean():.0f} pairs); collate "
        f"{collate_ms:.1f} ms per batch (200 random batches); peak RSS {base:.0f} MiB "
        f"after importing torch, {rss_mib():.0f} MiB at the end"
    )


if __name__ == "__main__":
    main()
