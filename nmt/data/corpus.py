"""Reading a parallel corpus: ``{split}.{lang}`` files (plain or ``.gz``), TSV or a hub dataset.

The sources: a directory of ``{split}.{lang}`` files, a TSV file, or a Hugging Face
dataset. Strings in, strings out; no tokenization here.

Every defect names the file and line: different line counts are an error (never silently
truncated), invalid UTF-8 and truncated gzip files are errors. A UTF-8 byte-order mark and
Windows line endings are removed. Empty lines are kept here and counted by the caller.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from nmt.config.schema import DataConfig
from nmt.data.longsets import JOINED_SUFFIX
from nmt.ops.files import GZIP_ERRORS, open_bytes


class DataError(ValueError):
    """A corpus file or dataset is missing or malformed; the message says where."""


MAX_REPORTED = 10  # malformed records named in one error; the count covers all of them


def _raise_all(problems: list[str], what: str, one: str | None = None) -> None:
    """One error naming every problem (the first MAX_REPORTED, then how many more);
    ``what`` says what they are, ``one`` the same for a single problem."""
    if not problems:
        return
    shown = "; ".join(problems[:MAX_REPORTED])
    more = f"; and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
    said = one if len(problems) == 1 and one is not None else what
    raise DataError(f"{len(problems)} {said}: {shown}{more}")


@dataclass(frozen=True)
class Pair:
    """One source/target sentence pair with the place it came from."""

    src: str
    tgt: str
    origin: str  # "file:line" or "dataset[split][index]"


# a C0 control other than the tab; regular expressions, as every line of a corpus of tens
# of millions passes here and a per-character Python loop costs seconds per million
_CONTROL_NOT_TAB = re.compile(r"[\x00-\x08\x0a-\x1f]")
_CONTROL = re.compile(r"[\x00-\x1f]")


def _clean(line: str) -> str:
    # '\r' from Windows files; NUL and other C0 controls confuse SentencePiece and terminals
    line = line.rstrip("\r\n").replace("\ufeff", "")
    if _CONTROL_NOT_TAB.search(line):
        line = _CONTROL.sub(" ", line)
    return line.replace("\t", " ").strip()


def iter_lines(path: Path, bad: list[str], digest: Any = None) -> Iterator[str]:
    """The lines of a plain or gzip text file, cleaned (see module docstring), one at a
    time, so that memory does not grow with the file. A line that is not UTF-8 is skipped
    and described (``file:line: ...``) in ``bad``; the caller raises for them. ``digest``
    (a ``hashlib`` object) is fed every line's bytes as read, so that a caller who streams
    the file anyway gets its content key (:func:`nmt.data.digest.content_sha256`).

    Raises:
        DataError: the file is missing, or a cut-short or corrupt gzip (raised when the
            reading reaches the damage).
    """
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        with open_bytes(path) as f:
            for lineno, raw in enumerate(f, 1):
                if digest is not None:
                    digest.update(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad.append(f"{path}:{lineno}: invalid UTF-8 at byte {e.start} of the line")
                    continue
                yield _clean(text)
    except GZIP_ERRORS as e:
        raise DataError(f"{path}: gzip file is cut short or corrupt ({e})") from e


def read_lines(path: Path) -> list[str]:
    """All lines of a plain or gzip text file, cleaned (see module docstring).

    Raises:
        DataError: the file is missing, not UTF-8 (names the line), or a cut-short gzip.
    """
    bad: list[str] = []
    lines = list(iter_lines(path, bad))
    _raise_all(bad, f"lines of {path} are not UTF-8", f"line of {path} is not UTF-8")
    return lines


# Multi30k test sets that ../shared/data/multi30k lacks; data/README.md says where to
# get them, so their "no file" error points there
_NOT_IN_SHARED_COPY = frozenset({"test_2017_mscoco"})


def _find_split_file(directory: Path, split: str, lang: str) -> Path:
    found = [
        directory / n for n in (f"{split}.{lang}", f"{split}.{lang}.gz") if (directory / n).exists()
    ]
    if len(found) == 2:  # never guess which of two copies is meant
        raise DataError(
            f"{directory}: both {found[0].name} and {found[1].name} exist; "
            "remove or rename one so the split is unambiguous"
        )
    if found:
        return found[0]
    names = [p.name.removesuffix(".gz") for p in directory.iterdir()] if directory.is_dir() else []
    splits = sorted({n.rsplit(".", 1)[0] for n in names if n.endswith(f".{lang}")})
    hint = "; data/README.md says where to download it" if split in _NOT_IN_SHARED_COPY else ""
    raise DataError(
        f"{directory}: no file {split}.{lang} or {split}.{lang}.gz "
        f"(splits with .{lang} files here: {', '.join(splits) or 'none'}; each also as "
        f"SPLIT{JOINED_SUFFIX}, its captions joined into long sentences){hint}"
    )


def read_dir_split(directory: Path, split: str, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Pairs from ``{directory}/{split}.{src_lang}`` and ``.{tgt_lang}`` (plain or .gz).

    Raises:
        DataError: missing directory/file, different line counts, bad encoding.
    """
    src_path, tgt_path = split_files(directory, split, src_lang, tgt_lang)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
            "source and target files must be line-aligned"
        )
    return [Pair(s, t, f"{src_path}:{i}") for i, (s, t) in enumerate(zip(src, tgt, strict=True), 1)]


