"""The test sets ``nmt serve`` offers as examples: source/reference pairs to pick from,
by source length in words (``GET /api/testsets``, ``GET /api/examples``).

They are the served studies' test sets (each study's ``test_splits`` and its joined long
set, ``{split}_joined``, built with its ``join_ks``, so that a study's example ids are line
numbers of these sets), then the first model's ``data.test_splits`` and the first of them
joined k = 1, 2, 3, 4 at a time (:func:`nmt.data.longsets.long_sentence_set`). They are
read from the local corpus only (``data.path``, a relative one from the current
directory or else the project root, or ``--data-path``), once, when first asked for; the
hub is never contacted. Without one the index's notes say what is missing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from nmt.config.buckets import parse_buckets
from nmt.config.schema import DataConfig
from nmt.data.corpus import DataError, read_split, resolve_source
from nmt.data.longsets import long_sentence_set
from nmt.data.stored import stored_corpus
from nmt.evaluation.metrics import bucket_label
from nmt.serve.limits import ApiError, not_found

DEFAULT_BUCKETS = "1-10,11-20,21-30,31-40,41-50,51-60,61-"
DEFAULT_JOIN_KS = (1, 2, 3, 4)


@dataclass(frozen=True)
class SetDefinition:
    """A test set: split ``split`` as distributed (``join_ks`` None) or joined."""

    name: str
    split: str
    join_ks: tuple[int, ...] | None = None


@dataclass
class TestSet:
    """Sources, references and source lengths (whitespace words) of one set."""

    name: str
    sources: list[str]
    references: list[str]
    note: str

    def words(self) -> list[int]:
        """Source length of each line in words."""
        return [len(s.split()) for s in self.sources]


def parse_bucket(text: str) -> tuple[int, int | None]:
    """One range of source words: ``"31-40"`` -> (31, 40); ``"61-"``, ``"61+"`` or
    ``"61 "`` (``61+`` in a URL unencoded: a bare ``+`` reads as a space) -> (61, None).

    Raises:
        ApiError: 400 for a list of ranges or anything else, with the forms that work.
    """
    hint = (
        "one range of source words, e.g. 31-40, or 61- for 61 and more (61+ must be "
        "written 61%2B in a URL: a bare + reads as a space)"
    )
    if "," in text:
        raise ApiError(
            400,
            "bad_option",
            f"bucket {text!r}: a list of ranges; give {hint}, one request per bucket",
            option="bucket",
        )
    core = text.strip()
    if core.isdigit() and text.endswith(" "):
        core += "+"  # "61+" sent unencoded arrives as "61 "
    try:
        ((lo, hi),) = parse_buckets(core, "bucket")
    except ValueError as e:  # its hint is of --buckets, a list: not this option's
        why = str(e).removeprefix("bucket: ").split("; use e.g.")[0]
        raise ApiError(
            400, "bad_option", f"bucket {text!r}: {why}; give {hint}", option="bucket"
        ) from None
    return lo, hi


def in_bucket(words: list[int], lo: int, hi: int | None) -> list[int]:
    """Line numbers (from 0) whose length is in ``lo..hi`` words (``hi`` None: no end)."""
    return [i for i, n in enumerate(words) if n >= lo and (hi is None or n <= hi)]


class TestSets:
    """The offered test sets (see the module docstring), read lazily and kept.

    Args:
        data: the corpus (the first model's ``data``, with ``--data-path`` applied), or
            None when there is none.
        definitions: the sets, in order; a later one with a known name is skipped.
        buckets: the length buckets of the index, e.g. ``"1-10,11-20,21-"``.
        note: why there is no corpus, when ``data`` is None.
    """

    def __init__(
        self,
        data: DataConfig | None,
        definitions: list[SetDefinition],
        buckets: str = DEFAULT_BUCKETS,
        note: str | None = None,
    ):
        self.data, self.buckets, self.note = data, parse_buckets(buckets), note
        self.definitions: dict[str, SetDefinition] = {}
        for d in definitions:
            self.definitions.setdefault(d.name, d)
        self._sets: dict[str, TestSet | str] = {}  # a set, or why it cannot be read
        self._splits: dict[str, tuple[list[str], list[str]]] = {}
        self._lock = threading.Lock()

    def _split(self, split: str) -> tuple[list[str], list[str]]:
        if split not in self._splits:
            assert self.data is not None
            pairs = read_split(self.data, split)
            self._splits[split] = ([p.src for p in pairs], [p.tgt for p in pairs])
        return self._splits[split]

    def _load(self, d: SetDefinition) -> TestSet | str:
        if self.data is None:
            return self.note or "no corpus"
        try:
            src, ref = self._split(d.split)
        except DataError as e:
            return str(e)
        if d.join_ks is None:
            return TestSet(d.name, src, ref, f"{d.split} as distributed: {len(src)} lines")
        j = long_sentence_set(src, ref, d.join_ks)
        return TestSet(
            d.name,
            j.sources,
            j.references,
            f"{d.split} with k = {', '.join(map(str, d.join_ks))} consecutive "
            f"pairs joined: {len(j)} lines",
        )

    def lookup(self, name: str) -> TestSet | str | None:
        """The set ``name``, why it cannot be read (a string), or None when unknown."""
        if name not in self.definitions:
            return None
        with self._lock:
            if name not in self._sets:
                self._sets[name] = self._load(self.definitions[name])
            return self._sets[name]

    def get(self, name: str) -> TestSet:
        """The set ``name``.

        Raises:
            ApiError: 404 when it is unknown or its corpus cannot be read.
        """
        ts = self.lookup(name)
        if ts is None:
            raise not_found("test_set", name, list(self.definitions))
        if isinstance(ts, str):
            raise ApiError(404, "test_set_unavailable", f"test set {name!r}: {ts}", name=name)
        return ts

    def captions(self, split: str) -> tuple[list[str], list[str]]:
        """(sources, references) of ``split`` as distributed, read once.

        Raises:
            nmt.data.corpus.DataError: no corpus, or the split cannot be read.
        """
        if self.data is None:
            raise DataError(self.note or "no corpus")
        with self._lock:
            return self._split(split)

    def index(self) -> dict[str, Any]:
        """``GET /api/testsets``: every set with its size and lines per bucket."""
        sets, notes = [], [] if self.note is None else [self.note]
        for name in self.definitions:
            ts = self.lookup(name)
            if isinstance(ts, str) or ts is None:
                notes.append(f"{name}: {ts}")
                continue
            words = ts.words()
            sets.append(
                {
                    "name": name,
                    "n": len(words),
                    "note": ts.note,
                    "buckets": [
                        {"label": bucket_label(lo, hi), "n": len(in_bucket(words, lo, hi))}
                        for lo, hi in self.buckets
                    ],
                }
            )
        return {"sets": sets, "notes": notes}

    def examples(self, name: str, bucket: str | None, offset: int, limit: int) -> dict[str, Any]:
        """``GET /api/examples``: pairs of set ``name`` in ``bucket`` (all without one),
        ``limit`` of them from the ``offset``-th, each with its id (line number).

        Raises:
            ApiError: 404 unknown set, 400 malformed bucket.
        """
        ts = self.get(name)
        words = ts.words()
        ids = list(range(len(words)))
        label = None
        if bucket:
            lo, hi = parse_bucket(bucket)
            ids, label = in_bucket(words, lo, hi), bucket_label(lo, hi)
        page = ids[offset : offset + limit]
        return {
            "split": name,
            "bucket": label,
            "total": len(ids),
            "offset": offset,
            "examples": [
                {"id": i, "source": ts.sources[i], "reference": ts.references[i], "words": words[i]}
                for i in page
            ],
        }


def served_corpus(
    data: DataConfig | None, data_path: str | None
) -> tuple[DataConfig | None, str | None]:
    """(the local corpus to read test sets from, or None, and why not).

    ``data`` is the first model's ``data`` config; ``data_path`` replaces its path."""
    if data is None:
        return None, "no model"
    try:
        data = stored_corpus(data, data_path, files_option=False)
    except DataError as e:
        return None, str(e)
    if resolve_source(data) == "hf":
        return None, (
            "the corpus is on the hub and nmt serve reads only a local one: pass --data-path DIR"
        )
    return data, None
