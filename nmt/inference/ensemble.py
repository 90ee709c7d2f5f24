"""Ensemble decoding: several models searched as one, their next-piece distributions
averaged at every step.

:class:`Ensemble` has the two calls the searches of :mod:`nmt.inference.search` make on a
:class:`nmt.model.seq2seq.Seq2Seq` (``encode`` and ``step``, with ``index_select`` on the
memory and state they return), so greedy and beam search, the :class:`Translator` and
``nmt translate`` / ``nmt evaluate --ensemble`` decode an ensemble unchanged.

The rule is the mean of the probabilities, ``log p(y) = logsumexp_i log p_i(y) - log N``:
fairseq's ``EnsembleModel`` and OpenNMT-py's ``-avg_raw_probs`` (OpenNMT-py's default is
the mean of the log-probabilities, a renormalisation-free geometric mean). The mean is a
distribution itself, so scores and length penalties mean what they mean for one model.
The members share the source and target vocabularies (:func:`vocab_mismatch`) and may
differ in anything else: seed, attention, size, step order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nmt.config.schema import Config
from nmt.data.vocab import Vocab
from nmt.model.checkpoint import CheckpointError, Loaded, load_checkpoint
from nmt.model.duplicate_checkpoints import refuse_duplicates
from nmt.ops.precision import at_least_fp32


@dataclass
class EnsembleParts:
    """One per-member object (memory or state) for each member, in member order."""

    parts: tuple[Any, ...]

    def index_select(self, idx: torch.Tensor) -> EnsembleParts:
        """Rows ``idx`` (K,) of every member's memory or state (beam reordering)."""
        return EnsembleParts(tuple(p.index_select(idx) for p in self.parts))


class Ensemble(nn.Module):
    """Models searched as one; each step's distribution is the mean of theirs.

    Args:
        models: one or more :class:`nmt.model.seq2seq.Seq2Seq` with one source and one
            target vocabulary (not checked here: :func:`load_ensemble` checks the files).

    Raises:
        ValueError: no models.
    """

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        if not models:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(models)  # registered: parameters(), eval(), to()
        # typed as the searches see them (ModuleList's items type as bare Modules)
        self._models: list[Any] = list(models)

    def encode(
        self, src: torch.Tensor, src_len: torch.Tensor
    ) -> tuple[EnsembleParts, EnsembleParts]:
        """(B, S) source ids and (B,) lengths -> every member's memory and initial state."""
        pairs = [m.encode(src, src_len) for m in self._models]
        return (
            EnsembleParts(tuple(mem for mem, _ in pairs)),
            EnsembleParts(tuple(state for _, state in pairs)),
        )

    def step(
        self, prev: torch.Tensor, state: EnsembleParts, mem: EnsembleParts
    ) -> tuple[torch.Tensor, EnsembleParts, torch.Tensor | None]:
        """One search step of every member: (B,) previous ids -> log of the mean
        probability (B, V) in fp32 (fp64 when a member's is: a float64 model stays fp64;
        one member's own dtype when alone), the members' new states, and the mean attention
        weights (B, S) of the members that have attention (None when none has: the
        fixed-vector model reads no source position)."""
        outs = [
            m.step(prev, s, mm)
            for m, s, mm in zip(self._models, state.parts, mem.parts, strict=True)
        ]
        new_state = EnsembleParts(tuple(o[1] for o in outs))
        if len(outs) == 1:  # one member: its own numbers, bit for bit
            return outs[0][0], new_state, outs[0][2]
        logp = torch.logsumexp(torch.stack([at_least_fp32(o[0]) for o in outs]), dim=0)
        logp -= math.log(len(outs))
        attns = [at_least_fp32(o[2]) for o in outs if o[2] is not None]
        attn = torch.stack(attns).mean(0) if attns else None
        return logp, new_state, attn


def _pieces(v: Vocab) -> list[tuple[str, float]]:
    return [(v.sp.id_to_piece(i), v.sp.get_score(i)) for i in range(len(v))]


