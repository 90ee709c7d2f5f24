"""``nmt heads``: each head's agreement with reference word alignments (issue 49).

The reference is a Pharaoh file of the test split from a statistical aligner
(scripts/align_multi30k.py: eflomal, grow-diag-final-and), ``{dir}/{split}.{src}-{tgt}.gdfa``;
for a joined set (``--join k``, or a ``_joined`` split: k = 1..5) the captions' alignments are
concatenated with word offsets
(nmt/evaluation/alignment.py: long_alignments). To compare attention with an alignment of
the *reference* translation, the weights are read by teacher forcing the reference (not the
model's own hypothesis, as the other statistics are). Each target word is linked to its
most attended source word (pieces to words: nmt/evaluation/alignment.py), per head and, for
a multi-head model, for the mean over heads (what the decoder's context is built from).
Precision, recall and AER (Och & Ney 2003; the reference has sure links only, S = P) with
95% bootstrap intervals over sentences; each ``--compare`` model's AER minus the main
model's on the same resamples.

Sentences whose pieces do not give back the text's whitespace words (SentencePiece's
normalisation merged or split a word, or the source was cut at the translator's limit)
are left out and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt.data.batches import Example, collate
from nmt.data.bucketing import make_batches
from nmt.data.vocab import EOS
from nmt.evaluation.alignment import (
    RELATIONS,
    Alignment,
    AlignmentError,
    aer_interval,
    attention_links,
    check_bounds,
    count_matrix,
    long_alignments,
    paired_aer,
    piece_words,
    read_pharaoh,
    relations,
)
from nmt.evaluation.alignment import score as alignment_score
from nmt.evaluation.markdown import markdown_table
from nmt.inference.translator import Translator


@dataclass
class HeadAlignment:
    """One head's (or the head mean's) agreement: fractions in [0, 1], AER with its 95%
    bootstrap interval, and where its links fall against the reference (the share of its
    counted links per :data:`nmt.evaluation.alignment.RELATIONS`: aligned, next, previous,
    elsewhere; empty when none was counted)."""

    head: str  # "1".."h", or "mean" for the mean over a multi-head model's heads
    precision: float
    recall: float
    aer: float
    aer_low: float
    aer_high: float
    relations: dict[str, float] = field(default_factory=dict)


@dataclass
class ModelAlignment:
    """A model's agreement per head, and the per-sentence counts (N, 3) of its model-level
    row (the single head, or the head mean) for paired comparisons."""

    name: str
    sentences: int
    skipped: int
    rows: list[HeadAlignment]
    kept: list[int]  # indices of the sentences scored
    stats: np.ndarray  # (N, 3) |A|, |S|, |A ∩ S| of the model-level row

    def to_json(self) -> dict:
        """A JSON-ready dict (per-sentence counts left out)."""
        return {
            "name": self.name,
            "sentences": self.sentences,
            "skipped": self.skipped,
            "heads": [asdict(r) for r in self.rows],
        }


def reference_path(directory: Path, split: str, src_lang: str, tgt_lang: str) -> Path:
    """``{directory}/{split}.{src}-{tgt}.gdfa``, the file scripts/align_multi30k.py writes."""
    return directory / f"{split}.{src_lang}-{tgt_lang}.gdfa"


def load_reference(
    path: Path, sources: list[str], references: list[str], join: int | Sequence[int] | None
) -> list[Alignment]:
    """The reference alignment of each caption pair, joined ``join`` at a time if given (a
    sequence of k: the lines of each k in turn, as a ``_joined`` split's).

    Raises:
        AlignmentError: unreadable or malformed file, a line count or a link that does not
            fit the test set (named).
    """
    aligns = read_pharaoh(path)
    if len(aligns) != len(sources):
        raise AlignmentError(f"{path}: {len(aligns)} lines for a test set of {len(sources)} pairs")
    for n, (a, s, r) in enumerate(zip(aligns, sources, references, strict=True), 1):
        check_bounds(a, len(s.split()), len(r.split()), f"{path}, line {n}")
    if not join:
        return aligns
    return long_alignments(aligns, sources, references, (join,) if isinstance(join, int) else join)


@torch.no_grad()
def forced_weights(
    model, src_vocab, tgt_vocab, sources: list[str], references: list[str], *, batch_size: int = 64
) -> dict[int, tuple[torch.Tensor, list[str], list[str]]]:
    """Per-head weights (h, T, S) read by teacher forcing each reference, with the source
    and target pieces (each ending in ``</s>``), by sentence index; sentences whose pieces
    do not map to the whitespace words of their text are left out."""
    device = next(model.parameters()).device
    model.eval()
    translator = Translator(model, src_vocab, tgt_vocab)
    examples, pieces = [], {}
    for i, (s, r) in enumerate(zip(sources, references, strict=True)):
        src_ids, tgt_ids = translator.encode(s).ids, tgt_vocab.encode(r)
        sp = src_vocab.id_to_pieces(src_ids)
        tp = tgt_vocab.id_to_pieces(tgt_ids)
        if (
            not src_ids
            or not tgt_ids
            or _words(sp) != len(s.split())
            or _words(tp) != len(r.split())
        ):
            continue
        examples.append(Example(src_ids + [EOS], tgt_ids, i))
        pieces[i] = (sp + ["</s>"], tp + ["</s>"])
    out = {}
    for chunk in make_batches(examples, batch_size):
        batch = collate(chunk)
        src, tgt_in = batch.src.to(device), batch.tgt_in.to(device)
        per_head = model.head_weights(src, batch.src_len, tgt_in)
        if per_head is None:  # one attention: (B, T, S) -> (B, 1, T, S)
            per_head = model.attention_weights(src, batch.src_len, tgt_in).unsqueeze(1)
        for b, e in enumerate(chunk):
            T, S = len(e.tgt) + 1, len(e.src)
            sp, tp = pieces[e.index]
            out[e.index] = (per_head[b, :, :T, :S].float().cpu(), sp, tp)
    return out


def _words(pieces: list[str]) -> int:
    return piece_words(pieces)[-1] + 1 if pieces else 0


def head_links(
    weights: torch.Tensor, src_pieces: list[str], tgt_pieces: list[str]
) -> list[tuple[str, Alignment]]:
    """Each head's word links (:func:`nmt.evaluation.alignment.attention_links`) from the
    per-head weights (h, T, S) of one sentence, named "1".."h", then the mean over heads
    ("mean", what the decoder's context is built from) when h > 1."""
    h = weights.size(0)
    maps = [(str(k + 1), weights[k]) for k in range(h)]
    if h > 1:
        maps.append(("mean", weights.mean(0)))
    return [
        (name, attention_links(m.numpy().astype(np.float64), src_pieces, tgt_pieces))
        for name, m in maps
    ]


def model_alignment(
    name: str,
    weights: dict[int, tuple[torch.Tensor, list[str], list[str]]],
    reference: list[Alignment],
    *,
    n_samples: int = 1000,
    seed: int = 12345,
) -> ModelAlignment:
    """Per-head (and head-mean) agreement of ``weights`` (from :func:`forced_weights`) with
    ``reference`` (one alignment per test sentence).

    Raises:
        AlignmentError: no sentence could be scored.
    """
    kept = sorted(weights)
    if not kept:
        raise AlignmentError("no sentence's pieces map to its words; nothing to score")
    names = [name for name, _ in head_links(*weights[kept[0]])]
    links: list[list[Alignment]] = [[] for _ in names]
    for i in kept:
        for row, (_, a) in zip(links, head_links(*weights[i]), strict=True):
            row.append(a)
    ref = [reference[i] for i in kept]
    rows, stats = [], np.zeros((len(kept), 3))
    for label, pred in zip(names, links, strict=True):
        s = alignment_score(pred, ref)
        stats = count_matrix(pred, ref)
        iv = aer_interval(stats, n_samples, seed)
        where = np.array([relations(p, r) for p, r in zip(pred, ref, strict=True)]).sum(0)
        shares = {k: float(n / where.sum()) for k, n in zip(RELATIONS, where, strict=True)}
        rows.append(
            HeadAlignment(
                label,
                s.precision,
                s.recall,
                s.aer,
                iv.low,
                iv.high,
                shares if where.sum() else {},
            )
        )
    # stats is now the last row's: the single head, or the mean over heads
    return ModelAlignment(name, len(kept), len(reference) - len(kept), rows, kept, stats)


def agreement_table(models: list[ModelAlignment]) -> list[str]:
    """Markdown rows: every model's heads' precision, recall and AER [95% CI]."""
    return markdown_table(
        ["model", "head", "precision", "recall", "AER [95% CI]", "sentences (skipped)"],
        (
            [
                m.name,
                r.head,
                f"{r.precision:.1%}",
                f"{r.recall:.1%}",
                f"{r.aer:.1%} [{r.aer_low:.1%}, {r.aer_high:.1%}]",
                f"{m.sentences} ({m.skipped})",
            ]
            for m in models
            for r in m.rows
        ),
    )


def format_alignment(
    models: list[ModelAlignment],
    label: str,
    path: Path,
    *,
    n_samples: int = 1000,
    seed: int = 12345,
) -> list[str]:
    """Markdown: a table of every head's precision, recall and AER, then each compare model
    against the first (paired bootstrap on the sentences both scored)."""
    md = [
        "",
        "## Agreement with reference word alignments",
        "",
        f"Reference: {path} (statistical aligner, grow-diag-final-and; "
        "results/alignments/). Weights read by teacher forcing the reference; each "
        "target word (`</s>` skipped) linked to its most attended source word, a word's "
        "weight being the sum over its source pieces and the mean over its target "
        "pieces. Sure links only (S = P), so AER = 1 - F1. 95% bootstrap intervals "
        f"over sentences ({n_samples} resamples). {label}.",
        "",
    ]
    md += agreement_table(models)
    md += [
        "",
        "Where each head's links fall against the reference links of the same target word, "
        "among target words that have a reference link: on a linked source word (aligned), "
        "on the word right after one (next), right before one (previous), or elsewhere.",
        "",
    ]
    md += markdown_table(
        ["model", "head", *RELATIONS],
        (
            [m.name, r.head, *(f"{r.relations.get(k, 0.0):.1%}" for k in RELATIONS)]
            for m in models
            for r in m.rows
        ),
    )
    if len(models) > 1:
        md += _paired_section(models, n_samples=n_samples, seed=seed)
    return md


def _paired_section(models: list[ModelAlignment], *, n_samples: int, seed: int) -> list[str]:
    """Markdown: each of ``models[1:]`` against ``models[0]``, AER difference with a paired
    bootstrap interval and p over the sentences both scored (:func:`paired_aer`)."""
    md = [
        "",
        f"AER of each model (head mean for multi-head) minus {models[0].name}'s, "
        "paired on the same resamples of the sentences both scored; p: the share of "
        f"resamples where its AER is not lower than {models[0].name}'s (one-sided: near 0 "
        "it aligns better, near 1 worse).",
        "",
        "| model | ΔAER [95% CI] | p | sentences |",
        "| --- | --- | --- | --- |",
    ]
    base = models[0]
    for m in models[1:]:
        common = sorted(set(base.kept) & set(m.kept))
        if not common:
            md.append(f"| {m.name} | no sentence scored for both | | 0 |")
            continue
        bi = {i: n for n, i in enumerate(base.kept)}
        mi = {i: n for n, i in enumerate(m.kept)}
        pr = paired_aer(
            base.stats[[bi[i] for i in common]],
            m.stats[[mi[i] for i in common]],
            n_samples,
            seed,
        )
        md.append(
            f"| {m.name} | {pr.delta:+.1%} [{pr.low:+.1%}, {pr.high:+.1%}] | "
            f"{pr.p_value:.3f} | {len(common)} |"
        )
    return md


def find_reference(
    directory: Path | None,
    split: str | None,
    pair: tuple[str, str],
    captions: tuple[list[str], list[str]],
    ks: Sequence[int] | None,
    n_lines: int,
    *,
    given: bool = True,
    log=lambda message: None,
) -> tuple[Path, list[Alignment]] | None:
    """The reference alignment of the test set analysed, read and checked before any
    decoding (a file that does not fit fails in seconds, not after minutes): ``pair``
    (source, target language), ``captions`` the split's lines before joining, ``ks`` the
    joins that made the test set (None: none), ``n_lines`` its lines used; ``given``:
    whether the user named ``directory`` (``--alignments``) or it is the default. None,
    and one line to ``log``, when there is no directory, no file of the split, or (the
    default folder) no split or no folder.

    Raises:
        AlignmentError: ``directory`` is a file; a given ``directory`` that does not
            exist, or given with no split (--src/--ref files); a malformed reference file
            or one that does not fit the test set.
    """
    if directory is None:
        return None
    why = "AER needs --split (a reference alignment is of a split's lines, not --src/--ref files)"
    if split is None and given:
        raise AlignmentError(f"--alignments {directory}: {why}")
    if directory.exists() and not directory.is_dir():
        raise AlignmentError(
            f"--alignments {directory}: not a directory (give the folder of "
            "scripts/align_multi30k.py's {split}.{src}-{tgt}.gdfa files)"
        )
    if given and not directory.exists():
        raise AlignmentError(
            f"--alignments {directory}: no such directory (scripts/align_multi30k.py "
            "--out DIR writes one)"
        )
    if split is None:
        log(f"alignment precision, recall and AER left out: {why}")
        return None
    path = reference_path(directory, split, *pair)
    if not path.exists():
        log(
            f"no reference alignment {path} (scripts/align_multi30k.py writes it): "
            "alignment precision, recall and AER left out"
        )
        return None
    return path, load_reference(path, *captions, ks)[:n_lines]


def alignment_section(
    models: list[tuple[str, Any]],
    test: tuple[list[str], list[str]],
    reference: tuple[Path, list[Alignment]] | None,
    label: str,
    *,
    log=lambda message: None,
    batch_size: int = 64,
    n_samples: int = 1000,
) -> tuple[list[str], list[dict], list[str]]:
    """The Markdown section, the JSON records and the terminal's table (precision, recall
    and AER per model and head, then each compare model's paired AER difference) of every
    model's agreement with the reference alignment (:func:`find_reference`: its path and
    links; None: nothing). ``models``: (name, loaded checkpoint); ``test``: the (perhaps
    joined and cut) sources and references analysed. Raises nothing of its own.
    """
    if reference is None:
        return [], [], []
    path, links = reference
    scored = []
    for name, m in models:
        log(f"{name}: attention on the references of {label}, against {path}")
        w = forced_weights(m.model, m.src_vocab, m.tgt_vocab, *test, batch_size=batch_size)
        scored.append(model_alignment(name, w, links, n_samples=n_samples))
    md = format_alignment(scored, label, path, n_samples=n_samples)
    table = [f"Agreement with the reference alignment {path}, {label}:", *agreement_table(scored)]
    paired = [k for k, line in enumerate(md) if line.startswith("| model | ΔAER")]
    if paired:  # the compare models' paired AER differences: the section's last table
        table += ["", *md[paired[0] :]]
    return md, [s.to_json() for s in scored], table
