"""What a study report decodes and how: its test sets (the splits and their joined
long-sentence sets) and each model's search, greedy or beam with the GNMT alpha chosen on
validation; translations are cached beside each checkpoint.

A cached translation file ``hyps/{name}`` is reused only when its key file
``hyps/{name}.key.json`` says it was made from the same content: the SHA-256 of the
checkpoint file, of the source lines (a joined set's lines, so ``join_ks`` counts), the
whole decoding (beam, length penalty, alpha, length ratio, precision, n-best), the
Translator's batch and source-length settings and ``HYPS_FORMAT``; and when the file
still holds the lines the key records. File times and sizes are never trusted (a
checkpoint copied with ``cp -p`` keeps its old time). Anything else is translated again.
When the study keeps an archive (nmt/study/archive.py), every translation is also
written to the run's archive under the same key, and read from there when the cache beside
the checkpoint lacks it; an archived run without a checkpoint can only be reported from
translations archived for exactly the decodings the report asks for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.schema import Config, StudyConfig
from nmt.data.corpus import DataError, read_split
from nmt.data.digest import lines_sha256
from nmt.data.longsets import long_sentence_set
from nmt.evaluation.metrics import score
from nmt.inference.translate import (
    MAX_SOURCE_PIECES,
    Decoding,
    truncation_warning,
    unfinished_warning,
)
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded, load_checkpoint
from nmt.model.rundir import BEST
from nmt.ops.files import write_atomic
from nmt.study.plan import PlannedRun, StudyError

# bump when the search changes what it returns for the same checkpoint and settings, so
# that translations cached by an older search are made again (2: hypotheses cut at the
# length limit rank after complete ones)
HYPS_FORMAT = 2
BATCH_SIZE = 64  # sentences per batch of the report's searches (part of the cache key)


@dataclass
class TestSet:
    """Sources and references of one evaluation set; ``note`` says how it was built."""

    name: str
    sources: list[str]
    references: list[str]
    note: str


def load_test_sets(study: StudyConfig, cfg: Config, log: Callable[[str], None]) -> list[TestSet]:
    """The named test splits of ``cfg.data`` (a missing one is skipped with a note) and the
    joined sets."""
    sets, by_name = [], {}
    for split in study.test_splits:
        try:
            pairs = read_split(cfg.data, split)
        except DataError as e:
            log(f"warning: test split {split} skipped: {e}")
            continue
        ts = TestSet(split, [p.src for p in pairs], [p.tgt for p in pairs], "as distributed")
        sets.append(ts)
        by_name[split] = ts
    for long_split in dict.fromkeys([study.long_set_split, *study.long_set_splits]):
        if long_split:
            sets.append(_joined_set(study, cfg, long_split, by_name.get(long_split)))
    return sets


def _joined_set(study: StudyConfig, cfg: Config, split: str, base: TestSet | None) -> TestSet:
    """``split`` with k = ``study.join_ks`` consecutive pairs joined."""
    if base is None:
        pairs = read_split(cfg.data, split)
        base = TestSet(split, [p.src for p in pairs], [p.tgt for p in pairs], "")
    joined = long_sentence_set(base.sources, base.references, study.join_ks)
    ks = ", ".join(map(str, study.join_ks))
    return TestSet(
        f"{split}_joined",
        joined.sources,
        joined.references,
        f"{split} with k = {ks} consecutive pairs joined "
        f"(source to source, reference to reference): {len(joined)} lines",
    )


def greedy_decoding(cfg: Config) -> Decoding:
    """Greedy search with fp32 matrix products (the same result on every CPU), output
    length limited by the run's ``train.max_output_ratio``."""
    return Decoding(beam_size=1, precision="fp32", max_ratio=cfg.train.max_output_ratio)


def beam_decoding(cfg: Config, beam: int, alpha: float) -> Decoding:
    """Beam search with the GNMT length penalty ``alpha``, fp32 matrix products."""
    return Decoding(
        beam_size=beam,
        alpha=alpha,
        length_penalty="gnmt",
        precision="fp32",
        max_ratio=cfg.train.max_output_ratio,
    )


def _tag(decoding: Decoding) -> str:
    """The cache name of a decoding: ``greedy`` or ``beam5_a1``."""
    return "greedy" if decoding.beam_size == 1 else f"beam{decoding.beam_size}_a{decoding.alpha:g}"


