"""``nmt heads``: what each attention head of a trained model looks at.

The model translates a test set (greedy search); its per-head attention weights are then
read back by teacher forcing on its own hypotheses (the same weights the search saw,
dropout being off). Statistics per head, over every target step of every sentence:

* **entropy** of the head's distribution over source pieces (nats); beside it the entropy
  of a uniform distribution over the same sources (a head that spreads evenly reaches it);
* **diagonal distance**: for target step t of T and a source of S pieces, the distance in
  pieces between the head's most attended position and ``t * (S - 1) / (T - 1)``, the
  position a strictly proportional (diagonal) alignment would give; also as a share of S,
  and signed (**offset**: positive when the head looks ahead of the diagonal);
* **final** and **punctuation**: how often the most attended piece is the source's last
  position (``</s>``) or a punctuation piece;
* **agreement**: for each pair of heads, how often their most attended positions coincide;
* **alignment** (nmt/commands/heads_alignment.py): with a reference word alignment of the
  split, each head's alignment precision, recall and AER, read on the reference.

A model with one attention (any type but ``none``) is analysed as a single head, so a
multi-head model can be put beside a single-head one.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from nmt.config.schema import TrainConfig
from nmt.data.batches import Example, collate, make_batches
from nmt.data.vocab import EOS
from nmt.inference.search import greedy
from nmt.inference.translator import Translator


class HeadsError(ValueError):
    """Nothing to analyse or bad ``nmt heads`` input; the message names the checkpoint,
    file or option."""


@dataclass
class HeadStats:
    """One head's statistics, averaged over ``steps`` target steps (see module docstring).

    Attributes:
        entropy: nats. uniform_entropy: nats, log S averaged over the same steps.
        diagonal_distance: source pieces. diagonal_share: the same divided by S.
        diagonal_offset: signed mean, source pieces (> 0: ahead of the diagonal).
        final_share, punctuation_share: fractions of steps in [0, 1].
    """

    head: int
    entropy: float
    uniform_entropy: float
    diagonal_distance: float
    diagonal_share: float
    diagonal_offset: float
    final_share: float
    punctuation_share: float
    steps: int


@dataclass
class SentenceHeads:
    """Per-head weights of one translated sentence.

    Attributes:
        weights: (h, T, S) attention weights, T hypothesis pieces + ``</s>``, S source
            pieces + ``</s>``.
    """

    index: int
    source: str
    hypothesis: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    weights: torch.Tensor


@dataclass
class HeadAnalysis:
    """Everything ``nmt heads`` reports for one model."""

    name: str
    attention: str
    heads: int
    sentences: int
    stats: list[HeadStats]
    agreement: list[list[float]]  # (h, h): share of steps with the same argmax position
    per_sentence_agreement: list[float] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        """A JSON-ready dict (per-sentence agreement left out)."""
        d = asdict(self)
        d.pop("per_sentence_agreement")
        return d


def _is_punctuation(piece: str) -> bool:
    text = piece.replace("\u2581", "")
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


@torch.no_grad()
def head_weights_of(model, src_vocab, tgt_vocab, sources: list[str], *, batch_size: int = 64,
                    max_ratio: float = TrainConfig.max_output_ratio
                    ) -> list[SentenceHeads]:
    """Translate ``sources`` greedily and return each sentence's per-head weights.

    Empty sources are skipped. Returns one :class:`SentenceHeads` per non-empty source, in
    input order; ``weights`` is (h, T, S) with h = 1 for a single-attention model.

    Raises:
        HeadsError: the model is the fixed-vector model (no attention).
    """
    if model.decoder.scorer is None:
        raise HeadsError("this checkpoint is the fixed-vector model (attention: none); it "
                         "has no attention weights to analyse")
    device = next(model.parameters()).device
    model.eval()
    translator = Translator(model, src_vocab, tgt_vocab)  # its encoding and source limit
    examples = []
    for i, line in enumerate(sources):
        ids = translator.encode(line).ids
        if ids:
            examples.append(Example(ids + [EOS], [], i))
    out: dict[int, SentenceHeads] = {}
    for chunk in make_batches(examples, batch_size):
        batch = collate(chunk)
        src = batch.src.to(device)
        hyps = greedy(model, src, batch.src_len, max_ratio)
        forced = collate([Example(e.src, h.tokens, e.index)
                          for e, h in zip(chunk, hyps, strict=True)])
        per_head = model.head_weights(src, batch.src_len, forced.tgt_in.to(device))
        if per_head is None:  # one attention: (B, T, S) -> (B, 1, T, S)
            per_head = model.attention_weights(src, batch.src_len,
                                               forced.tgt_in.to(device)).unsqueeze(1)
        for b, (e, h) in enumerate(zip(chunk, hyps, strict=True)):
            T, S = len(h.tokens) + 1, len(e.src)
            out[e.index] = SentenceHeads(
                e.index, sources[e.index], tgt_vocab.decode(h.tokens),
                [src_vocab.id_to_piece(x) for x in e.src[:-1]] + ["</s>"],
                [tgt_vocab.id_to_piece(x) for x in h.tokens] + ["</s>"],
                per_head[b, :, :T, :S].float().cpu())
    return [out[i] for i in sorted(out)]


def _argmax_agreement(pos: torch.Tensor) -> torch.Tensor:
    """(h, T) argmax positions -> (h, h) counts of steps where two heads agree."""
    return (pos.unsqueeze(0) == pos.unsqueeze(1)).sum(dim=-1).float()


def analyse(sentences: list[SentenceHeads], name: str, attention: str) -> HeadAnalysis:
    """Per-head statistics over ``sentences`` (see the module docstring).

    Raises:
        HeadsError: no sentence to analyse.
    """
    if not sentences:
        raise HeadsError("no non-empty source sentence to analyse")
    h = sentences[0].weights.size(0)
    # entropy, uniform, distance, share, offset, final, punctuation
    sums = torch.zeros(h, 7, dtype=torch.float64)
    agree = torch.zeros(h, h, dtype=torch.float64)
    steps = 0
    per_sentence = []
    for sent in sentences:
        w = sent.weights  # (h, T, S)
        _, T, S = w.shape
        p = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-12)  # local_p rows sum below 1
        entropy = -(p * p.clamp_min(1e-12).log()).sum(dim=-1)  # (h, T)
        pos = w.argmax(dim=-1)  # (h, T)
        expected = torch.arange(T, dtype=torch.float64) * (S - 1) / max(T - 1, 1)  # (T,)
        signed = pos.double() - expected  # (h, T)
        dist = signed.abs()
        punct = torch.tensor([_is_punctuation(x) for x in sent.src_pieces])  # (S,)
        sums[:, 0] += entropy.double().sum(dim=-1)
        sums[:, 1] += T * torch.log(torch.tensor(float(S), dtype=torch.float64))
        sums[:, 2] += dist.sum(dim=-1)
        sums[:, 3] += (dist / S).sum(dim=-1)
        sums[:, 4] += signed.sum(dim=-1)
        sums[:, 5] += (pos == S - 1).double().sum(dim=-1)
        sums[:, 6] += punct[pos].double().sum(dim=-1)
        pair = _argmax_agreement(pos).double()
        agree += pair
        off = pair.sum() - pair.diagonal().sum()
        per_sentence.append(float(off / (T * h * (h - 1))) if h > 1 else 1.0)
        steps += T
    means = (sums / steps).tolist()
    stats = [HeadStats(*(i + 1, *means[i], steps)) for i in range(h)]
    return HeadAnalysis(name, attention, h, len(sentences), stats, (agree / steps).tolist(),
                        per_sentence)


def disagreeing_sentences(analysis: HeadAnalysis, sentences: list[SentenceHeads], n: int, *,
                          min_words: int = 8, max_words: int = 25) -> list[int]:
    """Positions in ``sentences`` of the ``n`` sentences of ``min_words``..``max_words``
    source words whose heads agree least (ties: the earlier sentence first). Sentences
    whose hypothesis has more than 1.5 times the source's words are left out: in a
    repetition loop every head disagrees, and that shows nothing about the heads."""
    fits = [i for i, s in enumerate(sentences)
            if min_words <= len(s.source.split()) <= max_words
            and len(s.hypothesis.split()) <= 1.5 * len(s.source.split())]
    fits.sort(key=lambda i: (analysis.per_sentence_agreement[i], i))
    return fits[:n]


def format_markdown(analyses: list[HeadAnalysis]) -> str:
    """The statistics of every model as Markdown tables (one row per head)."""
    lines = ["| model | head | entropy (nats) | uniform (nats) | diagonal distance (pieces) "
             "| diagonal share (distance / S) | offset (pieces, + = ahead) | on final `</s>` "
             "| on punctuation |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a in analyses:
        for s in a.stats:
            lines.append(f"| {a.name} | {s.head} | {s.entropy:.2f} | {s.uniform_entropy:.2f} | "
                         f"{s.diagonal_distance:.1f} | {s.diagonal_share:.2f} | "
                         f"{s.diagonal_offset:+.1f} | "
                         f"{s.final_share:.1%} | {s.punctuation_share:.1%} |")
    for a in analyses:
        if a.heads < 2:
            continue
        lines += ["", f"Head agreement of {a.name} (share of target steps where both heads' "
                  "most attended source piece is the same):", "",
                  "| | " + " | ".join(f"head {j + 1}" for j in range(a.heads)) + " |",
                  "| --- |" + " --- |" * a.heads]
        for i, row in enumerate(a.agreement):
            lines.append(f"| head {i + 1} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_json(analyses: list[HeadAnalysis], path: Path, meta: dict) -> Path:
    """``meta`` (commands, split, decoding) and every analysis as JSON at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**meta, "models": [a.to_json() for a in analyses]}, indent=2)
                    + "\n", encoding="utf-8")
    return path


