"""What a study report decodes and how: its test sets (the splits and their joined
long-sentence sets) and each model's search, greedy or beam with the GNMT alpha chosen on
validation; translations are cached beside each checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.commands.study_plan import PlannedRun
from nmt.config.schema import StudyConfig
from nmt.data.corpus import DataError, read_split
from nmt.data.longsets import long_sentence_set
from nmt.evaluation.metrics import score
from nmt.inference.translate import Decoding, truncation_warning
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded


@dataclass
class TestSet:
    """Sources and references of one evaluation set; ``note`` says how it was built."""

    name: str
    sources: list[str]
    references: list[str]
    note: str


def load_test_sets(study: StudyConfig, loaded: Loaded, log: Callable[[str], None]) -> list[TestSet]:
    """The named test splits (a missing one is skipped with a note) and the joined set."""
    sets, by_name = [], {}
    for split in study.test_splits:
        try:
            pairs = read_split(loaded.cfg.data, split)
        except DataError as e:
            log(f"warning: test split {split} skipped: {e}")
            continue
        ts = TestSet(split, [p.src for p in pairs], [p.tgt for p in pairs], "as distributed")
        sets.append(ts)
        by_name[split] = ts
    for long_split in dict.fromkeys([study.long_set_split, *study.long_set_splits]):
        if long_split:
            sets.append(_joined_set(study, loaded, long_split, by_name.get(long_split)))
    return sets


def _joined_set(study: StudyConfig, loaded: Loaded, split: str, base: TestSet | None) -> TestSet:
    """``split`` with k = ``study.join_ks`` consecutive pairs joined."""
    if base is None:
        pairs = read_split(loaded.cfg.data, split)
        base = TestSet(split, [p.src for p in pairs], [p.tgt for p in pairs], "")
    joined = long_sentence_set(base.sources, base.references, study.join_ks)
    ks = ", ".join(map(str, study.join_ks))
    return TestSet(f"{split}_joined", joined.sources, joined.references,
                   f"{split} with k = {ks} consecutive pairs joined "
                   f"(source to source, reference to reference): {len(joined)} lines")


def greedy_decoding(loaded: Loaded) -> Decoding:
    """Greedy search with fp32 matrix products (the same result on every CPU)."""
    return Decoding(beam_size=1, precision="fp32", max_ratio=loaded.cfg.train.max_output_ratio)


def beam_decoding(loaded: Loaded, beam: int, alpha: float) -> Decoding:
    """Beam search with the GNMT length penalty ``alpha``, fp32 matrix products."""
    return Decoding(beam_size=beam, alpha=alpha, length_penalty="gnmt", precision="fp32",
                    max_ratio=loaded.cfg.train.max_output_ratio)


def _tag(decoding: Decoding) -> str:
    """The cache name of a decoding: ``greedy`` or ``beam5_a1``."""
    return "greedy" if decoding.beam_size == 1 else f"beam{decoding.beam_size}_a{decoding.alpha:g}"


def _cached(run: PlannedRun, name: str) -> Path | None:
    """The cache file ``hyps/{name}`` of ``run``, when it is newer than best.pt."""
    cache = run.out_dir / "hyps" / name
    fresh = cache.exists() and cache.stat().st_mtime >= (run.out_dir / "best.pt").stat().st_mtime
    return cache if fresh else None


def _translate(run: PlannedRun, loaded: Loaded, sources: list[str], decoding: Decoding,
               name: str, log: Callable[[str], None]) -> list[str]:
    """Translations of ``sources``, cached beside the checkpoint (``hyps/{name}``, the
    greedy ones as ``hyps/{set}.txt``) until best.pt changes."""
    cache = _cached(run, name)
    if cache is not None:
        hyps = cache.read_text(encoding="utf-8").split("\n")[:-1]
        if len(hyps) == len(sources):
            return hyps
    log(f"{run.cfg.name}: translating {name} ({len(sources)} sentences, {decoding.describe()})")
    with torch.inference_mode():
        translator = Translator(loaded.model, loaded.src_vocab, loaded.tgt_vocab, decoding)
        out = translator.translate(sources)
    hyps = [" ".join(t.text.split()) for t in out]
    warning = truncation_warning(out, f"{run.cfg.name} on {name}")
    if warning:
        log(warning)
    path = run.out_dir / "hyps" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    return hyps


def decode(run: PlannedRun, loaded: Loaded, ts: TestSet, decoding: Decoding,
            log: Callable[[str], None]) -> list[str]:
    tag = _tag(decoding)
    name = f"{ts.name}.txt" if tag == "greedy" else f"{ts.name}.{tag}.txt"
    return _translate(run, loaded, ts.sources, decoding, name, log)


def choose_alpha(study: StudyConfig, run: PlannedRun, loaded: Loaded,
                 log: Callable[[str], None]) -> tuple[float, dict[str, float]]:
    """The GNMT alpha of ``study.alphas`` with the highest validation score under beam
    search of ``study.beam_size``, and the score of each (the mean of BLEU on the
    validation split and on it joined ``data.valid_join_ks`` at a time, the score training
    selected on; plain BLEU without joined validation). Test sets are never used."""
    d = loaded.cfg.data
    pairs = [p for p in read_split(d, d.valid_split) if p.src and p.tgt]
    sets = [("val", [p.src for p in pairs], [p.tgt for p in pairs])]
    if d.valid_join_ks:
        j = long_sentence_set(sets[0][1], sets[0][2], d.valid_join_ks)
        sets.append(("val_joined", j.sources, j.references))
    scores = {}
    for alpha in study.alphas:
        dec = beam_decoding(loaded, study.beam_size, alpha)
        bleus = [score(_translate(run, loaded, src, dec, f"{name}.{_tag(dec)}.txt", log), ref,
                       src, ((1, None),)).bleu for name, src, ref in sets]
        scores[f"{alpha:g}"] = round(sum(bleus) / len(bleus), 2)
    best = max(study.alphas, key=lambda a: scores[f"{a:g}"])
    return best, scores


def report_decodings(study: StudyConfig, runs: list[PlannedRun], models: dict[str, Loaded],
               log: Callable[[str], None]) -> tuple[dict[str, Decoding], dict[str, dict]]:
    """Each model's report decoding (beam search with its alpha chosen on val, or greedy
    when ``beam_size`` is 1) and the validation scores of the alphas tried."""
    decodings, choice = {}, {}
    for r in runs:
        loaded = models[r.label]
        if study.beam_size == 1:
            decodings[r.label] = greedy_decoding(loaded)
            continue
        alpha, scores = choose_alpha(study, r, loaded, log)
        decodings[r.label] = beam_decoding(loaded, study.beam_size, alpha)
        choice[r.label] = {"alpha": alpha, "val_score_by_alpha": scores}
    return decodings, choice
