"""Reference word alignments of Multi30k (issue 49): eflomal, both directions, grow-diag-final-and.

Usage (from the repository root, after ``bash scripts/setup.sh``):

    .venv/bin/python scripts/align_multi30k.py [--data ../shared/data/multi30k]
        [--src de --tgt en] [--out data/alignments] [--record DIR]

Maintainers refreshing the committed record add ``--record results/alignments``; without
it the record goes beside the alignments (``--out``), so a user's run changes nothing in git.

The aligner (eflomal, Östling & Tiedemann 2016, model 3: IBM1 + HMM + fertility, Gibbs
sampling) is trained on train + val + test_2016_flickr + test_2017_flickr together, so the
test captions are aligned with the statistics of the whole corpus; it sees no model
output. Words are the whitespace tokens of the raw text (those nmt's length buckets and
SentencePiece's "▁" count). For the aligner, leading and trailing punctuation is split off
each word into tokens of its own (``Fluss.`` -> ``Fluss`` ``.``; eflomal lowercases
itself), so ``Fluss`` and ``Fluss.`` are one word type to it. Token links are mapped back to
words; links of a split-off punctuation token are dropped, so a word like ``Fluss.`` is
aligned through ``Fluss`` alone, while a word that is all punctuation (``-``) keeps its
own links (nmt/evaluation/symmetrise.py: tokens_to_words).

Output, outside git: ``{out}/{split}.{src}-{tgt}.gdfa`` per split (Pharaoh ``i-j``, source
word i, target word j, 0-based, one line per caption pair), plus the two directional
files ``.fwd``/``.rev`` in word indices. The joined long-sentence test sets are not
aligned again: nmt/evaluation/alignment.py (long_alignments) concatenates the captions'
alignments with word offsets. The record ``{record}/{src}-{tgt}.json`` (default
``{out}/{src}-{tgt}.json``; results/alignments/de-en.json is the committed one) holds the
aligner's version, settings, the command, the run time, the machine and the SHA-256 of
every output file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import re
import resource
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt.evaluation.alignment import format_pharaoh, parse_pharaoh
from nmt.evaluation.symmetrise import grow_diag_final_and, tokens_to_words

SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
_EDGES = re.compile(r"^(\W*)(.*?)(\W*)$")  # leading punctuation, core, trailing punctuation


def tokenize(line: str) -> tuple[list[str], list[int], list[bool]]:
    """(tokens, word index of each token, split-off punctuation flag of each token) of one
    raw line; see the module docstring. ``"(Ein Hund.)"`` -> ``["(", "Ein", "Hund", ".)"]``,
    ``[0, 0, 1, 1]``, ``[True, False, False, True]``."""
    tokens, word_of, split = [], [], []
    for w, word in enumerate(line.split()):
        lead, core, trail = _EDGES.match(word).groups()  # type: ignore[union-attr]
        if not core:  # all punctuation (or "_"): the word is its own token
            parts = [(word, False)]
        else:
            parts = [(lead, True), (core, False), (trail, True)]
        for text, is_split in parts:
            if text:
                tokens.append(text)
                word_of.append(w)
                split.append(is_split)
    return tokens, word_of, split


def read_lines(data: Path, split: str, lang: str) -> list[str]:
    """The lines of ``{data}/{split}.{lang}[.gz]``."""
    for path in (data / f"{split}.{lang}.gz", data / f"{split}.{lang}"):
        if path.exists():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                return [line.rstrip("\n") for line in f]
    sys.exit(f"align_multi30k: {data}/{split}.{lang}[.gz]: not found")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (``argv``: sys.argv[1:] when None); ``record`` is ``out`` unless
    ``--record`` is given, so that a user's run leaves the committed record alone."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/multi30k"))
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    ap.add_argument("--out", type=Path, default=Path("data/alignments"))
    ap.add_argument(
        "--record",
        type=Path,
        help="folder of the run's record {src}-{tgt}.json (default: --out, outside git; "
        "the committed record is written only with --record results/alignments)",
    )
    ap.add_argument(
        "--model",
        type=int,
        default=3,
        choices=(1, 2, 3),
        help="eflomal model: 1 IBM1, 2 +HMM, 3 +fertility (default)",
    )
    args = ap.parse_args(argv)
    if args.record is None:
        args.record = args.out
    return args


def main() -> None:
    args = parse_args()
    try:
        import eflomal
    except ImportError:
        sys.exit(
            "align_multi30k: eflomal is not installed (.venv/bin/pip install -e "
            "'.[align]'; it builds from source, a few minutes)"
        )
    pair = f"{args.src}-{args.tgt}"
    corpus = {
        s: (read_lines(args.data, s, args.src), read_lines(args.data, s, args.tgt)) for s in SPLITS
    }
    for s, (src, tgt) in corpus.items():
        if len(src) != len(tgt):
            sys.exit(
                f"align_multi30k: {s}: {len(src)} {args.src} lines but {len(tgt)} {args.tgt} lines"
            )
    tok = {
        s: ([tokenize(x) for x in src], [tokenize(y) for y in tgt])
        for s, (src, tgt) in corpus.items()
    }
    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the eflomal binary is a child
    with tempfile.TemporaryDirectory() as tmp:
        fwd_file, rev_file = Path(tmp) / "fwd", Path(tmp) / "rev"
        # an empty side would have nothing to align; "." stands in and its links are dropped
        src_in = [" ".join(t[0]) or "." for s in SPLITS for t in tok[s][0]]
        tgt_in = [" ".join(t[0]) or "." for s in SPLITS for t in tok[s][1]]
        aligner = eflomal.Aligner(model=args.model)
        aligner.align(
            src_in,
            tgt_in,
            links_filename_fwd=str(fwd_file),
            links_filename_rev=str(rev_file),
            quiet=True,
        )
        fwd = fwd_file.read_text(encoding="utf-8").splitlines()
        rev = rev_file.read_text(encoding="utf-8").splitlines()
    seconds = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    if len(fwd) != len(src_in) or len(rev) != len(src_in):
        sys.exit(
            f"align_multi30k: eflomal wrote {len(fwd)}/{len(rev)} lines for {len(src_in)} pairs"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    files, n, links = {}, 0, 0
    for s in SPLITS:
        out = {kind: [] for kind in ("gdfa", "fwd", "rev")}
        for (_, sw, ss), (_, tw, ts) in zip(*tok[s], strict=True):
            f_links = parse_pharaoh(fwd[n], f"eflomal forward line {n + 1}")
            r_links = parse_pharaoh(rev[n], f"eflomal reverse line {n + 1}")
            if not sw or not tw:
                f_links = r_links = frozenset()
            words = {"gdfa": grow_diag_final_and(f_links, r_links), "fwd": f_links, "rev": r_links}
            for kind, lk in words.items():
                out[kind].append(format_pharaoh(tokens_to_words(lk, sw, tw, ss, ts)))
            links += len(tokens_to_words(words["gdfa"], sw, tw, ss, ts))
            n += 1
        for kind, lines in out.items():
            path = args.out / f"{s}.{pair}.{kind}"
            tmp_path = path.with_suffix(path.suffix + ".tmp")
            tmp_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            os.replace(tmp_path, path)
            files[path.name] = {"lines": len(lines), "sha256": _sha256(path)}
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    record = {
        "aligner": "eflomal",
        "eflomal_version": version("eflomal"),
        "call": f"eflomal.Aligner(model={args.model}).align(src, tgt, links_filename_fwd, "
        "links_filename_rev)  (other settings eflomal's defaults)",
        "command": " ".join(["python scripts/align_multi30k.py", *sys.argv[1:]]),
        "pair": pair,
        "training_splits": list(SPLITS),
        "sentence_pairs": {s: len(corpus[s][0]) for s in SPLITS},
        "words": "whitespace tokens of the raw text; leading/trailing punctuation split off "
        "for the aligner, its links dropped when mapped back to words",
        "symmetrisation": "grow-diag-final-and (nmt/evaluation/symmetrise.py)",
        "links_gdfa": links,
        "align_seconds": round(seconds, 1),
        "eflomal_cpu_seconds": round(cpu_seconds, 1),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "output_dir": str(args.out),
        "files": files,
    }
    args.record.mkdir(parents=True, exist_ok=True)
    (args.record / f"{pair}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(
        f"aligned {n} pairs in {seconds:.0f} s; {links} links; wrote {args.out}/*.{pair}.*, "
        f"{args.record}/{pair}.json"
    )


if __name__ == "__main__":
    main()