def model_name(cfg) -> str:
    """The run name, with the head count for ``multihead``: ``deen_mh (4 heads)``."""
    if cfg.model.attention != "multihead":
        return cfg.name
    return f"{cfg.name} ({cfg.model.heads} head{'s' if cfg.model.heads != 1 else ''})"


def _shorten(text: str, limit: int = 70) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with "..."."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def _test_sources(loaded, split: str | None, src: Path | None, ref: Path | None,
                  data_path: str | None, join: int | None
                  ) -> tuple[str, list[str], list[str], list[str], list[str]]:
    """(label, sources, references) of the test set, joined ``join`` pairs at a time if
    given, then the captions' sources and references before joining.

    Raises:
        DataError (see :func:`nmt.commands.evaluate.test_set`), HeadsError (``join`` < 1 or more
        than the pairs of the test set).
    """
    from nmt.data.longsets import long_sentence_set
    from nmt.data.stored import test_set

    label, sources, references = test_set(loaded, split=split, src=src, ref=ref,
                                          data_path=data_path)
    if join is None:
        return label, sources, references, sources, references
    if join < 1:
        raise HeadsError(f"--join: expected k >= 1, got {join}")
    if join > len(sources):
        raise HeadsError(f"--join {join}: the test set has only {len(sources)} pairs")
    joined = long_sentence_set(sources, references, (join,))
    return (f"{label} joined {join} at a time", joined.sources, joined.references, sources,
            references)


