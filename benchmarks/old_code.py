"""A module of the package as it was at an earlier commit, loaded from ``git show`` beside
today's, for the A/B harnesses that run old code against new (speed/ab/loss_at.py,
speed/ab/bf16_loss_chunks.py, beam_stopping/measure_beam.py).

Before the package became subpackages (issue 26) its modules were flat (``nmt/loss.py``,
``nmt/search.py``, ...). ``module_at`` rewrites such an old module's ``nmt.<module>``
imports to today's names (``nmt.vocab`` -> ``nmt.data.vocab``, ...), so that it runs against
today's tree; what it then calls must still exist there under the same name.

    from old_code import module_at
    old_loss = module_at("226fa03", "nmt/loss.py")
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the flat modules of the package before issue 26 -> today's modules
MOVED = {
    "config": "config.schema",
    "config_load": "config.load",
    "precision": "ops.precision",
    "topk": "ops.topk",
    "deferred": "ops.weight_grads",
    "metrics": "evaluation.metrics",
    "bootstrap": "evaluation.bootstrap",
    "plots": "evaluation.plots",
    "corpus": "data.corpus",
    "vocab": "data.vocab",
    "longsets": "data.longsets",
    "data": "data.batches",
    "store": "data.store",
    "attention": "model.attention",
    "multihead": "model.multihead",
    "encoder": "model.encoder",
    "decoder": "model.decoder",
    "loss": "model.loss",
    "flops": "model.flops",
    "checkpoint": "model.checkpoint",
    "model": "model.seq2seq",
    "schedule": "training.schedule",
    "train": "training.loop",
    "search": "inference.search",
    "translate": "inference.translate",
    "pipeline": "commands.train",
    "evaluate": "commands.evaluate",
    "interactive": "commands.translate",
    "heads": "commands.heads",
    "study": "commands.study",
    "study_plan": "study.plan",
    "study_report": "study.report",
    "machine": "ops.machine",
    "bench": "commands.bench",
    "recipe_eval": "commands.select",
    "cli": "cli.app",
}


def source_at(commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` (``git show``, in this repository)."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def modernise(source: str) -> str:
    """``source`` with every ``nmt.<flat module>`` of the old layout renamed to today's."""
    flat = "|".join(sorted(MOVED, key=len, reverse=True))
    return re.sub(rf"\bnmt\.({flat})\b", lambda m: "nmt." + MOVED[m.group(1)], source)


def module_at(commit: str, path: str, name: str | None = None) -> types.ModuleType:
    """``path`` (e.g. ``nmt/loss.py``, the path at that commit) as it was at ``commit``,
    as a new module (registered in sys.modules under ``name``, default
    ``<stem>_at_<commit>``); its package imports are today's (:func:`modernise`)."""
    name = name or f"{Path(path).stem}_at_{commit}"
    mod = types.ModuleType(name)
    mod.__file__ = f"{commit}:{path}"
    sys.modules[name] = mod  # dataclasses look their module up while the body runs
    exec(compile(modernise(source_at(commit, path)), mod.__file__, "exec"), mod.__dict__)
    return mod