def split_files(directory: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """The source and target files of ``split`` in ``directory`` (plain or .gz).

    Raises:
        DataError: missing directory or file, or both a plain and a .gz copy.
    """
    if not directory.is_dir():
        where = "" if directory.is_absolute() else f" (relative to {Path.cwd()})"
        raise DataError(f"{directory}: corpus directory not found{where}")
    return (
        _find_split_file(directory, split, src_lang),
        _find_split_file(directory, split, tgt_lang),
    )


def iter_dir_split(
    directory: Path,
    split: str,
    src_lang: str,
    tgt_lang: str,
    digests: tuple[Any, Any] | None = None,
) -> Iterator[Pair]:
    """The pairs of :func:`read_dir_split`, one at a time: both files are read in step,
    line by line, so memory does not grow with the corpus. Every pair is yielded before the
    problems of the files are raised, so a consumer must treat its output as provisional
    until the iterator is exhausted. ``digests``: two ``hashlib`` objects fed the source's
    and the target's bytes (see :func:`iter_lines`).

    Raises:
        DataError: as :func:`read_dir_split`, with the same messages (invalid UTF-8 naming
            file and line, different line counts naming both files, a cut-short gzip).
    """
    src_path, tgt_path = split_files(directory, split, src_lang, tgt_lang)
    bad_src: list[str] = []
    bad_tgt: list[str] = []
    n_src = n_tgt = 0
    d_src, d_tgt = digests or (None, None)
    # None (never a line) marks the end of the shorter file
    for s, t in zip_longest(
        iter_lines(src_path, bad_src, d_src), iter_lines(tgt_path, bad_tgt, d_tgt)
    ):
        n_src += s is not None
        n_tgt += t is not None
        if s is not None and t is not None:
            yield Pair(s, t, f"{src_path}:{n_src}")
    _raise_all(bad_src, f"lines of {src_path} are not UTF-8", f"line of {src_path} is not UTF-8")
    _raise_all(bad_tgt, f"lines of {tgt_path} are not UTF-8", f"line of {tgt_path} is not UTF-8")
    if n_src != n_tgt:
        raise DataError(
            f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}: "
            "source and target files must be line-aligned"
        )


def read_tsv_split(path: Path) -> list[Pair]:
    """Pairs from a ``source<TAB>target`` file, one pair per line.

    Raises:
        DataError: missing file, a line without exactly one tab (names the line).
    """
    if not path.exists():
        raise DataError(f"{path}: file not found")
    pairs, bad = [], []
    try:
        with open_bytes(path) as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8").rstrip("\r\n").replace("\ufeff", "")
                except UnicodeDecodeError:
                    bad.append(f"{path}:{lineno}: invalid UTF-8")
                    continue
                fields = text.split("\t")
                if len(fields) != 2:
                    bad.append(
                        f"{path}:{lineno}: expected 2 tab-separated fields "
                        f"(source, target), found {len(fields)}"
                    )
                    continue
                pairs.append(Pair(_clean(fields[0]), _clean(fields[1]), f"{path}:{lineno}"))
    except GZIP_ERRORS as e:
        raise DataError(f"{path}: gzip file is cut short or corrupt ({e})") from e
    _raise_all(bad, f"malformed lines in {path}", f"malformed line in {path}")
    return pairs


OFFLINE_HINT = (
    "To use local files instead, set data.source=dir and data.path=DIR with "
    "{split}.{lang}[.gz] files (see data/README.md), or data.source=tsv."
)


