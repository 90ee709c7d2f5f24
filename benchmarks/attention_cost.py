"""Attention cost, measured: time and memory of scaled dot-product attention against its sizes.

Time is measured against n_q * n_kv * d and memory against n_q * n_kv (the textbook's
O(n_q n_kv d) time and O(n_q n_kv) memory; Vaswani et al. 2017, Table 1, for
n_q = n_kv = n).

Run ``python benchmarks/attention_cost.py OUT_DIR`` to write ``attention_cost.json``, ``.md`` and
``.png``. Time is the median of ``torch.utils.benchmark`` runs on one thread; memory is
the bytes the call allocates (the sum of every op's own allocations, from
``torch.profiler`` with ``profile_memory=True``), not a process-wide peak.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from nmt.model.multihead import scaled_dot_product_attention


@dataclass
class CostRow:
    """One measurement: batch B and h heads of queries (n_q, d) over keys/values (n_kv, d).

    Attributes:
        seconds: median time of one call. allocated_bytes: bytes allocated in the call.
    """

    batch: int
    heads: int
    n_q: int
    n_kv: int
    d: int
    seconds: float
    allocated_bytes: int

    @property
    def work(self) -> int:
        """B * h * n_q * n_kv * d: the multiply-adds of Q K^T (and as many for weights V)."""
        return self.batch * self.heads * self.n_q * self.n_kv * self.d

    @property
    def cells(self) -> int:
        """B * h * n_q * n_kv: entries of the score (and weight) matrix."""
        return self.batch * self.heads * self.n_q * self.n_kv


@contextlib.contextmanager
def _quiet_stderr():
    """Silence the C++ side's stderr: the profiler logs two lines per start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def allocated_bytes(fn) -> int:
    """Bytes allocated by the ops of one call of ``fn()`` (CPU, via torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return sum(e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0)


def measure(
    n_q: int, n_kv: int, d: int, batch: int = 8, heads: int = 4, min_run_time: float = 0.2
) -> CostRow:
    """Time and allocation of ``scaled_dot_product_attention`` on random (B, h, n, d)
    inputs with a padding mask (as the decoder uses it)."""
    from torch.utils import benchmark

    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch, heads, n_q, d, generator=g)
    k = torch.randn(batch, heads, n_kv, d, generator=g)
    v = torch.randn(batch, heads, n_kv, d, generator=g)
    mask = torch.ones(batch, 1, 1, n_kv, dtype=torch.bool)

    def call():
        with torch.inference_mode():
            return scaled_dot_product_attention(q, k, v, mask)

    call()
    timer = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=1)
    seconds = timer.blocked_autorange(min_run_time=min_run_time).median
    return CostRow(batch, heads, n_q, n_kv, d, seconds, allocated_bytes(call))


def sweep(
    sizes: tuple[int, ...] = (16, 32, 64, 128, 256),
    d_values: tuple[int, ...] = (32, 64, 128),
    fixed: int = 64,
    d_fixed: int = 64,
    min_run_time: float = 0.2,
) -> dict[str, list[CostRow]]:
    """Three sweeps: n_q with n_kv = ``fixed``, n_kv with n_q = ``fixed``, and d with
    n_q = n_kv = ``fixed``."""
    return {
        "n_q": [measure(n, fixed, d_fixed, min_run_time=min_run_time) for n in sizes],
        "n_kv": [measure(fixed, n, d_fixed, min_run_time=min_run_time) for n in sizes],
        "d": [measure(fixed, fixed, d, min_run_time=min_run_time) for d in d_values],
    }


def summarise(sweeps: dict[str, list[CostRow]]) -> str:
    """Markdown: every row with time per unit of work (ns per B h n_q n_kv d) and bytes
    per score cell; constant columns are what the O() claims predict."""
    lines = [
        "| sweep | n_q | n_kv | d | time (ms) | ns per n_q*n_kv*d (x B h) | "
        "allocated (KiB) | bytes per n_q*n_kv cell (x B h) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, rows in sweeps.items():
        for r in rows:
            lines.append(
                f"| {name} | {r.n_q} | {r.n_kv} | {r.d} | {r.seconds * 1e3:.3f} | "
                f"{r.seconds * 1e9 / r.work:.3f} | {r.allocated_bytes / 1024:,.0f} | "
                f"{r.allocated_bytes / r.cells:.1f} |"
            )
    return "\n".join(lines) + "\n"


def plot(sweeps: dict[str, list[CostRow]], path: Path) -> Path:
    """Log-log: time against n_q n_kv d and allocation against n_q n_kv, every sweep."""
    from nmt.evaluation.plots import _save, plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    try:
        for name, rows in sweeps.items():
            a.loglog(
                [r.work for r in rows], [r.seconds * 1e3 for r in rows], "o-", label=f"vary {name}"
            )
            b.loglog(
                [r.cells for r in rows],
                [r.allocated_bytes / 1024 for r in rows],
                "o-",
                label=f"vary {name}",
            )
        a.set_xlabel("B h n_q n_kv d")
        a.set_ylabel("time (ms)")
        b.set_xlabel("B h n_q n_kv")
        b.set_ylabel("allocated (KiB)")
        for ax in (a, b):
            ax.tick_params(axis="x", which="minor", labelbottom=False)  # they overlap
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.suptitle("scaled dot-product attention, 1 thread")
        fig.tight_layout()
        return _save(fig, path)
    finally:
        plt.close(fig)


def main(argv: list[str]) -> int:
    """``python benchmarks/attention_cost.py OUT_DIR``: measure and write the three files."""
    parser = argparse.ArgumentParser(
        prog="python benchmarks/attention_cost.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "out_dir", type=Path, help="directory for attention_cost.json, .md and .png"
    )
    out = parser.parse_args(argv).out_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"OUT_DIR {out}: cannot create it ({e.strerror or e})")
    torch.set_num_threads(1)
    sweeps = sweep()
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": 1,
        "command": f"python benchmarks/attention_cost.py {out}",
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                machine["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    (out / "attention_cost.json").write_text(
        json.dumps(
            {"machine": machine, "sweeps": {k: [asdict(r) for r in v] for k, v in sweeps.items()}},
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    (out / "attention_cost.md").write_text(
        f"Measured with `{machine['command']}` on {machine['cpu']}, torch {machine['torch']}, "
        "1 thread, B = 8, h = 4.\n\n" + summarise(sweeps),
        encoding="utf-8",
    )
    plot(sweeps, out / "attention_cost.png")
    print(summarise(sweeps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