def load_models(runs: list[PlannedRun]) -> tuple[dict[str, Loaded | None], dict[str, str]]:
    """Each run's ``best.pt`` (a shipped run's model folder) loaded (None for an archived
    run, which has none), and the SHA-256 of that file (of a folder's weights file), the
    checkpoint part of the key of its cached translations, both by label.

    Raises:
        CheckpointError: a ``best.pt`` or folder is missing, unreadable or not usable.
    """
    models: dict[str, Loaded | None] = {}
    digests: dict[str, str] = {}
    for r in runs:
        if r.action == "archived" and r.archived_sha256:
            models[r.label], digests[r.label] = None, r.archived_sha256
            continue
        # one read: the digest is of the bytes loaded, even if the file is replaced meanwhile
        # a shipped run's digest is that of its folder's model.safetensors
        loaded = load_checkpoint(r.checkpoint, with_digest=True)
        models[r.label], digests[r.label] = loaded, str(loaded.sha256)
    return models, digests


def cache_key(checkpoint_sha256: str, sources: list[str], decoding: Decoding) -> dict[str, Any]:
    """What cached translations of ``sources`` must have been made from to be reused (see
    the module docstring). Raises nothing."""
    return {
        "format": HYPS_FORMAT,
        "checkpoint_sha256": checkpoint_sha256,
        "sources_sha256": lines_sha256(sources),
        "lines": len(sources),
        "decoding": dataclasses.asdict(decoding),
        "translator": {"batch_size": BATCH_SIZE, "max_src_pieces": MAX_SOURCE_PIECES},
    }


def _stale(path: Path, want: dict[str, Any]) -> tuple[list[str] | None, str, str | None]:
    """(the cached translations in ``path``, "", None) when its key file matches ``want``,
    else (None, why they are not reused, the key entry that differs or None)."""
    try:
        got = json.loads(path.with_name(path.name + ".key.json").read_text(encoding="utf-8"))
        hyps = path.read_text(encoding="utf-8").split("\n")[:-1]
    except (OSError, ValueError):
        return (
            None,
            (
                "not cached yet"
                if not path.exists()
                else "cached translations without a readable key"
            ),
            None,
        )
    if not isinstance(got, dict) or not isinstance(got.get("key"), dict):
        return None, "cached translations without a readable key", None
    old: dict[str, Any] = got["key"]
    for k, v in want.items():
        if old.get(k) != v:
            what = {
                "checkpoint_sha256": "the checkpoint",
                "sources_sha256": "the source lines",
                "lines": "the source lines",
                "format": "the search's output format",
            }.get(k, f"the {k} settings")
            return None, f"cached translations are stale: {what} changed", k
    if got.get("hyps_sha256") != lines_sha256(hyps) or len(hyps) != want["lines"]:
        return None, "cached translations are not the lines their key records", None
    return hyps, "", None


def _translate(
    run: PlannedRun,
    loaded: Loaded | None,
    sources: list[str],
    decoding: Decoding,
    name: str,
    log: Callable[[str], None],
    checkpoint_sha256: str,
) -> list[str]:
    """Translations of ``sources``, cached beside the checkpoint (``hyps/{name}``, the
    greedy ones as ``hyps/{set}.txt``) and in the run's archive under the key
    :func:`cache_key`; ``loaded`` is None for an archived run. A shipped run (a model
    folder) has no run directory, and none is made for it: its translations are cached in
    the archive alone (without ``archive_dir``, not at all).

    Raises:
        StudyError: an archived run (no checkpoint) lacks these translations.
    """
    want = cache_key(checkpoint_sha256, sources, decoding)
    paths = [] if run.action == "shipped" else [run.out_dir / "hyps" / name]
    if run.archive is not None:
        paths.append(run.archive / "hyps" / name)
    why, changed = "no translation cache for a model folder without archive_dir", None
    for i, path in enumerate(paths):
        hyps, why_not, changed_key = _stale(path, want)
        if hyps is not None:
            for other in paths[i + 1 :]:  # a translation cached before the archive existed
                if _stale(other, want)[0] is None:
                    _write_hyps(other, hyps, want)
            return hyps
        # the archive's reason, when there is one, is the one that counts
        why, changed = why_not, changed_key
    if loaded is None and changed == "checkpoint_sha256" and run.archive:
        # with no checkpoint here the digest comes from checkpoint.json, so it is the
        # record, not the translations, that disagrees
        raise StudyError(
            f"{run.cfg.name}: the sha256 in {run.archive / 'checkpoint.json'} "
            f"({checkpoint_sha256[:12]}...) is not the checkpoint the archived "
            f"translations {paths[-1]} were made from; restore the file (e.g. "
            "git checkout -- it) or train the run again"
        )
    if loaded is None:
        raise StudyError(
            f"{run.cfg.name}: no checkpoint ({run.out_dir / BEST}) and the "
            f"archived translations {paths[-1]} cannot be used ({why}); "
            "train the run again"
        )
    log(
        f"{run.cfg.name}: translating {name} ({len(sources)} sentences, "
        f"{decoding.describe()}; {why})"
    )
    with torch.inference_mode():
        translator = Translator.from_loaded(
            loaded,
            decoding=decoding,
            batch_size=BATCH_SIZE,
            max_src_pieces=MAX_SOURCE_PIECES,
            warn=log,
        )
        out = translator.translate(sources)
    hyps = [" ".join(t.text.split()) for t in out]
    for warning in (
        truncation_warning(out, f"{run.cfg.name} on {name}"),
        unfinished_warning(out, f"{run.cfg.name} on {name}"),
    ):
        if warning:
            log(warning)
    for path in paths:
        _write_hyps(path, hyps, want)
    return hyps