def _hub_reachable(timeout_s: float = 5.0) -> bool:
    """True when the hub's host accepts a TCP connection within ``timeout_s`` seconds in
    all (datasets itself retries for a minute and more). The name lookup is inside the
    bound too: a resolver that never answers would otherwise wait far longer than the
    socket timeout, so the check runs in a daemon thread that is abandoned at the deadline."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((parsed.hostname or "huggingface.co", port), timeout_s).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(result and result[0])


def read_hf_split(cfg: DataConfig, split: str) -> list[Pair]:
    """Pairs from a Hugging Face dataset with a ``translation`` column of
    ``{lang: text}`` dicts, or with one column per language (``bentrevett/multi30k``).

    Raises:
        DataError: the hub is unreachable (with how to use local files), the split does
            not exist, or the rows lack the configured language keys.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a dependency
        raise DataError(f"the `datasets` package is not installed. {OFFLINE_HINT}") from e
    hub_split = cfg.hf_splits.get(split, split)
    name = f"{cfg.hf_name}" + (f" ({cfg.hf_config})" if cfg.hf_config else "")
    offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")
    if not offline and not _hub_reachable():
        raise DataError(
            f"cannot load {name}: the Hugging Face hub is unreachable (no network?). "
            f"{OFFLINE_HINT} A copy already in the datasets cache is used with "
            "HF_HUB_OFFLINE=1."
        )
    try:
        ds = datasets.load_dataset(cfg.hf_name, cfg.hf_config, split=hub_split)
    except (ConnectionError, OSError) as e:
        why = "offline mode is set" if offline else "the Hugging Face hub is unreachable"
        raise DataError(
            f"cannot load {name} split {hub_split!r}: {why} ({e}). {OFFLINE_HINT}"
        ) from e
    except Exception as e:  # datasets raises many types for bad names/splits
        raise DataError(f"cannot load {name} split {hub_split!r}: {e}. {OFFLINE_HINT}") from e
    return pairs_from_records(ds, cfg.src_lang, cfg.tgt_lang, f"{name}[{hub_split}]")


def pairs_from_records(rows, src_lang: str, tgt_lang: str, where: str) -> list[Pair]:
    """Pairs from dataset rows (dicts): either a ``translation`` dict ``{lang: text}`` or
    one column per language. Never guesses: a row with both layouts, a missing language
    key, or a value that is missing (None) or not a string is reported with its index
    (every such row, the first 10 named), not turned into text.

    Raises:
        DataError: malformed rows, naming ``where[index]``.
    """
    pairs, bad = [], []
    for i, row in enumerate(rows):
        loc = f"{where}[{i}]"
        if not isinstance(row, dict):
            bad.append(f"{loc}: a {type(row).__name__}, not a record")
            continue
        record = row.get("translation", row)
        if "translation" in row and (src_lang in row or tgt_lang in row):
            bad.append(
                f"{loc}: both a 'translation' column and {src_lang!r}/{tgt_lang!r} "
                "columns; ambiguous"
            )
            continue
        if not isinstance(record, dict) or src_lang not in record or tgt_lang not in record:
            keys = sorted(record) if isinstance(record, dict) else type(record).__name__
            bad.append(
                f"{loc}: no {src_lang!r}/{tgt_lang!r} keys (found {keys}); set "
                "data.src_lang and data.tgt_lang"
            )
            continue
        values = {lang: record[lang] for lang in (src_lang, tgt_lang)}
        wrong = [
            f"{lang!r} is {'missing (None)' if v is None else type(v).__name__}"
            for lang, v in values.items()
            if not isinstance(v, str)
        ]
        if wrong:
            bad.append(f"{loc}: {', '.join(wrong)}, expected text")
            continue
        pairs.append(Pair(_clean(values[src_lang]), _clean(values[tgt_lang]), loc))
    _raise_all(bad, "malformed records", "malformed record")
    return pairs


def resolve_source(cfg: DataConfig) -> str:
    """The reader to use: ``auto`` means the local directory when it exists, else the hub."""
    if cfg.source != "auto":
        return cfg.source
    if cfg.path and Path(cfg.path).expanduser().is_dir():
        return "dir"
    return "hf"


def read_split(cfg: DataConfig, split: str, limit: int | None = None) -> list[Pair]:
    """All pairs of ``split`` (or the first ``limit``) from the configured source.

    Raises:
        DataError: see the reader functions.
    """
    source = resolve_source(cfg)
    if source == "dir":
        if not cfg.path:
            raise DataError("data.path: must name a directory when data.source is dir")
        pairs = read_dir_split(Path(cfg.path).expanduser(), split, cfg.src_lang, cfg.tgt_lang)
    elif source == "tsv":
        if not cfg.path or "{split}" not in cfg.path:
            raise DataError("data.path: for tsv it must contain {split}, e.g. corpus/{split}.tsv")
        pairs = read_tsv_split(Path(cfg.path.format(split=split)).expanduser())
    else:
        try:
            pairs = read_hf_split(cfg, split)
        except DataError as e:
            if cfg.source == "auto" and cfg.path:
                # say why the hub was tried: a relative data.path resolves from the cwd
                raise DataError(
                    f"data.path {cfg.path!r} is not a directory from here "
                    f"({Path.cwd()}), so data.source auto tried the hub: {e}"
                ) from None
            raise
    return pairs[:limit] if limit is not None else pairs
