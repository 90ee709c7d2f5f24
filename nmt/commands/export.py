"""``nmt export RUN_OR_CHECKPOINT OUT_DIR``: a self-contained model folder (nmt/model/folder.py)
with a model card and the evidence for each number on it.

The weights are stored in the smallest precision that keeps the test BLEU: each of fp16,
bf16 (2 bytes a weight) and fp32 (4 bytes) is written as a folder, loaded back as a user
would load it, and scored on the first test split; the smallest whose BLEU is within
:data:`BLEU_TOLERANCE` of the checkpoint's own is kept (fp16 before bf16: the same size,
more mantissa bits). Every number of the card is then measured on that shipped folder:
BLEU and chrF (cased sacreBLEU, and the papers' lowercased Moses-tokenized BLEU) on each
test split, BLEU by source length on each test split joined 1..5 captions at a time
(``{split}_joined``), and the validation score; the translations behind them are stored
gzip'd beside the card, with ``results.json`` and the run's validation log.

Beam size and alpha: the options, else an ``nmt select --json`` summary in the run
directory that chose this very checkpoint (its ``chosen_checkpoint_sha256``), else the
checkpoint's ``search`` config.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.buckets import parse_buckets
from nmt.config.schema import COMPUTE_PRECISIONS
from nmt.data.longsets import JOINED_SUFFIX
from nmt.data.stored import split_lines, stored_corpus
from nmt.evaluation.metrics import Scores, score
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.card import model_card
from nmt.model.checkpoint import CheckpointError, Loaded, load_checkpoint
from nmt.model.folder import DTYPES, WEIGHTS, core_files, core_files_names, is_folder, write_folder
from nmt.model.rundir import BEST, LOG, SUMMARY, read_valid_log

BLEU_TOLERANCE = 0.1  # BLEU points a smaller precision may lose on test
# smallest first (bytes a weight), then the finer (fp16 keeps more mantissa bits than bf16):
# fp16, bf16, fp32
DTYPE_ORDER: tuple[str, ...] = tuple(
    sorted(COMPUTE_PRECISIONS, key=lambda p: (DTYPES[p].itemsize, torch.finfo(DTYPES[p]).eps))
)
LENGTH_BUCKETS = "1-10,11-20,21-30,31-40,41-50,51-60,61-"  # the converged study's


@dataclass
class Exported:
    """What ``nmt export`` made: the folder, its weight precision and size in bytes, and
    the test BLEU of each precision tried (with the checkpoint's own under ``checkpoint``)."""

    folder: Path
    dtype: str
    size_bytes: int
    dtype_bleu: dict[str, float]


def checkpoint_and_run(source: Path) -> tuple[Path, Path]:
    """(checkpoint file, run directory): a run directory's ``best.pt``, or a checkpoint
    file and the directory it lies in.

    Raises:
        CheckpointError: a model folder given (it is already exported), or no checkpoint.
    """
    if is_folder(source):
        raise CheckpointError(
            f"{source}: is a model folder already; export takes a run "
            "directory or a checkpoint file"
        )
    if source.is_dir():
        if not (source / BEST).is_file():
            raise CheckpointError(
                f"{source / BEST}: not found: give a run directory with a "
                "best.pt, or a checkpoint file"
            )
        return source / BEST, source
    return source, source.parent


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def selected_search(run: Path, sha: str | None) -> dict[str, Any] | None:
    """The ``nmt select --json`` summary in ``run`` that chose the checkpoint of SHA-256
    ``sha`` (``beam``, ``alpha``, file name under ``file``), or None."""
    for f in sorted(run.glob("*.json")):
        if f.stat().st_size > 2_000_000:
            continue
        data = _read_json(f)
        if (
            isinstance(data, dict)
            and data.get("chosen_checkpoint_sha256") == sha
            and isinstance(data.get("beam"), int)
            and isinstance(data.get("alpha"), (int, float))
        ):
            return {"beam": data["beam"], "alpha": float(data["alpha"]), "file": f.name}
    return None


def _translate(
    loaded: Loaded, sources: list[str], decoding: Decoding, batch_size: int
) -> list[str]:
    with torch.inference_mode():
        translator = Translator.from_loaded(loaded, decoding=decoding, batch_size=batch_size)
        return [t.text for t in translator.translate(sources)]


def _scored(
    loaded: Loaded,
    sources: list[str],
    refs: list[str],
    decoding: Decoding,
    batch_size: int,
    buckets: str,
) -> tuple[Scores, list[str]]:
    hyps = _translate(loaded, sources, decoding, batch_size)
    ranges = parse_buckets(buckets)
    return score(hyps, refs, sources, ranges, tgt_lang=loaded.cfg.data.tgt_lang), hyps


def _gz(lines: list[str]) -> bytes:
    # mtime 0: the same translations give the same bytes, so the manifest's hash is stable
    return gzip.compress("".join(x + "\n" for x in lines).encode("utf-8"), mtime=0)


def choose_dtype(
    ckpt: Loaded,
    run_id: str | None,
    decoding: Decoding,
    sets: dict[str, Any],
    split: str,
    forced: str | None,
    batch_size: int,
    staging: Path,
    log: Callable[[str], None],
) -> tuple[str, dict[str, float]]:
    """The precision to ship and the test BLEU of each tried (``checkpoint``: the
    checkpoint's own): the first of :data:`DTYPE_ORDER` (or only ``forced``) whose folder,
    loaded back, scores within :data:`BLEU_TOLERANCE` of the checkpoint on ``split``."""
    sources, refs = sets[split]
    reference, _ = _scored(ckpt, sources, refs, decoding, batch_size, "1-")
    bleu = {"checkpoint": round(reference.bleu, 2)}
    log(f"{split}: checkpoint BLEU {reference.bleu:.2f}")
    for dtype in (forced,) if forced else DTYPE_ORDER:
        stage = staging / dtype
        write_folder(stage, core_files(ckpt.payload, dtype), run_id=run_id, dtype=dtype)
        s, _ = _scored(load_checkpoint(stage), sources, refs, decoding, batch_size, "1-")
        bleu[dtype] = round(s.bleu, 2)
        log(f"{split}: {dtype} weights BLEU {s.bleu:.2f}")
        if forced or abs(s.bleu - reference.bleu) <= BLEU_TOLERANCE:
            return dtype, bleu
    raise AssertionError("unreachable: fp32 weights are the checkpoint's own")


def export_model(
    source: Path,
    out: Path,
    *,
    dtype: str | None = None,
    beam_size: int | None = None,
    alpha: float | None = None,
    data_path: str | None = None,
    batch_size: int = 64,
    log: Callable[[str], None] = lambda m: None,
) -> Exported:
    """Export the checkpoint of ``source`` (run directory or checkpoint file) as the model
    folder ``out``: see the module docstring.

    Raises:
        CheckpointError: no usable checkpoint, ``out`` not new and empty, or unwritable.
        DataError: a test or validation split cannot be read (``--data-path``).
        ValueError: an unknown ``dtype``.
    """
    if dtype is not None and dtype not in DTYPE_ORDER:
        raise ValueError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPE_ORDER)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckpointError(
            f"{out}: exists and is not an empty directory; give a new "
            "folder (nothing is overwritten)"
        )
    ckpt_path, run = checkpoint_and_run(source)
    ckpt = load_checkpoint(ckpt_path, with_digest=True)  # on the CPU: scores any machine repeats
    cfg = ckpt.cfg
    selected = selected_search(run, ckpt.sha256)
    decoding = Decoding.from_config(
        cfg,
        beam_size=beam_size if beam_size is not None else (selected["beam"] if selected else None),
        alpha=alpha if alpha is not None else (selected["alpha"] if selected else None),
        precision="fp32",
    )
    # the folder's config carries the search its numbers were measured with (the alpha chosen
    # on val), so `nmt translate FOLDER` decodes as its card says
    ckpt.payload["config"]["search"].update(beam_size=decoding.beam_size, alpha=decoding.alpha)
    data = stored_corpus(cfg.data, data_path)
    tests = list(cfg.data.test_splits) or ["test_2016_flickr"]
    names = [*tests, *(t + JOINED_SUFFIX for t in tests), cfg.data.valid_split]
    sets = {n: split_lines(data, n) for n in dict.fromkeys(names)}  # all read before decoding
    run_id = ckpt.payload.get("run_id")
    with tempfile.TemporaryDirectory(
        prefix=".nmt-export-", dir=out.parent if out.parent.is_dir() else None
    ) as tmp:
        chosen, dtype_bleu = choose_dtype(
            ckpt, run_id, decoding, sets, tests[0], dtype, batch_size, Path(tmp), log
        )
        shipped = load_checkpoint(Path(tmp) / chosen, with_digest=True)  # what users load
        # the very bytes loaded and scored: safetensors' header order varies between saves
        files = {n: (Path(tmp) / chosen / n).read_bytes() for n in core_files_names()}
        results = _results(shipped, ckpt_path, ckpt, decoding, selected, chosen, dtype_bleu)
        for name, (sources, refs) in sets.items():
            buckets = LENGTH_BUCKETS if name.endswith(JOINED_SUFFIX) else "1-10,11-20,21-30,31-"
            s, hyps = _scored(shipped, sources, refs, decoding, batch_size, buckets)
            hyp_file = f"{name}.hyp.{cfg.data.tgt_lang}.gz"
            files[hyp_file] = _gz(hyps)
            results["test" if name in tests else "other"][name] = {
                "beam_bleu": round(s.bleu, 2),
                "search": decoding.describe(),
                "hypotheses": hyp_file,
                **s.to_json(),
            }
            log(f"{name}: BLEU {s.bleu:.2f}, chrF {s.chrf:.2f} ({len(sources)} sentences)")
    training = training_record(run, cfg.to_dict())
    if (run / LOG).is_file():
        files[LOG] = (run / LOG).read_bytes()
    results["training"] = training
    files["results.json"] = (json.dumps(results, indent=2) + "\n").encode("utf-8")
    files["README.md"] = model_card(results, cfg.to_dict(), tests).encode("utf-8")
    manifest = write_folder(out, files, run_id=run_id, dtype=chosen)
    size = (
        sum(e["bytes"] for e in manifest["files"].values()) + (out / "manifest.json").stat().st_size
    )
    return Exported(out, chosen, size, dtype_bleu)


