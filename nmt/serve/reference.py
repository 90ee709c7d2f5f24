"""Reference word alignments on the ``nmt serve`` page (issue 49):
``POST /api/reference_alignment``.

When the source sentence is a line of a served test set (typed, or picked from the
examples) whose split the statistical aligner covered (scripts/align_multi30k.py wrote
``{dir}/{split}.{src}-{tgt}.gdfa``: eflomal, grow-diag-final-and; a reference, not gold
links), the answer holds that line's reference alignment, Pharaoh's links of source word
i to target word j (whitespace words, from 0), and per served model with attention:

* the weights read by teacher forcing the line's REFERENCE translation, per head (h, T, S)
  and their mean (T, S): the alignment is of the reference, so it cannot be laid on the
  model's own hypothesis, whose words are others;
* each head's (and the head mean's) word links, a target word linked to its most
  attended source word, with their precision, recall and AER against the reference for
  this one sentence (Och & Ney 2003, sure links only, AER = 1 - F1);
* the word of every piece, for drawing a link as the block of its pieces' cells.

These are the per-sentence numbers of ``nmt heads`` (nmt/analysis/heads_alignment.py:
:func:`forced_weights` and :func:`head_links`, reused here, in fp32). A line of a joined
long set gets its captions' alignments concatenated (nmt/evaluation/alignment.py:
``long_alignments``), as ``nmt heads --join`` does.

Without the alignment files (a fresh clone that never ran the aligner) the answer's
``alignment`` is null and its ``note`` says why; the rest of the page is unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from nmt.analysis.heads_alignment import forced_weights, head_links, load_reference, reference_path
from nmt.data.corpus import DataError
from nmt.evaluation.alignment import Alignment, AlignmentError, long_alignments, piece_words, score
from nmt.inference.threads import fixed_torch_threads
from nmt.serve.decode import rounded
from nmt.serve.limits import chosen_models
from nmt.serve.registry import ModelEntry, Registry
from nmt.serve.schemas import Line, Name, errors
from nmt.serve.testsets import TestSet, TestSets

ALIGNER = "eflomal, grow-diag-final-and (scripts/align_multi30k.py)"


def _key(text: str) -> str:
    # the page sends its text with runs of white space as one; words are split() anyway
    return " ".join(text.split())


@dataclass(frozen=True)
class TestLine:
    """A served test-set line: its set, number (from 0, the id of /api/examples), texts,
    and its reference alignment with the file it came from (``links`` None: ``why``)."""

    set: str
    line: int
    source: str
    reference: str
    links: Alignment | None
    path: Path | None
    why: str | None = None


class ReferenceAlignments:
    """The reference alignment of every served test-set line, indexed by source text when
    first asked for.

    Args:
        testsets: the served test sets (their definitions say split and joins).
        directory: the alignment files' folder (``--alignments``), None for none.
        src_lang, tgt_lang: the served direction, e.g. de, en (the files' names).
    """

    def __init__(
        self, testsets: TestSets, directory: Path | None, src_lang: str, tgt_lang: str
    ) -> None:
        self.testsets, self.directory = testsets, directory
        self.pair = (src_lang, tgt_lang)
        self._index: dict[str, list[TestLine]] | None = None
        self._lock = threading.Lock()
        self._splits: dict[str, tuple[list[Alignment] | None, Path | None, str | None]] = {}

    def problems(self) -> list[str]:
        """Why a served test split has no reference alignment (its file missing, empty or
        not matching the split), one line per split; ``nmt serve`` logs them at start-up,
        so that a broken folder shows before the first request. Empty without a folder."""
        if self.directory is None or self.testsets.data is None:
            return []
        splits = sorted({d.split for d in self.testsets.definitions.values()})
        return [why for s in splits if (why := self._split(s)[2]) is not None]

    def _split(self, split: str) -> tuple[list[Alignment] | None, Path | None, str | None]:
        """(the split's alignments, their file, why there are none), read once."""
        if split not in self._splits:
            self._splits[split] = self._read(split)
        return self._splits[split]

    def _read(self, split: str) -> tuple[list[Alignment] | None, Path | None, str | None]:
        if self.directory is None:
            return None, None, "no alignment folder given (nmt serve --alignments DIR)"
        path = reference_path(self.directory, split, *self.pair)
        if not path.exists():
            return None, path, f"{path} is missing (scripts/align_multi30k.py writes it)"
        try:
            return load_reference(path, *self.testsets.captions(split), None), path, None
        except (AlignmentError, DataError) as e:
            return None, path, str(e)

    def _build(self) -> dict[str, list[TestLine]]:
        index: dict[str, list[TestLine]] = {}
        for name, d in self.testsets.definitions.items():
            ts = self.testsets.lookup(name)
            if not isinstance(ts, TestSet):
                continue
            aligns, path, why = self._split(d.split)
            if aligns is not None and d.join_ks:
                aligns = long_alignments(aligns, *self.testsets.captions(d.split), d.join_ks)
            for i, (s, r) in enumerate(zip(ts.sources, ts.references, strict=True)):
                links = aligns[i] if aligns is not None else None
                index.setdefault(_key(s), []).append(TestLine(name, i, s, r, links, path, why))
        return index

    def find(self, source: str, reference: str | None = None) -> TestLine | None:
        """The test line whose source is ``source`` (white space aside), None when none
        is: one with an alignment first, then one whose reference is ``reference``, then
        the first served set's."""
        with self._lock:
            if self._index is None:
                self._index = self._build()
        lines = self._index.get(_key(source), [])
        aligned = [t for t in lines if t.links is not None] or lines
        same = [
            t for t in aligned if reference is not None and _key(t.reference) == _key(reference)
        ]
        found = same or aligned
        return found[0] if found else None


def model_view(
    entry: ModelEntry,
    line: TestLine,
    threads: int,
    pair: tuple[str, str] | None = None,
    shared: bool = False,
) -> dict[str, Any]:
    """One model's teacher-forced weights on ``line``'s reference and each head's
    agreement with its alignment (see the module docstring); only ``model`` and ``note``
    for the fixed-vector model, a model of another direction than ``pair`` (the
    alignment's source and target language), or when the pieces do not give back the
    words. Read on ``threads`` torch threads, beside the server's searches when
    ``shared`` (as a search reads: the same floats at any ``--threads``)."""
    out: dict[str, Any] = {"model": entry.id, "note": None}
    if entry.fixed_vector:
        return {**out, "note": "the fixed-vector model has no attention to compare"}
    assert line.links is not None
    m = entry.loaded
    if pair is not None and (m.cfg.data.src_lang, m.cfg.data.tgt_lang) != pair:
        d = m.cfg.data
        return {
            **out,
            "note": f"translates {d.src_lang}->{d.tgt_lang}, the alignment is {pair[0]}-{pair[1]}",
        }
    with fixed_torch_threads(threads, shared):
        got = forced_weights(m.model, m.src_vocab, m.tgt_vocab, [line.source], [line.reference])
    if 0 not in got:
        return {
            **out,
            "note": "this model's pieces do not give back the sentence's whitespace words "
            "(or the source was cut): no word links, as nmt heads leaves such sentences out",
        }
    w, sp, tp = got[0]  # (h, T, S), the pieces with </s> last
    rows = []
    for name, links in head_links(w, sp, tp):
        s = score([links], [line.links])
        rows.append(
            {
                "head": name,
                "precision": round(s.precision, 4),
                "recall": round(s.recall, 4),
                "aer": round(s.aer, 4),
                "links": sorted([i, j] for i, j in links),
            }
        )
    return {
        **out,
        "src_pieces": sp,
        "tgt_pieces": tp,
        "src_word": piece_words(sp[:-1]) + [-1],  # -1: </s>, no word
        "tgt_word": piece_words(tp[:-1]) + [-1],
        "attention": rounded(w.mean(0)),
        "heads": rounded(w) if w.size(0) > 1 else None,
        "agreement": rows,
    }


def answer(
    registry: Registry,
    refs: ReferenceAlignments | None,
    source: str,
    reference: str | None,
    ids: list[str],
) -> dict[str, Any]:
    """The body of ``POST /api/reference_alignment`` (see :class:`ReferenceRequest`)."""
    line = None if refs is None else refs.find(source, reference)
    if refs is None or line is None:  # no test line: nothing to say (the page stays as it was)
        return {"alignment": None, "note": None}
    # the page's example list numbers lines from 1; the API's line (the examples' id) is
    # from 0: the note gives both, so neither reads as the other
    where = f"{line.set} line {line.line + 1} (id {line.line})"
    if line.links is None:
        return {"alignment": None, "note": f"{where}: {line.why}"}
    return {
        "alignment": {
            "set": line.set,
            "line": line.line,
            "source": line.source,
            "reference": line.reference,
            "file": str(line.path),
            "aligner": ALIGNER,
            "links": sorted([i, j] for i, j in line.links),
            "models": [
                model_view(
                    registry.models[i],
                    line,
                    registry.search_threads,
                    refs.pair,
                    shared=registry.searches > 1,
                )
                for i in ids
            ],
        },
        "note": f"{where}; reference alignment by {ALIGNER}: a statistical reference, not gold",
    }


class ReferenceRequest(BaseModel):
    """A source line (and the reference on the page, to pick among test lines of the
    same source) and the models to read."""

    model_config = ConfigDict(extra="forbid", strict=True)

    line: Line = Field(description="The source sentence, as translated.")
    reference: Line | None = Field(
        None,
        description="The reference on the page: among test lines of the same source, "
        "the one with this reference is taken.",
    )
    models: list[Name] | None = Field(
        None, min_length=1, description="Model ids (GET /api/models); default: every model."
    )


def add_route(app: FastAPI, registry: Registry, refs: ReferenceAlignments | None) -> None:
    """Add ``POST /api/reference_alignment`` to ``app``."""

    @app.post("/api/reference_alignment", tags=["translate"], responses=errors(400, 404, 413, 422))
    async def reference_alignment(req: ReferenceRequest) -> dict[str, Any]:
        """When the line is a test-set line the aligner covered (eflomal,
        grow-diag-final-and: a statistical reference, not gold): its reference word
        alignment (`links`, source word i, target word j), and per model the attention read
        by teacher forcing the REFERENCE translation (T x S pieces; per head for
        multihead), the word of each piece, and each head's and the head mean's word links
        with precision, recall and AER for this sentence. Otherwise `alignment` is null and
        `note` says why."""
        ids = chosen_models(req.models, list(registry.models))
        return await run_in_threadpool(answer, registry, refs, req.line, req.reference, ids)
