"""The corpus a checkpoint was trained on, read again from here: its stored data config
(with ``--data-path`` replacing ``data.path``), and a test set from a named split of it or
from ``--src``/``--ref`` files.

Every verb that scores a checkpoint (evaluate, select, heads, bench) and ``nmt serve``'s
test sets read the stored corpus through these, so each gives the same clear error when the
corpus is not where the checkpoint says.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from nmt.config.schema import DataConfig
from nmt.data.corpus import DataError, read_lines, read_split
from nmt.data.longsets import JOINED_KS, joined_base, long_sentence_set

# The directory a config's relative data.path is relative to when nmt is run elsewhere:
# the project root (the configs' default ../shared/data/multi30k is written from there,
# data/README.md). The shipped models in models/ were trained there too. Read at call time,
# so tests can point it elsewhere.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# where scripts/align_multi30k.py writes the reference word alignments (git-ignored)
ALIGNMENTS = Path("data/alignments")


def alignment_dir(path: Path | None) -> Path | None:
    """Where to read the reference word alignments (``--alignments`` of ``nmt heads`` and
    ``nmt serve``): ``path`` as given when it is absolute or exists from the current
    directory, else from :data:`PROJECT_ROOT` (as the corpus is found), else as given (it
    is then missing, and the caller says so)."""
    if path is None or path.is_absolute() or path.exists():
        return path
    root = PROJECT_ROOT / path
    return root if root.exists() else path


def stored_corpus(
    data: DataConfig, data_path: str | None = None, files_option: bool = True
) -> DataConfig:
    """A checkpoint's data config, with ``data_path`` (``--data-path``) replacing ``data.path``.

    A relative ``data.path`` (``auto`` or ``dir`` source) that is not a directory from the
    current directory is looked for from :data:`PROJECT_ROOT` too, and then stands there
    as an absolute path: ``cd /tmp && nmt serve`` (or ``nmt evaluate deen-additive``)
    finds the corpus the shipped models were trained on, as it does from the project root.

    Args:
        files_option: the error may suggest ``--src/--ref`` (False for ``nmt serve``,
            which has none).

    Raises:
        DataError: ``data.path`` is a directory that exists neither from the current
            directory nor from the project root (both named, with what to pass);
            ``auto`` would otherwise fall back to the hub and fail less clearly.
    """
    if data_path is not None:
        data = dataclasses.replace(data, path=data_path)
        if data.source in ("auto", "dir") and not Path(data_path).expanduser().is_dir():
            raise DataError(f"--data-path {data_path!r} is not a directory")
        return data
    if data.source not in ("auto", "dir") or not data.path:
        return data
    path = Path(data.path).expanduser()
    if path.is_dir():
        return data
    if not path.is_absolute() and (PROJECT_ROOT / path).is_dir():
        return dataclasses.replace(data, path=str((PROJECT_ROOT / path).resolve()))
    if data.source == "auto":
        where = f"from here ({Path.cwd()})"
        if not path.is_absolute() and Path.cwd().resolve() != PROJECT_ROOT.resolve():
            where += f" nor from the project root ({PROJECT_ROOT})"
        splits = ", ".join(dict.fromkeys([*data.test_splits, data.valid_split]))
        raise DataError(
            f"data.path {data.path!r} stored in the checkpoint (the corpus it was trained on) "
            f"is not a directory {where}: pass --data-path DIR, a directory of "
            f"{{split}}.{data.src_lang}[.gz] and {{split}}.{data.tgt_lang}[.gz] files "
            f"(splits {splits}; {PROJECT_ROOT / 'data' / 'README.md'} says where to get "
            "Multi30k)" + (", or --src/--ref files" if files_option else "")
        )
    return data


def test_set(
    loaded, *, split: str | None, src: Path | None, ref: Path | None, data_path: str | None
) -> tuple[str, list[str], list[str]]:
    """(label, sources, references) from files or a named split of the checkpoint's corpus."""
    if src is not None or ref is not None:
        if src is None or ref is None:
            raise DataError("--src and --ref must be given together")
        if split is not None:
            raise DataError("give either --split or --src/--ref, not both")
        data = loaded.cfg.data
        for option, path, lang in (("--src", src, data.src_lang), ("--ref", ref, data.tgt_lang)):
            named = file_language(path)
            if named is not None and named != lang.lower():
                raise DataError(
                    f"{option} {path}: a {named} file by its name, but the model "
                    f"translates {data.src_lang}->{data.tgt_lang}: give its "
                    f"{data.src_lang} sources and {data.tgt_lang} references, or "
                    "a model of this language pair"
                )
        sources, references = read_lines(src), read_lines(ref)
        if len(sources) != len(references):
            raise DataError(f"{src} has {len(sources)} lines but {ref} has {len(references)}")
        if not any(line.strip() for line in sources):
            raise DataError(f"{src} has no non-empty line: nothing to translate")
        return src.name, sources, references
    data = stored_corpus(loaded.cfg.data, data_path)
    name = split or (data.test_splits[0] if data.test_splits else None)
    if name is None:
        raise DataError("no --split given and the checkpoint's data.test_splits is empty")
    return (name, *split_lines(data, name))