def _results(
    shipped: Loaded,
    ckpt_path: Path,
    ckpt: Loaded,
    decoding: Decoding,
    selected: dict[str, Any] | None,
    chosen: str,
    dtype_bleu: dict[str, float],
) -> dict[str, Any]:
    """The head of results.json, in the keys of an ``nmt select --json`` summary
    (``chosen_checkpoint_sha256``, ``beam``, ``alpha``, ``test``), which ``nmt serve``
    shows beside the model."""
    return {
        "name": shipped.cfg.name,
        "direction": f"{shipped.cfg.data.src_lang}->{shipped.cfg.data.tgt_lang}",
        "attention": shipped.cfg.model.attention,
        "parameters": sum(p.numel() for p in shipped.model.parameters()),
        "chosen_checkpoint": WEIGHTS,
        "chosen_checkpoint_sha256": shipped.sha256,
        "exported_from": str(ckpt_path),
        "exported_from_sha256": ckpt.sha256,
        "weights_dtype": chosen,
        "dtype_test_bleu": dtype_bleu,
        "bleu_tolerance": BLEU_TOLERANCE,
        "beam": decoding.beam_size,
        "alpha": decoding.alpha,
        "length_penalty": decoding.length_penalty,
        "search": decoding.describe(),
        "search_from": (
            f"nmt select summary {selected['file']}"
            if selected
            else "the checkpoint's search config or the export options"
        ),
        "test": {},
        "other": {},
    }


def training_record(run: Path, config: dict[str, Any]) -> dict[str, Any]:
    """How the run was trained, from its summary.json and valid_log.jsonl (either may be
    missing: a key is then None): epochs, steps, wall clock, best validation BLEU, CPU,
    threads, precision and command."""
    summary = _read_json(run / SUMMARY)
    summary = summary if isinstance(summary, dict) else {}
    try:
        records = read_valid_log(run / LOG)
    except CheckpointError:
        records = []
    last = records[-1] if records else {}
    elapsed = summary.get("elapsed_min")
    if elapsed is None and isinstance(last.get("elapsed_s"), (int, float)):
        elapsed = round(last["elapsed_s"] / 60, 2)
    train = config.get("train", {})
    return {
        "epochs": summary.get("epochs", last.get("epoch")),
        "steps": summary.get("steps", last.get("step")),
        "wall_clock_min": elapsed,
        "best_val_bleu": summary.get(
            "best_val_bleu", max((r["val_bleu"] for r in records), default=None)
        ),
        "validations": len(records),
        "cpu": summary.get("cpu"),
        "threads": summary.get("threads", train.get("threads")),
        "precision": summary.get("precision", train.get("precision")),
        "command": summary.get("command"),
    }
