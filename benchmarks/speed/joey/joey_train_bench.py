"""Joey NMT 2.3.0's training speed over a wall-clock window, run in Joey's venv
(benchmarks/speed/joey/setup.sh) by bench_joey.sh; imports Joey, not nmt:

    JOEY_VENV/bin/python benchmarks/speed/joey/joey_train_bench.py train CONFIG THREADS \
        WARMUP_S WINDOW_S OUT.json
    JOEY_VENV/bin/python benchmarks/speed/joey/joey_train_bench.py finish OUT.json TIME_V.txt \
        PREP.json "LOAD1 LOAD5 LOAD15"

``train`` runs Joey's own ``joeynmt.training.train`` on CONFIG (benchmarks/speed/joey/
joey_config.py writes it: a log line every step) with THREADS torch threads, from scratch,
and watches it through two wrappers of Joey's TrainManager methods, which change nothing
Joey computes: ``_train_step`` notes each batch's shape (real and padded target and source
positions, sentences), ``_log_scores`` notes when each step ended (the call comes right after
the optimizer step) and Joey's own count and clock of it (``batch.ntokens``, target pieces +
EOS without padding; Joey's ``elapsed_time``). The clock starts when the first step starts;
steps ending in the first WARMUP_S seconds are warm-up; the window is every later step up to
the first that ends WINDOW_S seconds after the warm-up's last, and then training stops (no
checkpoint, no validation, no test). Target tokens/s = the window's ``batch.ntokens`` / the
wall time from the end of the warm-up's last step to the end of the window's last step.
Writes OUT.json without the process's peak RSS; ``finish`` adds it and the process's CPU
times from TIME_V.txt (``/usr/bin/time -v`` of the ``train`` process), the load average
before (as given) and now, and from PREP.json (joey_config.py's) nmt's parameter count of the
same model and the vocabulary.

Exits 2 with one line when a file is missing, THREADS is not a positive integer, WARMUP_S
not a number >= 0 or WINDOW_S not a number > 0, or the window got no step; warns (one line
on stderr) when the window holds fewer than MIN_WINDOW_STEPS steps, too few for a rate.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

NOTE = (
    "target pieces + EOS, padding excluded (Joey's batch.ntokens, what its 'Tokens per Sec' "
    "counts), summed over the window's steps / wall time from the end of the last warm-up "
    "step to the end of the window's last step (perf_counter at each of Joey's per-step "
    "log calls, which follow the optimizer step)"
)


# a window of fewer steps than this gives a rate dominated by one or two batches' sizes
MIN_WINDOW_STEPS = 5


class WindowDone(Exception):
    """Raised from inside Joey's training loop once the window is measured."""