def _write_hyps(path: Path, hyps: list[str], key: dict[str, Any]) -> None:
    """Write translations and then their key file (a crash between the two leaves a file
    no key vouches for)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(path.name + ".key.json").unlink(missing_ok=True)
    write_atomic(path, "".join(h + "\n" for h in hyps))
    write_atomic(
        path.with_name(path.name + ".key.json"),
        json.dumps({"key": key, "hyps_sha256": lines_sha256(hyps)}, indent=1),
    )


def decode(
    run: PlannedRun,
    loaded: Loaded | None,
    ts: TestSet,
    decoding: Decoding,
    log: Callable[[str], None],
    checkpoint_sha256: str,
) -> list[str]:
    """Translations of test set ``ts`` by ``run``'s model (``loaded``, read from the file
    whose SHA-256 is ``checkpoint_sha256``), from the cache when its key matches."""
    tag = _tag(decoding)
    name = f"{ts.name}.txt" if tag == "greedy" else f"{ts.name}.{tag}.txt"
    return _translate(run, loaded, ts.sources, decoding, name, log, checkpoint_sha256)


def choose_alpha(
    study: StudyConfig,
    run: PlannedRun,
    loaded: Loaded | None,
    log: Callable[[str], None],
    checkpoint_sha256: str,
) -> tuple[float, dict[str, float]]:
    """The GNMT alpha of ``study.alphas`` with the highest validation score under beam
    search of ``study.beam_size``, and the score of each (the mean of BLEU on the
    validation split and on it joined ``data.valid_join_ks`` at a time, the score training
    selected on; plain BLEU without joined validation). Test sets are never used."""
    d = run.cfg.data
    pairs = [p for p in read_split(d, d.valid_split) if p.src and p.tgt]
    sets = [("val", [p.src for p in pairs], [p.tgt for p in pairs])]
    if d.valid_join_ks:
        j = long_sentence_set(sets[0][1], sets[0][2], d.valid_join_ks)
        sets.append(("val_joined", j.sources, j.references))
    scores = {}
    for alpha in study.alphas:
        dec = beam_decoding(run.cfg, study.beam_size, alpha)
        bleus = [
            score(
                _translate(
                    run, loaded, src, dec, f"{name}.{_tag(dec)}.txt", log, checkpoint_sha256
                ),
                ref,
                src,
                ((1, None),),
            ).bleu
            for name, src, ref in sets
        ]
        scores[f"{alpha:g}"] = round(sum(bleus) / len(bleus), 2)
    best = max(study.alphas, key=lambda a: scores[f"{a:g}"])
    return best, scores


def report_decodings(
    study: StudyConfig,
    runs: list[PlannedRun],
    models: dict[str, Loaded | None],
    log: Callable[[str], None],
    digests: dict[str, str],
) -> tuple[dict[str, Decoding], dict[str, dict]]:
    """Each model's report decoding (beam search with its alpha chosen on val, or greedy
    when ``beam_size`` is 1) and the validation scores of the alphas tried; ``digests``:
    each checkpoint's SHA-256 by label (:func:`load_models`)."""
    decodings, choice = {}, {}
    for r in runs:
        loaded = models[r.label]
        if study.beam_size == 1:
            decodings[r.label] = greedy_decoding(r.cfg)
            continue
        alpha, scores = choose_alpha(study, r, loaded, log, digests[r.label])
        decodings[r.label] = beam_decoding(r.cfg, study.beam_size, alpha)
        choice[r.label] = {"alpha": alpha, "val_score_by_alpha": scores}
    return decodings, choice