def file_language(path: Path) -> str | None:
    """The language a corpus file's name gives, as Multi30k names them
    (``test_2016_flickr.de.gz`` -> ``de``): a two-letter last suffix before an optional
    ``.gz``; None when the name gives none."""
    name = path.name.removesuffix(".gz")
    suffix = Path(name).suffix[1:]
    return suffix.lower() if len(suffix) == 2 and suffix.isalpha() else None


def split_lines(data: DataConfig, name: str) -> tuple[list[str], list[str]]:
    """(sources, references) of the named split ``name`` of the corpus ``data``; a name
    ending in ``_joined`` is its split joined k = 1..5 consecutive pairs at a time
    (:data:`nmt.data.longsets.JOINED_KS`, the converged study's long set).

    Raises:
        DataError: the split (or the one it joins) cannot be read or is empty.
    """
    base = joined_base(name)
    pairs = read_split(data, base or name)
    if not pairs:
        raise DataError(f"split {base or name!r} of {data.path or data.hf_name} is empty")
    sources, references = [p.src for p in pairs], [p.tgt for p in pairs]
    if base is None:
        return sources, references
    joined = long_sentence_set(sources, references, JOINED_KS)
    return joined.sources, joined.references


@dataclass
class TestInput:
    """A test set that may be joined, with what its word alignments need
    (:func:`joinable_test_set`).

    Attributes:
        label: its name in the report ("test_2016_flickr joined 4 at a time").
        sources, references: its lines (joined, when it is).
        captions: the (sources, references) of the split before joining.
        split: the split the reference alignment is of (the joined split's base), or None
            for files given with --src/--ref.
        ks: the joins that made its lines from the captions (None: not joined).
    """

    label: str
    sources: list[str]
    references: list[str]
    captions: tuple[list[str], list[str]]
    split: str | None
    ks: tuple[int, ...] | None


def joinable_test_set(
    loaded,
    split: str | None,
    src: Path | None,
    ref: Path | None,
    data_path: str | None,
    join: int | None,
) -> TestInput:
    """The test set of :func:`test_set` (``nmt heads``' --split or --src/--ref), joined
    ``join`` pairs at a time if given; a ``_joined`` split (test_2016_flickr_joined) is its
    base split joined k = 1..5 at a time. Either way the captions before joining come with
    it, so that their word alignments can be joined alike.

    Raises:
        DataError: as :func:`test_set`; ``join`` < 1 or more than the pairs of the test
            set, or ``join`` with a split that is joined already.
    """
    label, sources, references = test_set(
        loaded, split=split, src=src, ref=ref, data_path=data_path
    )
    named = None if src is not None else label
    base = None if named is None else joined_base(named)
    if base is not None:
        if join is not None:
            raise DataError(
                f"--join {join} with --split {named}: that split is joined 1-5 at a time "
                f"already; give --split {base} --join {join}"
            )
        _, cap_src, cap_ref = test_set(loaded, split=base, src=None, ref=None, data_path=data_path)
        return TestInput(label, sources, references, (cap_src, cap_ref), base, JOINED_KS)
    if join is None:
        return TestInput(label, sources, references, (sources, references), named, None)
    if join < 1:
        raise DataError(f"--join: expected k >= 1, got {join}")
    if join > len(sources):
        raise DataError(f"--join {join}: the test set has only {len(sources)} pairs")
    joined = long_sentence_set(sources, references, (join,))
    return TestInput(
        f"{label} joined {join} at a time",
        joined.sources,
        joined.references,
        (sources, references),
        named,
        (join,),
    )
