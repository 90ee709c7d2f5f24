"""Which oneDNN primitives a bf16 run built, from its ``ONEDNN_VERBOSE=profile_create`` log.

oneDNN builds (JIT-compiles) a primitive per matrix shape; with its cache (and ideep's, above
it: nmt/ops/primitive_cache.py) too small to hold every shape a run meets, the same shape is
built again and again. A line ``create:cache_miss`` is a build, its last field the
milliseconds it took. Shapes are grouped into families by keeping the model's dimensions
(``--dims``, default the reference model's: configs/bench_reference.yaml) and writing ``V``
for every other number, the dimension that comes from the data (rows = real tokens, batch
sentences, B*S positions ...):

    ONEDNN_VERBOSE=profile_create nmt bench configs/bench_reference.yaml --precision bf16 \\
        --skip-decode --train-seconds 0 ... > run.log 2>&1
    python benchmarks/speed/primitive_builds.py run.log [--steps 70] [--top 25]

Prints the builds, their milliseconds and the distinct shapes built, in all and (``--steps``,
the run's training steps, warm-up included) per step, then the families by builds. The
counts include the one product ``nmt bench`` times for its bf16 matmul peak
(``512x512:512x4096``), in an fp32 run too. Exit 2 with one line for a missing or unreadable
file, a log without a single oneDNN line (not run with ``ONEDNN_VERBOSE=profile_create``), a
build line it cannot read (named by its line number), ``--steps`` below 1 or ``--top`` below 0.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REFERENCE_DIMS = "1,256,512,768,1024,1536,4096,8000"


def family(shape: str, dims: set[str]) -> str:
    """``shape`` (oneDNN's problem description, e.g. ``1009x256:256x768``) with every number
    outside ``dims`` written ``V``. Raises nothing."""
    return re.sub(r"\d+", lambda m: m.group(0) if m.group(0) in dims else "V", shape)


def summarize(lines: list[str], dims: set[str], steps: int | None, top: int) -> str:
    """The report for the lines of one log: builds (oneDNN's ``create:cache_miss``), their
    milliseconds and distinct shapes, per step when ``steps`` is given, then the ``top``
    families. Raises ValueError when no line is oneDNN's or a build line has no
    milliseconds last."""
    if not any(line.startswith("onednn_verbose") for line in lines):
        raise ValueError("no onednn_verbose line: run it with ONEDNN_VERBOSE=profile_create")
    builds, ms = Counter(), Counter()
    shapes: dict[str, set[str]] = defaultdict(set)
    hits = 0
    for number, line in enumerate(lines, 1):
        if ",create:cache_hit," in line:
            hits += 1
        if ",create:cache_miss," not in line:
            continue
        fields = line.rstrip().split(",")
        try:
            shape, took = fields[-2], float(fields[-1])
        except ValueError:
            raise ValueError(f"line {number}: a build without its milliseconds last") from None
        key = family(shape, dims)
        builds[key] += 1
        ms[key] += took
        shapes[key].add(shape)
    n, total = sum(builds.values()), sum(ms.values())
    distinct = len(set().union(*shapes.values())) if shapes else 0
    out = [
        f"{n:,} primitives built in {total:,.0f} ms, {distinct:,} distinct shapes; "
        f"{hits:,} found in oneDNN's cache"
    ]
    if steps:
        out.append(f"per training step ({steps}): {n / steps:.1f} builds, {total / steps:.1f} ms")
    out += ["", f"{'family':44} {'builds':>7} {'ms':>8} {'shapes':>7}"]
    for key, count in builds.most_common(top):
        out.append(f"{key:44} {count:7,} {ms[key]:8,.1f} {len(shapes[key]):7,}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--dims", default=REFERENCE_DIMS, help="model dimensions, comma-separated")
    ap.add_argument("--steps", type=int, default=None, help="training steps the run took")
    ap.add_argument("--top", type=int, default=25, help="families to list")
    args = ap.parse_args(argv)
    for name, low in (("steps", 1), ("top", 0)):
        if getattr(args, name) is not None and getattr(args, name) < low:
            print(
                f"primitive_builds.py: --{name} {getattr(args, name)}: must be at least {low}",
                file=sys.stderr,
            )
            return 2
    try:
        lines = args.log.read_text(encoding="utf-8", errors="replace").splitlines()
        print(summarize(lines, set(args.dims.split(",")), args.steps, args.top))
    except (OSError, ValueError) as e:
        print(
            f"primitive_builds.py: {args.log}: {getattr(e, 'strerror', None) or e}", file=sys.stderr
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
