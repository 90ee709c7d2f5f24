"""CPU time and page faults of one search pass: the shipped models/deen-additive translates
the first 1,000 test_2016_flickr sources (Translator, batches of 64, one worker, one
thread), best of 3 passes after a warm-up; prints CPU seconds, minor page faults and
system seconds per pass. Run it under different glibc malloc settings to see what the
allocator's returning memory to the system costs a search, e.g.

  python benchmarks/speed/search_page_faults.py int8 5
  MALLOC_TRIM_THRESHOLD_=4000000000 MALLOC_MMAP_THRESHOLD_=4000000000 \
    MALLOC_TOP_PAD_=67108864 python benchmarks/speed/search_page_faults.py int8 5
"""

import gzip
import os
import resource
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
from nmt.inference.translator import Translator


def main(precision: str, beam: int) -> None:
    data = Path(os.environ.get("NMT_MULTI30K", "/work/shared/data/multi30k"))
    with gzip.open(data / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(1000), f, strict=False)]
    tr = Translator.from_checkpoint(
        ROOT / "models/deen-additive", precision=precision, beam_size=beam, workers=1, threads=1
    )
    with torch.inference_mode():
        tr.translate(lines[:128])
        best = float("inf")
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(3):
            start = time.process_time()
            tr.translate(lines)
            best = min(best, time.process_time() - start)
        after = resource.getrusage(resource.RUSAGE_SELF)
    faults = (after.ru_minflt - before.ru_minflt) / 3
    system = (after.ru_stime - before.ru_stime) / 3
    print(
        f"{precision} beam {beam}: cpu {best:.3f} s, {faults:,.0f} minor faults, sys {system:.3f} s a pass"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
