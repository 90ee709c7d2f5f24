"""``nmt heads``: what each attention head of a trained model looks at, on a test set: the
statistics of nmt/analysis/heads.py per head, heatmaps of the sentences whose heads agree
least, and with reference word alignments each head's precision, recall and AER
(nmt/analysis/heads_alignment.py); written as Markdown, JSON and PNG files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from nmt.analysis.heads_report import (
    analyse_models,
    check_inputs,
    clear_old_maps,
    load_models,
    maps_section,
    sentences_to_draw,
    statistics_section,
    write_json,
)


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
    show: Callable[[str], None] = lambda line: None,
) -> Path:
    """Analyse ``checkpoint`` (and each ``compare`` checkpoint) on a test set and write
    ``heads.md``, ``heads.json`` and per-head heatmaps ``heads_N.png`` to ``out_dir``.

    Heatmaps are drawn for ``sentences`` if given, else for the ``maps`` test sentences
    (8-25 words, no repetition loop) whose heads agree least; each compare model's map is
    drawn beside the heads for the same source. With ``join`` = k the test set is first
    joined k consecutive pairs at a time (long input, nmt/data/longsets.py). ``log`` hears
    one line per model before its decoding, which takes minutes on a full test set on CPU.
    With the reference word alignments (``alignments``, a directory of
    scripts/align_multi30k.py's files; None: data/alignments, found as
    :func:`nmt.data.stored.alignment_dir` finds it, left out with a ``log`` note when
    missing) and a named split (a ``_joined`` one or ``join`` too: the captions'
    alignments are joined alike), each head's precision, recall and AER against the
    reference alignment are added (nmt/analysis/heads_alignment.py), and their table goes
    to ``show`` line by line. Returns the Markdown path.

    ``out_dir``, every checkpoint and the reference file are checked before any decoding,
    and nothing is written into ``out_dir`` until every number is computed, so a bad input
    costs seconds and leaves an earlier report there whole.

    Raises:
        CheckpointError, DataError, DeviceError, HeadsError (a fixed-vector model, main or
            compared, no sentence, an empty ``--sentence``, a compare model of another
            language pair, an ``out_dir`` that cannot be written, ``join`` with a
            ``_joined`` split), AlignmentError (a given ``alignments`` that does not exist
            or comes without a split, a reference file that does not fit the test set).
    """
    from nmt.analysis.heads_alignment import alignment_section, find_reference
    from nmt.data.stored import ALIGNMENTS, alignment_dir, joinable_test_set
    from nmt.model.checkpoint import load_checkpoint
    from nmt.ops.device import pick_device

    check_inputs(out_dir, sentences)
    dev = pick_device(device, "--device")
    loaded = load_checkpoint(checkpoint, dev)
    models = load_models(checkpoint, loaded, compare, dev)
    test = joinable_test_set(loaded, split, src, ref, data_path, join)
    label = test.label
    sources = test.sources[:max_sentences] if max_sentences else test.sources
    references = test.references[: len(sources)]
    reference = find_reference(
        alignment_dir(ALIGNMENTS if alignments is None else alignments),
        test.split,
        (loaded.cfg.data.src_lang, loaded.cfg.data.tgt_lang),
        test.captions,
        test.ks,
        len(sources),
        given=alignments is not None,
        log=log,
    )
    analyses, per_model = analyse_models(
        models,
        sources,
        str(src or label),
        full_set=not max_sentences,
        batch_size=batch_size,
        log=log,
    )
    drawn = sentences_to_draw(loaded, sentences, analyses[0], per_model[0], maps)
    align_md, align_json, table = alignment_section(
        [(a.name, m) for a, (_p, m) in zip(analyses, models, strict=True)],
        (sources, references),
        reference,
        label,
        log=log,
        batch_size=batch_size,
    )
    clear_old_maps(out_dir)
    md = statistics_section(analyses, label)
    md += maps_section(drawn, [m for _p, m in models[1:]], out_dir, analyses[0].name)
    meta: dict[str, object] = {"checkpoint": str(checkpoint), "compare": list(map(str, compare))}
    meta |= {"test_set": label, "search": "greedy", "alignment": align_json}
    write_json(analyses, out_dir / "heads.json", meta)
    path = out_dir / "heads.md"
    path.write_text("\n".join(md + align_md) + "\n", encoding="utf-8")
    for line in table:
        show(line)
    return path