def vocab_mismatch(a: Loaded, b: Loaded) -> str | None:
    """Which vocabulary (or language pair) two loaded checkpoints do not share, or None.

    Equal SentencePiece model bytes are one vocabulary; so are models whose pieces and
    scores are all equal (the bytes also hold training metadata, such as the input's
    name, that does not change how text is cut or ids are read)."""
    da, db = a.cfg.data, b.cfg.data
    if (da.src_lang, da.tgt_lang) != (db.src_lang, db.tgt_lang):
        return f"language pair {db.src_lang}->{db.tgt_lang}, not {da.src_lang}->{da.tgt_lang}"
    for side, va, vb in (
        ("source", a.src_vocab, b.src_vocab),
        ("target", a.tgt_vocab, b.tgt_vocab),
    ):
        if va.model_bytes != vb.model_bytes and _pieces(va) != _pieces(vb):
            return (
                f"another {side} vocabulary ({len(vb)} SentencePiece pieces, not {len(va)})"
                if len(va) != len(vb)
                else f"another {side} vocabulary (other pieces or scores, both {len(va)} pieces)"
            )
    return None


@dataclass
class LoadedEnsemble:
    """Checkpoints loaded for ensemble decoding, shaped like a
    :class:`nmt.model.checkpoint.Loaded` (``cfg``, ``model``, the vocabularies).

    Attributes:
        members: the loaded checkpoints, in the order given.
        cfg: the first member's config: the language pair, and the search settings the
            ensemble decodes with unless overridden.
        model: the :class:`Ensemble` of the members' models.
    """

    members: list[Loaded]
    cfg: Config
    model: Ensemble
    src_vocab: Vocab
    tgt_vocab: Vocab

    @property
    def attention_types(self) -> list[str]:
        """Each member's ``model.attention``, in member order."""
        return [m.cfg.model.attention for m in self.members]

    def describe(self) -> str:
        """``"ensemble of 2 (additive, dot)"``."""
        return f"ensemble of {len(self.members)} ({', '.join(self.attention_types)})"


def load_ensemble(
    paths: Sequence[str | Path], device: torch.device | str = "cpu"
) -> LoadedEnsemble:
    """Load checkpoints (safe loading, :func:`nmt.model.checkpoint.load_checkpoint`, each
    file read once) and ensemble them (:func:`ensemble_of`).

    Raises:
        CheckpointError: no paths, a file that is not a usable checkpoint, or as
            :func:`ensemble_of`.
    """
    if not paths:
        raise CheckpointError("no checkpoints to ensemble")
    files = [Path(p) for p in paths]
    return ensemble_of(files, [load_checkpoint(p, device, with_digest=True) for p in files])


def ensemble_of(paths: Sequence[Path], members: Sequence[Loaded]) -> LoadedEnsemble:
    """The ensemble of checkpoints already loaded (``members``, from the files ``paths``),
    after checking that each is there once and that they share one language pair and one
    source and target vocabulary.

    Raises:
        CheckpointError: no members; one file twice, by path or by identical contents
            (compared by :attr:`Loaded.sha256` where every member has one, else the files
            are hashed); a member whose vocabulary or language pair differs from the
            first's (one line naming both files).
    """
    if not members:
        raise CheckpointError("no checkpoints to ensemble")
    files = list(paths)
    known = [m.sha256 for m in members if m.sha256 is not None]
    refuse_duplicates(files, "ensembled", known if len(known) == len(members) else None)
    first = members[0]
    for path, loaded in zip(files[1:], members[1:], strict=True):
        why = vocab_mismatch(first, loaded)
        if why:
            raise CheckpointError(
                f"{path}: cannot be ensembled with {files[0]}: {why}; an "
                "ensemble's models share one source and one target "
                "vocabulary (same data and subwords settings)"
            )
    return LoadedEnsemble(
        list(members),
        first.cfg,
        Ensemble([m.model for m in members]),
        first.src_vocab,
        first.tgt_vocab,
    )


def load_models(
    paths: Sequence[str | Path], device: torch.device | str = "cpu"
) -> Loaded | LoadedEnsemble:
    """One checkpoint loaded alone (its own model, not an ensemble of one), several as
    their ensemble (:func:`load_ensemble`): what ``nmt translate`` and
    :meth:`nmt.inference.translator.Translator.from_checkpoints` decode.

    Raises:
        CheckpointError: as :func:`load_ensemble` (no paths, an unusable file, ...).
    """
    if len(paths) == 1:
        return load_checkpoint(paths[0], device)
    return load_ensemble(paths, device)