def heads_report(checkpoint: Path, out_dir: Path, *, compare: Sequence[Path] = (),
                 split: str | None = None, src: Path | None = None, ref: Path | None = None,
                 data_path: str | None = None, max_sentences: int | None = None,
                 maps: int = 3, sentences: Sequence[str] = (), device: str = "auto",
                 batch_size: int = 64, join: int | None = None,
                 alignments: Path | None = None,
                 log: Callable[[str], None] = lambda message: None) -> Path:
    """Analyse ``checkpoint`` (and each ``compare`` checkpoint) on a test set and write
    ``heads.md``, ``heads.json`` and per-head heatmaps ``heads_N.png`` to ``out_dir``.

    Heatmaps are drawn for ``sentences`` if given, else for the ``maps`` test sentences
    (8-25 words, no repetition loop) whose heads agree least; each compare model's map is
    drawn beside the heads for the same source. With ``join`` = k the test set is first
    joined k consecutive pairs at a time (long input, nmt/data/longsets.py). ``log`` hears
    one line per model before its decoding, which takes minutes on a full test set on CPU.
    With ``alignments`` (a directory of scripts/align_multi30k.py's files) and a named
    split, each head's precision, recall and AER against the reference alignment are
    added (nmt/commands/heads_alignment.py). Returns the Markdown path.

    Raises:
        CheckpointError, DataError, DeviceError, HeadsError (fixed-vector model, no
            sentence, an empty ``--sentence``, a compare model of another language pair,
            an ``out_dir`` that cannot be written), AlignmentError (a reference file that
            does not fit the test set).
    """
    from nmt.commands.heads_alignment import alignment_section
    from nmt.evaluation.plots import plot_head_maps
    from nmt.model.checkpoint import load_checkpoint
    from nmt.ops.device import pick_device

    if out_dir.exists() and not out_dir.is_dir():
        raise HeadsError(f"--out {out_dir}: exists and is not a directory")
    sentences = list(sentences)
    if any(not s.strip() for s in sentences):
        raise HeadsError("--sentence: an empty sentence has nothing to attend to")
    dev = pick_device(device, "--device")
    loaded = load_checkpoint(checkpoint, dev)
    label, sources, references, cap_src, cap_ref = _test_sources(loaded, split, src, ref,
                                                                 data_path, join)
    sources = sources[:max_sentences] if max_sentences else sources
    references = references[:len(sources)]
    models = [(checkpoint, loaded)] + [(p, load_checkpoint(p, dev)) for p in compare]
    pair = (loaded.cfg.data.src_lang, loaded.cfg.data.tgt_lang)
    analyses, per_model = [], []
    for path, m in models:
        if (m.cfg.data.src_lang, m.cfg.data.tgt_lang) != pair:
            raise HeadsError(f"--compare {path}: translates {m.cfg.data.src_lang}->"
                             f"{m.cfg.data.tgt_lang}, but {checkpoint} translates "
                             f"{pair[0]}->{pair[1]}")
        log(f"{path}: decoding {len(sources)} sentence{'' if len(sources) == 1 else 's'} of "
            f"{src or label} (greedy{'' if max_sentences else '; --max-sentences N for fewer'})")
        try:
            sents = head_weights_of(m.model, m.src_vocab, m.tgt_vocab, sources,
                                    batch_size=batch_size, max_ratio=m.cfg.train.max_output_ratio)
            analyses.append(analyse(sents, model_name(m.cfg), m.cfg.model.attention))
        except HeadsError as e:
            raise HeadsError(f"{path} on {src or label}: {e}") from None
        per_model.append(sents)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("heads_*.png"):  # maps of an earlier run would mislead
            if re.fullmatch(r"heads_\d+\.png", old.name):  # only the files we write
                old.unlink()
    except OSError as e:
        raise HeadsError(f"--out {out_dir}: cannot write there ({e.strerror or e})") from None
    main, main_sents = analyses[0], per_model[0]
    if sentences:
        drawn = [(s, head_weights_of(loaded.model, loaded.src_vocab, loaded.tgt_vocab, [s])[0])
                 for s in sentences]
    else:
        drawn = [(main_sents[i].source, main_sents[i])
                 for i in disagreeing_sentences(main, main_sents, maps)]
    md = [f"# Attention heads of {main.name}", "",
          f"Test set: {label}, {main.sentences} sentences, greedy search; weights read back "
          "by teacher forcing on each model's own hypothesis. Per head, over every target "
          "step: the entropy of its attention distribution and of a uniform one over the "
          "same source; the distance from its most attended source piece to the diagonal "
          "position t·(S-1)/(T-1), in pieces, as a share of the source length S, and signed "
          "(offset > 0: the head looks ahead of the diagonal); how "
          "often the most attended piece is the final `</s>` or punctuation.", "",
          format_markdown(analyses)]
    for n, (source, sent) in enumerate(drawn, 1):
        panels = [(f"head {k + 1}", sent.src_pieces, sent.tgt_pieces, sent.weights[k])
                  for k in range(sent.weights.size(0))]
        for _path, m in models[1:]:
            other = head_weights_of(m.model, m.src_vocab, m.tgt_vocab, [source])
            if other:
                o = other[0]
                panels.append((model_name(m.cfg), o.src_pieces, o.tgt_pieces, o.weights.mean(0)))
        name = f"heads_{n}.png"
        plot_head_maps(panels, out_dir / name, f"{main.name}: {_shorten(source)}")
        md += ["", f"**Sentence {n}** source: {source}  ", f"hypothesis: {sent.hypothesis}", "",
               f"![heads of sentence {n}]({name})"]
    align_md, align_json = alignment_section(
        [(a.name, m) for a, (_p, m) in zip(analyses, models, strict=True)],
        (sources, references), (cap_src, cap_ref),
        None if src else label.split(" ")[0],  # the split's name: label starts with it
        join, alignments, label, log=log, batch_size=batch_size)
    path = out_dir / "heads.md"
    path.write_text("\n".join(md + align_md) + "\n", encoding="utf-8")
    write_json(analyses, out_dir / "heads.json",
               {"checkpoint": str(checkpoint), "compare": [str(p) for p in compare],
                "test_set": label, "search": "greedy", "alignment": align_json})
    return path
