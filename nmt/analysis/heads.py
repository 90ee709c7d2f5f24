"""What each attention head of a trained model looks at (``nmt heads``, composed in
nmt/commands/heads.py).

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
* **alignment** (nmt/analysis/heads_alignment.py): with a reference word alignment of the
  split, each head's alignment precision, recall and AER, read on the reference.

A model with one attention (any type but ``none``) is analysed as a single head, so a
multi-head model can be put beside a single-head one.
"""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass, field

import torch

from nmt.config.schema import TrainConfig
from nmt.data.batches import Example, collate
from nmt.data.bucketing import make_batches
from nmt.data.vocab import EOS
from nmt.evaluation.markdown import markdown_table
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
def head_weights_of(
    model,
    src_vocab,
    tgt_vocab,
    sources: list[str],
    *,
    batch_size: int = 64,
    max_ratio: float = TrainConfig.max_output_ratio,
) -> list[SentenceHeads]:
    """Translate ``sources`` greedily and return each sentence's per-head weights.

    Empty sources are skipped. Returns one :class:`SentenceHeads` per non-empty source, in
    input order; ``weights`` is (h, T, S) with h = 1 for a single-attention model.

    Raises:
        HeadsError: the model is the fixed-vector model (no attention).
    """
    if model.decoder.scorer is None:
        raise HeadsError(
            "this checkpoint is the fixed-vector model (attention: none); it "
            "has no attention weights to analyse"
        )
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
        forced = collate(
            [Example(e.src, h.tokens, e.index) for e, h in zip(chunk, hyps, strict=True)]
        )
        per_head = model.head_weights(src, batch.src_len, forced.tgt_in.to(device))
        if per_head is None:  # one attention: (B, T, S) -> (B, 1, T, S)
            per_head = model.attention_weights(
                src, batch.src_len, forced.tgt_in.to(device)
            ).unsqueeze(1)
        for b, (e, h) in enumerate(zip(chunk, hyps, strict=True)):
            T, S = len(h.tokens) + 1, len(e.src)
            out[e.index] = SentenceHeads(
                e.index,
                sources[e.index],
                tgt_vocab.decode(h.tokens),
                src_vocab.id_to_pieces(e.src[:-1]) + ["</s>"],
                tgt_vocab.id_to_pieces(h.tokens) + ["</s>"],
                per_head[b, :, :T, :S].float().cpu(),
            )
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
    return HeadAnalysis(
        name, attention, h, len(sentences), stats, (agree / steps).tolist(), per_sentence
    )


def disagreeing_sentences(
    analysis: HeadAnalysis,
    sentences: list[SentenceHeads],
    n: int,
    *,
    min_words: int = 8,
    max_words: int = 25,
) -> list[int]:
    """Positions in ``sentences`` of the ``n`` sentences of ``min_words``..``max_words``
    source words whose heads agree least (ties: the earlier sentence first). Sentences
    whose hypothesis has more than 1.5 times the source's words are left out: in a
    repetition loop every head disagrees, and that shows nothing about the heads."""
    fits = [
        i
        for i, s in enumerate(sentences)
        if min_words <= len(s.source.split()) <= max_words
        and len(s.hypothesis.split()) <= 1.5 * len(s.source.split())
    ]
    fits.sort(key=lambda i: (analysis.per_sentence_agreement[i], i))
    return fits[:n]


def format_markdown(analyses: list[HeadAnalysis]) -> str:
    """The statistics of every model as Markdown tables (one row per head)."""
    header = [
        "model",
        "head",
        "entropy (nats)",
        "uniform (nats)",
        "diagonal distance (pieces)",
        "diagonal share (distance / S)",
        "offset (pieces, + = ahead)",
        "on final `</s>`",
        "on punctuation",
    ]
    lines = markdown_table(
        header,
        (
            [
                a.name,
                s.head,
                f"{s.entropy:.2f}",
                f"{s.uniform_entropy:.2f}",
                f"{s.diagonal_distance:.1f}",
                f"{s.diagonal_share:.2f}",
                f"{s.diagonal_offset:+.1f}",
                f"{s.final_share:.1%}",
                f"{s.punctuation_share:.1%}",
            ]
            for a in analyses
            for s in a.stats
        ),
    )
    for a in analyses:
        if a.heads < 2:
            continue
        lines += [
            "",
            f"Head agreement of {a.name} (share of target steps where both heads' "
            "most attended source piece is the same):",
            "",
        ]
        lines += markdown_table(
            [""] + [f"head {j + 1}" for j in range(a.heads)],
            ([f"head {i + 1}"] + [f"{v:.2f}" for v in row] for i, row in enumerate(a.agreement)),
        )
    return "\n".join(lines) + "\n"


def model_name(cfg) -> str:
    """The run name, with the head count for ``multihead``: ``deen_mh (4 heads)``."""
    if cfg.model.attention != "multihead":
        return cfg.name
    return f"{cfg.name} ({cfg.model.heads} head{'s' if cfg.model.heads != 1 else ''})"