def train(config: Path, threads: int, warmup_s: float, window_s: float, out: Path) -> None:
    """Train Joey on ``config`` until the window is over; write ``out`` (see the module)."""
    import shutil

    import torch
    from joeynmt.config import load_config
    from joeynmt.helpers import make_model_dir
    from joeynmt.helpers_for_ddp import get_logger
    from joeynmt.training import TrainManager
    from joeynmt.training import train as joey_train

    torch.set_num_threads(threads)
    # what `python -m joeynmt train CONFIG --skip-test` does before it trains
    cfg = load_config(str(config))
    model_dir = Path(cfg["model_dir"])
    make_model_dir(model_dir, overwrite=cfg["training"].get("overwrite", False))
    shutil.copy2(config, model_dir / "config.yaml")
    get_logger("", log_file=str(model_dir / "train.log"))
    steps: list[dict[str, float]] = []  # one per finished step
    shapes: list[dict[str, int]] = []  # the batch of the step under way
    clock: dict[str, Any] = {"start": None, "n_params": None}
    state: dict[str, Any] = {"warmup_end": None, "warmup_steps": 0}
    train_step, log_scores = TrainManager._train_step, TrainManager._log_scores

    def noting_train_step(self, batch):
        if clock["start"] is None:
            clock["start"] = time.perf_counter()
            clock["n_params"] = sum(p.numel() for p in self.model.parameters())
        shapes.append(
            {
                "trg": int(batch.ntokens),
                "trg_padded": int(batch.trg.numel()),
                "src": int(batch.src_length.sum()),
                "src_padded": int(batch.src.numel()),
                "sentences": int(batch.nseqs),
            }
        )
        return train_step(self, batch)

    def noting_log_scores(self, epoch_no, elapsed_time, start_tokens, start_correct, loss):
        now = time.perf_counter()
        log_scores(self, epoch_no, elapsed_time, start_tokens, start_correct, loss)
        tokens = self.stats.total_tokens - start_tokens  # logging_freq 1: this step's
        steps.append(
            {"end": now, "joey_tokens": tokens, "joey_seconds": elapsed_time, "loss": loss}
            | shapes.pop()
        )
        if state["warmup_end"] is None:
            if now - clock["start"] >= warmup_s:
                state["warmup_end"], state["warmup_steps"] = now, len(steps)
        elif now - state["warmup_end"] >= window_s:
            raise WindowDone

    TrainManager._train_step = noting_train_step
    TrainManager._log_scores = noting_log_scores
    if cfg["training"].get("logging_freq") != 1:
        sys.exit(f"{config}: training.logging_freq must be 1 (one log call per step)")
    began = time.perf_counter()
    try:
        joey_train(rank=0, world_size=1, cfg=cfg, skip_test=True)
    except WindowDone:
        pass
    ended = time.perf_counter()
    window = steps[state["warmup_steps"] :]
    if state["warmup_end"] is None or not window:
        sys.exit(f"{config}: training ended before the window ({len(steps)} steps)")
    seconds = window[-1]["end"] - state["warmup_end"]
    if len(window) < MIN_WINDOW_STEPS:
        print(few_steps_warning(len(window), window_s), file=sys.stderr)
    total = {k: sum(s[k] for s in window) for k in window[0] if k != "end"}
    assert total["joey_tokens"] == total["trg"], "Joey's token count is batch.ntokens"
    record = {
        "what": "Joey NMT 2.3.0 on nmt's reference architecture (configs/bench_reference.yaml),"
        " Multi30k de->en, joint SentencePiece unigram 8k: training speed",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "host": platform.node(),
        "threads": threads,
        "cpu": cpu_name(),
        "loadavg_before": None,  # bench_joey.sh fills it in
        "loadavg_after_train": list(os.getloadavg()),
        "versions": {
            "joeynmt": version("joeynmt"),
            "torch": torch.__version__,
            "sentencepiece": version("sentencepiece"),
            "python": platform.python_version(),
        },
        "config": str(config),
        "n_params": clock["n_params"],
        "train": {
            "warmup_seconds_asked": warmup_s,
            "window_seconds_asked": window_s,
            "warmup_steps": state["warmup_steps"],
            "timed_steps": len(window),
            "steps": len(steps),
            "batch": "batch_type token, batch_size "
            f"{cfg['training']['batch_size']} (Joey: padded max(src+1, trg+1) x sentences;"
            " random order, no bucketing)",
            "target_tokens_per_s": round(total["trg"] / seconds, 1),
            "target_tokens_per_s_note": NOTE,
            "target_tokens_per_s_joey_clock": round(total["trg"] / total["joey_seconds"], 1),
            "source_tokens_per_s": round(total["src"] / seconds, 1),
            "timed_target_tokens": total["trg"],
            "timed_seconds": round(seconds, 3),
            "mean_target_tokens_per_step": round(total["trg"] / len(window), 1),
            "mean_sentences_per_step": round(total["sentences"] / len(window), 1),
            "padded_target_positions_per_s": round(total["trg_padded"] / seconds, 1),
            "target_padding_fraction": round(1 - total["trg"] / total["trg_padded"], 3),
            "source_padding_fraction": round(1 - total["src"] / total["src_padded"], 3),
            "joey_step_tokens_per_s": [round(s["trg"] / s["joey_seconds"]) for s in window],
            "train_loop_seconds": round(steps[-1]["end"] - clock["start"], 2),
            "setup_seconds": round(clock["start"] - began, 2),
            "process_seconds_after_window": round(ended - steps[-1]["end"], 2),
            "final_batch_loss": round(float(window[-1]["loss"]), 5),
        },
        "model_dir": str(model_dir),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


def finish(out: Path, time_v: Path, prep: Path, load_before: str) -> None:
    """Add ``/usr/bin/time -v``'s peak RSS and CPU times, the load averages and what
    ``prep`` records of nmt's model and the vocabulary to ``out``."""
    record = json.loads(out.read_text())
    made = json.loads(prep.read_text())
    record["loadavg_before"] = [float(x) for x in load_before.split()]
    record["n_params_nmt_reference"] = made["n_params_nmt_reference"]
    record["vocab"] = made["vocab"] | {"train_pairs": made["train_pairs"]}
    text = time_v.read_text()

    def field(name: str) -> str:
        found = re.search(rf"^\s*{re.escape(name)}: (.+)$", text, re.M)
        if not found:
            sys.exit(f"{time_v}: no '{name}' line (not /usr/bin/time -v output?)")
        return found[1]

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
    train = record["train"]
    train["process_wall_s"] = round(sum(float(x) * 60**i for i, x in enumerate(wall[::-1])), 2)
    train["process_user_cpu_s"] = float(field("User time (seconds)"))
    train["process_sys_cpu_s"] = float(field("System time (seconds)"))
    train["peak_rss_mib"] = round(int(field("Maximum resident set size (kbytes)")) / 1024, 1)
    record["loadavg_after"] = list(os.getloadavg())
    out.write_text(json.dumps(record, indent=2) + "\n")


def few_steps_warning(steps: int, window_s: float) -> str:
    """The one-line warning for a window of ``steps`` (< MIN_WINDOW_STEPS) steps."""
    return (
        f"joey_train_bench: WARNING: the {window_s:g} s window holds {steps} step(s), fewer "
        f"than {MIN_WINDOW_STEPS}: its tokens/s rests on too few batches (a longer WINDOW_S)"
    )


def train_args(threads: str, warmup_s: str, window_s: str) -> tuple[int, float, float]:
    """THREADS, WARMUP_S and WINDOW_S from the command line.

    Raises:
        ValueError: one line naming the argument: THREADS not a positive integer, WARMUP_S
            not a finite number >= 0, WINDOW_S not a finite number > 0.
    """
    if not (threads.isascii() and threads.isdigit()) or int(threads) < 1:
        raise ValueError(f"THREADS={threads}: must be a positive integer (torch threads)")
    numbers = []
    for name, text, low in (("WARMUP_S", warmup_s, ">= 0"), ("WINDOW_S", window_s, "> 0")):
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if not math.isfinite(x) or x < 0 or (low == "> 0" and x == 0):
            raise ValueError(f"{name}={text}: must be a number of seconds {low}")
        numbers.append(x)
    return int(threads), numbers[0], numbers[1]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} logical cores"
    return platform.processor()


def main(argv: list[str]) -> int:
    if argv[:1] == ["train"] and len(argv) == 6:
        config = Path(argv[1])
        if not config.is_file():
            print(f"joey_train_bench: {config}: no such config", file=sys.stderr)
            return 2
        try:
            threads, warmup_s, window_s = train_args(argv[2], argv[3], argv[4])
        except ValueError as e:
            print(f"joey_train_bench: {e}", file=sys.stderr)
            return 2
        train(config, threads, warmup_s, window_s, Path(argv[5]))
    elif argv[:1] == ["finish"] and len(argv) == 5:
        finish(Path(argv[1]), Path(argv[2]), Path(argv[3]), argv[4])
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
