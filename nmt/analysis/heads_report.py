"""The parts of ``nmt heads``' report below the command: every model's head statistics on
one test set, the heatmap section, and the JSON record. The command
(nmt/commands/heads.py) checks its inputs and composes these."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from nmt.analysis.heads import (
    HeadAnalysis,
    HeadsError,
    SentenceHeads,
    analyse,
    disagreeing_sentences,
    format_markdown,
    head_weights_of,
    model_name,
)
from nmt.model.checkpoint import Loaded
from nmt.ops.files import check_writable

INTRO = (
    "greedy search; weights read back "
    "by teacher forcing on each model's own hypothesis. Per head, over every target "
    "step: the entropy of its attention distribution and of a uniform one over the "
    "same source; the distance from its most attended source piece to the diagonal "
    "position t·(S-1)/(T-1), in pieces, as a share of the source length S, and signed "
    "(offset > 0: the head looks ahead of the diagonal); how "
    "often the most attended piece is the final `</s>` or punctuation."
)


def check_inputs(out_dir: Path, sentences: Sequence[str]) -> None:
    """Refuse, before any decoding, an ``--out`` that cannot be written (minutes of work
    would be lost) and an empty ``--sentence``.

    Raises:
        HeadsError: naming the option.
    """
    try:
        check_writable(out_dir, "--out", folder=True)
    except ValueError as e:
        raise HeadsError(str(e)) from None
    if any(not s.strip() for s in sentences):
        raise HeadsError("--sentence: an empty sentence has nothing to attend to")


def load_models(
    checkpoint: Path, loaded: Loaded, compare: Sequence[Path], device
) -> list[tuple[Path, Loaded]]:
    """(path, loaded checkpoint) of the model analysed and of every ``compare`` model, each
    loaded and checked before any decoding (a bad compare model used to fail only after
    the main model had decoded the whole test set): it must have attention and translate
    the main model's language pair.

    Raises:
        CheckpointError: a compare checkpoint that cannot be read (named).
        HeadsError: a model without attention or of another language pair (named).
    """
    from nmt.model.checkpoint import load_checkpoint

    models = [(checkpoint, loaded)] + [(p, load_checkpoint(p, device)) for p in compare]
    pair = (loaded.cfg.data.src_lang, loaded.cfg.data.tgt_lang)
    for n, (path, m) in enumerate(models):
        named = f"--compare {path}" if n else str(path)
        if m.model.decoder.scorer is None:
            raise HeadsError(
                f"{named}: the fixed-vector model (attention: none) has no attention weights "
                "to analyse or show beside the heads"
            )
        if (m.cfg.data.src_lang, m.cfg.data.tgt_lang) != pair:
            raise HeadsError(
                f"{named}: translates {m.cfg.data.src_lang}->{m.cfg.data.tgt_lang}, but "
                f"{checkpoint} translates {pair[0]}->{pair[1]}"
            )
    return models


def analyse_models(
    models: Sequence[tuple[Path, Loaded]],
    sources: list[str],
    label: str,
    *,
    full_set: bool,
    batch_size: int = 64,
    log: Callable[[str], None] = lambda message: None,
) -> tuple[list[HeadAnalysis], list[list[SentenceHeads]]]:
    """Decode ``sources`` greedily with each model and analyse its heads.

    Args:
        models: (checkpoint path, loaded checkpoint) pairs; the first is the model the
            report is about, the others are compared with it.
        sources: the test set's source sentences.
        label: the test set's name, for messages.
        full_set: whether ``sources`` is the whole test set (the log line then suggests
            ``--max-sentences``).
        batch_size: sentences per decoding batch.
        log: hears one line per model before its decoding (minutes on a full set on CPU).

    Returns:
        (one :class:`HeadAnalysis` per model, each model's per-sentence weights).

    Raises:
        HeadsError: a model that cannot be analysed (fixed-vector, no sentence); the
            message names the checkpoint and the test set. :func:`load_models` refuses
            the fixed-vector model and another language pair before any decoding.
    """
    analyses, per_model = [], []
    n = len(sources)
    for path, m in models:
        log(
            f"{path}: decoding {n} sentence{'' if n == 1 else 's'} of "
            f"{label} (greedy{'; --max-sentences N for fewer' if full_set else ''})"
        )
        try:
            sents = head_weights_of(
                m.model,
                m.src_vocab,
                m.tgt_vocab,
                sources,
                batch_size=batch_size,
                max_ratio=m.cfg.train.max_output_ratio,
            )
            analyses.append(analyse(sents, model_name(m.cfg), m.cfg.model.attention))
        except HeadsError as e:
            raise HeadsError(f"{path} on {label}: {e}") from None
        per_model.append(sents)
    return analyses, per_model


def sentences_to_draw(
    model: Loaded,
    sentences: Sequence[str],
    analysis: HeadAnalysis,
    decoded: list[SentenceHeads],
    maps: int,
) -> list[tuple[str, SentenceHeads]]:
    """The (source, heads) pairs to draw: each of ``sentences`` decoded by ``model`` if
    any are given, else the ``maps`` sentences of ``decoded`` whose heads agree least
    (:func:`disagreeing_sentences`, by ``analysis``)."""
    if sentences:
        return [
            (s, head_weights_of(model.model, model.src_vocab, model.tgt_vocab, [s])[0])
            for s in sentences
        ]
    return [(decoded[i].source, decoded[i]) for i in disagreeing_sentences(analysis, decoded, maps)]


def _shorten(text: str, limit: int = 70) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with "..."."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def clear_old_maps(out_dir: Path) -> None:
    """Create ``out_dir`` and delete the ``heads_N.png`` maps an earlier run left there
    (they would be read as this run's); no other file is touched.

    Raises:
        HeadsError: ``out_dir`` cannot be created or a map cannot be deleted (names it).
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("heads_*.png"):
            if re.fullmatch(r"heads_\d+\.png", old.name):
                old.unlink()
    except OSError as e:
        raise HeadsError(f"--out {out_dir}: cannot write there ({e.strerror or e})") from None


def maps_section(
    drawn: Sequence[tuple[str, SentenceHeads]],
    compare: Sequence[Loaded],
    out_dir: Path,
    title: str,
) -> list[str]:
    """Draw each sentence of ``drawn`` as ``out_dir/heads_N.png`` (one panel per head,
    then each ``compare`` model's head-mean map of the same source, decoded again) and
    return the Markdown lines that show them.

    Args:
        drawn: (source sentence, its :class:`SentenceHeads`) pairs; the heads' weights
            are (K, T, S).
        compare: the models drawn beside the heads.
        out_dir: an existing directory.
        title: the model's name, the start of every figure's title.

    Raises:
        OSError: a map cannot be written.
    """
    from nmt.evaluation.plots import plot_head_maps

    md: list[str] = []
    for n, (source, sent) in enumerate(drawn, 1):
        panels = [
            (f"head {k + 1}", sent.src_pieces, sent.tgt_pieces, sent.weights[k])
            for k in range(sent.weights.size(0))
        ]
        for m in compare:
            other = head_weights_of(m.model, m.src_vocab, m.tgt_vocab, [source])
            if other:
                o = other[0]
                panels.append((model_name(m.cfg), o.src_pieces, o.tgt_pieces, o.weights.mean(0)))
        name = f"heads_{n}.png"
        plot_head_maps(panels, out_dir / name, f"{title}: {_shorten(source)}")
        md += [
            "",
            f"**Sentence {n}** source: {source}  ",
            f"hypothesis: {sent.hypothesis}",
            "",
            f"![heads of sentence {n}]({name})",
        ]
    return md


def statistics_section(analyses: list[HeadAnalysis], label: str) -> list[str]:
    """The report's title, what was measured on ``label``, and the per-head table."""
    main = analyses[0]
    return [
        f"# Attention heads of {main.name}",
        "",
        f"Test set: {label}, {main.sentences} sentences, {INTRO}",
        "",
        format_markdown(analyses),
    ]


def write_json(analyses: list[HeadAnalysis], path: Path, meta: dict) -> Path:
    """``meta`` (commands, split, decoding) and every analysis as JSON at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**meta, "models": [a.to_json() for a in analyses]}, indent=2) + "\n",
        encoding="utf-8",
    )
    return path
