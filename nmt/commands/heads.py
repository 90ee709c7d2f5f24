"""``nmt heads``: what each attention head of a trained model looks at, on a test set: the
statistics of nmt/analysis/heads.py per head, heatmaps of the sentences whose heads agree
least, and with reference word alignments each head's precision, recall and AER
(nmt/analysis/heads_alignment.py); written as Markdown, JSON and PNG files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from nmt.analysis.heads import (
    HeadAnalysis,
    HeadsError,
    analyse,
    disagreeing_sentences,
    format_markdown,
    head_weights_of,
    model_name,
)
from nmt.ops.files import check_writable


def write_json(analyses: list[HeadAnalysis], path: Path, meta: dict) -> Path:
    """``meta`` (commands, split, decoding) and every analysis as JSON at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**meta, "models": [a.to_json() for a in analyses]}, indent=2) + "\n",
        encoding="utf-8",
    )
    return path


def _shorten(text: str, limit: int = 70) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with "..."."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def heads_report(
    checkpoint: Path,
    out_dir: Path,
    *,
    compare: Sequence[Path] = (),
    split: str | None = None,
    src: Path | None = None,
    ref: Path | None = None,
    data_path: str | None = None,
    max_sentences: int | None = None,
    maps: int = 3,
    sentences: Sequence[str] = (),
    device: str = "auto",
    batch_size: int = 64,
    join: int | None = None,
    alignments: Path | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> Path:
    """Analyse ``checkpoint`` (and each ``compare`` checkpoint) on a test set and write
    ``heads.md``, ``heads.json`` and per-head heatmaps ``heads_N.png`` to ``out_dir``.

    Heatmaps are drawn for ``sentences`` if given, else for the ``maps`` test sentences
    (8-25 words, no repetition loop) whose heads agree least; each compare model's map is
    drawn beside the heads for the same source. With ``join`` = k the test set is first
    joined k consecutive pairs at a time (long input, nmt/data/longsets.py). ``log`` hears
    one line per model before its decoding, which takes minutes on a full test set on CPU.
    With ``alignments`` (a directory of scripts/align_multi30k.py's files) and a named
    split (a ``_joined`` one or ``join`` too: the captions' alignments are joined alike),
    each head's precision, recall and AER against the reference alignment are added
    (nmt/analysis/heads_alignment.py). Returns the Markdown path.

    ``out_dir`` and the reference file are checked before any decoding, and nothing is
    written into ``out_dir`` until every number is computed, so a bad input costs seconds
    and leaves an earlier report there whole.

    Raises:
        CheckpointError, DataError, DeviceError, HeadsError (fixed-vector model, no
            sentence, an empty ``--sentence``, a compare model of another language pair,
            an ``out_dir`` that cannot be written, ``join`` with a ``_joined`` split),
            AlignmentError (a reference file that does not fit the test set).
    """
    from nmt.analysis.heads_alignment import alignment_section, find_reference
    from nmt.data.stored import joinable_test_set
    from nmt.evaluation.plots import plot_head_maps
    from nmt.model.checkpoint import load_checkpoint
    from nmt.ops.device import pick_device

    try:  # before decoding: an output that cannot be written loses minutes of work
        check_writable(out_dir, "--out", folder=True)
    except ValueError as e:
        raise HeadsError(str(e)) from None
    sentences = list(sentences)
    if any(not s.strip() for s in sentences):
        raise HeadsError("--sentence: an empty sentence has nothing to attend to")
    dev = pick_device(device, "--device")
    loaded = load_checkpoint(checkpoint, dev)
    test = joinable_test_set(loaded, split, src, ref, data_path, join)
    label = test.label
    sources = test.sources[:max_sentences] if max_sentences else test.sources
    references = test.references[: len(sources)]
    reference = find_reference(
        alignments,
        test.split,
        (loaded.cfg.data.src_lang, loaded.cfg.data.tgt_lang),
        test.captions,
        test.ks,
        len(sources),
        log=log,
    )
    models = [(checkpoint, loaded)] + [(p, load_checkpoint(p, dev)) for p in compare]
    pair = (loaded.cfg.data.src_lang, loaded.cfg.data.tgt_lang)
    analyses, per_model = [], []
    for path, m in models:
        if (m.cfg.data.src_lang, m.cfg.data.tgt_lang) != pair:
            raise HeadsError(
                f"--compare {path}: translates {m.cfg.data.src_lang}->"
                f"{m.cfg.data.tgt_lang}, but {checkpoint} translates "
                f"{pair[0]}->{pair[1]}"
            )
        log(
            f"{path}: decoding {len(sources)} sentence{'' if len(sources) == 1 else 's'} of "
            f"{src or label} (greedy{'' if max_sentences else '; --max-sentences N for fewer'})"
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
            raise HeadsError(f"{path} on {src or label}: {e}") from None
        per_model.append(sents)
    main, main_sents = analyses[0], per_model[0]
    if sentences:
        drawn = [
            (s, head_weights_of(loaded.model, loaded.src_vocab, loaded.tgt_vocab, [s])[0])
            for s in sentences
        ]
    else:
        drawn = [
            (main_sents[i].source, main_sents[i])
            for i in disagreeing_sentences(main, main_sents, maps)
        ]
    align_md, align_json = alignment_section(
        [(a.name, m) for a, (_p, m) in zip(analyses, models, strict=True)],
        (sources, references),
        reference,
        label,
        log=log,
        batch_size=batch_size,
    )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("heads_*.png"):  # maps of an earlier run would mislead
            if re.fullmatch(r"heads_\d+\.png", old.name):  # only the files we write
                old.unlink()
    except OSError as e:
        raise HeadsError(f"--out {out_dir}: cannot write there ({e.strerror or e})") from None
    md = [
        f"# Attention heads of {main.name}",
        "",
        f"Test set: {label}, {main.sentences} sentences, greedy search; weights read back "
        "by teacher forcing on each model's own hypothesis. Per head, over every target "
        "step: the entropy of its attention distribution and of a uniform one over the "
        "same source; the distance from its most attended source piece to the diagonal "
        "position t·(S-1)/(T-1), in pieces, as a share of the source length S, and signed "
        "(offset > 0: the head looks ahead of the diagonal); how "
        "often the most attended piece is the final `</s>` or punctuation.",
        "",
        format_markdown(analyses),
    ]
    for n, (source, sent) in enumerate(drawn, 1):
        panels = [
            (f"head {k + 1}", sent.src_pieces, sent.tgt_pieces, sent.weights[k])
            for k in range(sent.weights.size(0))
        ]
        for _path, m in models[1:]:
            other = head_weights_of(m.model, m.src_vocab, m.tgt_vocab, [source])
            if other:
                o = other[0]
                panels.append((model_name(m.cfg), o.src_pieces, o.tgt_pieces, o.weights.mean(0)))
        name = f"heads_{n}.png"
        plot_head_maps(panels, out_dir / name, f"{main.name}: {_shorten(source)}")
        md += [
            "",
            f"**Sentence {n}** source: {source}  ",
            f"hypothesis: {sent.hypothesis}",
            "",
            f"![heads of sentence {n}]({name})",
        ]
    path = out_dir / "heads.md"
    path.write_text("\n".join(md + align_md) + "\n", encoding="utf-8")
    write_json(
        analyses,
        out_dir / "heads.json",
        {
            "checkpoint": str(checkpoint),
            "compare": [str(p) for p in compare],
            "test_set": label,
            "search": "greedy",
            "alignment": align_json,
        },
    )
    return path
