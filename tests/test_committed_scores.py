"""Every committed file of translations re-scores to the number its JSON reports.

results/hypotheses.json maps each committed hypothesis file to the JSON holding the scores
made from it and to the reference it was scored against (a Multi30k split, or the split with
k consecutive captions joined). Each file is scored again here with sacreBLEU (cased BLEU
and chrF with their default settings, the papers' lowercased Moses-tokenized BLEU), and the
score must equal the JSON's at the precision the docs report (two decimals); the JSON's
sacreBLEU signature must be the installed sacreBLEU's, so that a re-score under another
version is refused rather than compared. Two kinds of entry:

- ``study_archives``: an ``nmt study`` report and the archive (``archive_dir``) of its
  ``config`` (with the study ``overrides`` the report was made with), whose
  ``{run_prefix}_{label}/hyps/{set}.txt`` (greedy) and ``{set}.beam{K}_a{alpha}.txt`` files
  belong to ``test_sets[set]`` of the study's results.json, and ``val[_joined].beam*`` to
  ``alpha_choice[label]``; the naming rule is the study's own (nmt/commands/study_decode.py).
- ``files``: one hypothesis file (``.txt`` or gzip'd ``.gz``), its ``split`` (and
  ``join_ks`` for a joined set), ``src_lang``/``tgt_lang``, its ``scores`` JSON and
  ``checks``: ``metric`` (bleu, chrf, bleu_lc or papers), ``value`` and ``signature`` as
  ``/``-separated paths into the JSON (a list step is an index or ``key=value``), and an
  optional source-length ``bucket`` such as ``"51-60"``.

The corpus tests skip without Multi30k (../shared/data/multi30k or NMT_MULTI30K).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from nmt.config.load import load_config, load_study_config
from nmt.data.corpus import read_dir_split
from nmt.data.digest import lines_sha256
from nmt.data.longsets import long_sentence_set
from nmt.evaluation.metrics import papers_bleu

from conftest import MULTI30K, REPO, write_split

MANIFEST = REPO / "results" / "hypotheses.json"
MAX_BYTES = 1 << 20  # no committed translation file over 1 MiB
PLACES = 2  # the precision the README and docs/results.md report


def _manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def read_lines(path: Path) -> list[str]:
    """UTF-8 lines of a text or gzip'd text file, each ended by a newline.

    Raises:
        ValueError: the last line has no newline (a truncated file).
    """
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    if text and not text.endswith("\n"):
        raise ValueError(f"{path}: the last line has no newline (truncated?)")
    return text.split("\n")[:-1]


def pointer(obj: Any, path: str) -> Any:
    """The value at ``path`` (``a/b/0/system=none/bleu``) in parsed JSON.

    Raises:
        KeyError: a step names nothing, or a ``key=value`` step matches no or several items.
    """
    for step in path.split("/"):
        if isinstance(obj, list) and "=" in step:
            key, _, want = step.partition("=")
            hits = [x for x in obj if isinstance(x, dict) and str(x.get(key)) == want]
            if len(hits) != 1:
                raise KeyError(f"{path}: {step} matches {len(hits)} items")
            obj = hits[0]
        elif isinstance(obj, list):
            obj = obj[int(step)]
        else:
            obj = obj[step]
    return obj


def reference(
    corpus: Path, split: str, src: str, tgt: str, join_ks: list[int] | None = None
) -> tuple[list[str], list[str]]:
    """(sources, references) of ``split``, joined ``join_ks`` captions at a time if given."""
    pairs = read_dir_split(corpus, split, src, tgt)
    sources, refs = [p.src for p in pairs], [p.tgt for p in pairs]
    if join_ks:
        joined = long_sentence_set(sources, refs, tuple(join_ks))
        return joined.sources, joined.references
    return sources, refs


def in_bucket(sources: list[str], bucket: str | None) -> list[int]:
    """Indices of the sources with ``lo..hi`` whitespace words (``"61-"``: no upper bound)."""
    if bucket is None:
        return list(range(len(sources)))
    lo, _, hi = bucket.partition("-")
    return [
        i
        for i, s in enumerate(sources)
        if len(s.split()) >= int(lo) and (not hi or len(s.split()) <= int(hi))
    ]


# sacreBLEU metrics by (metric, the references' digest), each holding its references' n-grams
# (sacreBLEU's reference cache): the same references are scored against many files (every
# model of a study, every alpha on val), and extracting their n-grams again for each is
# about half of a re-score's work
_SCORERS: dict[tuple[str, str], BLEU | CHRF] = {}


def scorer(metric: str, refs: list[str]) -> BLEU | CHRF:
    """The sacreBLEU ``metric`` (bleu, bleu_lc or chrf, default settings) with ``refs``
    cached; score with ``corpus_score(hyps, None)`` (hyps as many as refs)."""
    key = (metric, lines_sha256(refs))
    if key not in _SCORERS:
        _SCORERS[key] = (
            CHRF(references=[refs])
            if metric == "chrf"
            else BLEU(lowercase=metric == "bleu_lc", references=[refs])
        )
    return _SCORERS[key]


def rescore(metric: str, hyps: list[str], refs: list[str], tgt_lang: str) -> tuple[float, str]:
    """(score, sacreBLEU signature) of ``hyps`` against ``refs``."""
    if metric == "papers":
        return papers_bleu(hyps, refs, tgt_lang)
    m = scorer(metric, refs)
    return m.corpus_score(hyps, None).score, str(m.get_signature())


def signature(metric: BLEU | CHRF) -> str:
    """The signature ``metric`` gives its scores (sacreBLEU knows the reference count only
    once it has scored something)."""
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


def same(a: float, b: float) -> bool:
    return round(a, PLACES) == round(b, PLACES)


def check_file(entry: dict[str, Any], repo: Path, corpus: Path) -> tuple[int, list[str]]:
    """(numbers compared, mismatches) for one ``files`` entry of the manifest."""
    path = repo / entry["hypotheses"]
    hyps = read_lines(path)
    sources, refs = reference(
        corpus, entry["split"], entry["src_lang"], entry["tgt_lang"], entry.get("join_ks")
    )
    if len(hyps) != len(refs):
        return 0, [f"{path}: {len(hyps)} lines, the reference {len(refs)}"]
    scores = json.loads((repo / entry["scores"]).read_text(encoding="utf-8"))
    bad = []
    for check in entry["checks"]:
        idx = in_bucket(sources, check.get("bucket"))
        got, sig = rescore(
            check["metric"], [hyps[i] for i in idx], [refs[i] for i in idx], entry["tgt_lang"]
        )
        want = float(pointer(scores, check["value"]))
        where = f"{path} -> {entry['scores']}:{check['value']}"
        if not same(got, want):
            bad.append(f"{where}: re-scored {got:.4f}, the JSON says {want:.4f}")
        if pointer(scores, check["signature"]) != sig:
            bad.append(
                f"{where}: signature {pointer(scores, check['signature'])!r}, "
                f"re-scored with {sig!r}"
            )
    return len(entry["checks"]), bad


class _Stats:
    """Per-sentence statistics of one hypothesis file for ``metrics`` (bleu, chrf), so that
    any subset (a length bucket) is scored by summing rows, as sacreBLEU sums a corpus."""

    def __init__(self, hyps: list[str], refs: list[str], metrics: tuple[str, ...]):
        self.metrics = {m: scorer(m, refs) for m in metrics}
        self.rows = {
            name: np.asarray(m._extract_corpus_statistics(hyps, None), dtype=np.int64).reshape(
                len(hyps), -1
            )
            for name, m in self.metrics.items()
        }

    def score(self, name: str, idx: list[int]) -> float:
        summed = [int(x) for x in self.rows[name][idx].sum(0)]
        return float(self.metrics[name]._compute_score_from_stats(summed).score)


# a file's statistics, kept for the next report that uses the same file (two reports share
# the en->fr archive): the same file is always scored against the same reference
_STATS: dict[tuple[Path, tuple[str, ...]], _Stats] = {}


def _stats(path: Path, hyps: list[str], refs: list[str], metrics: tuple[str, ...]) -> _Stats:
    if (path, metrics) not in _STATS:
        _STATS[path, metrics] = _Stats(hyps, refs, metrics)
    return _STATS[path, metrics]


def _study_rows(table: list[dict], label: str) -> list[dict]:
    return [r for r in table if r["system"] == label and r["n"]]


class _StudyModel:
    """One model of a ``study_archives`` entry: its translations, the report's numbers for
    it, and the mismatches found (``bad``) in the ``count`` numbers compared."""

    def __init__(self, entry: dict[str, Any], label: str, repo: Path, corpus: Path):
        self.study = load_study_config(repo / entry["config"], entry.get("overrides"))
        self.cfg = load_config(repo / self.study.base_config, list(self.study.overrides))
        self.report = json.loads((repo / entry["scores"]).read_text(encoding="utf-8"))
        self.scores_name, self.label, self.corpus = entry["scores"], label, corpus
        self.hyps_dir = repo / entry["archive"] / f"{self.study.run_prefix}_{label}" / "hyps"
        self.count, self.bad = 0, []  # type: int, list[str]
        self.summed_checked = False  # the summed statistics against sacreBLEU's public path

    def hyps(self, name: str, sources: list[str], refs: list[str]) -> list[str] | None:
        """The lines of ``hyps/{name}``, None (a mismatch noted) when its key file vouches
        for other lines or other sources."""
        path = self.hyps_dir / name
        hyps = read_lines(path)
        key = json.loads(path.with_name(path.name + ".key.json").read_text(encoding="utf-8"))
        if key["hyps_sha256"] != lines_sha256(hyps):
            self.bad.append(f"{path}: not the lines its key file records")
        if key["key"]["sources_sha256"] != lines_sha256(sources) or len(hyps) != len(refs):
            self.bad.append(f"{path}: made from other source lines than the corpus's")
            return None
        return hyps

    def compare(self, got: float, want: float, what: str) -> None:
        self.count += 1
        if not same(got, want):
            self.bad.append(f"{what}: re-scored {got:.4f}, the JSON says {want:.4f}")

    def test_set(self, ts_name: str) -> None:
        """Beam (whole set and buckets, BLEU and chrF) and greedy (buckets, BLEU: its chrF is
        reported nowhere, and chrF is the slow part) of ``ts_name``, and the drops."""
        ts, d = self.report["test_sets"][ts_name], self.cfg.data
        split = ts_name.removesuffix("_joined")
        sources, refs = reference(
            self.corpus,
            split,
            d.src_lang,
            d.tgt_lang,
            list(self.study.join_ks) if ts_name != split else None,
        )
        if ts["sources_sha256"] != lines_sha256(sources):
            self.bad.append(f"{self.scores_name}: {ts_name} was scored on other source lines")
            return
        if (ts["signature"], ts["chrf_signature"]) != (signature(BLEU()), signature(CHRF())):
            self.bad.append(
                f"{self.scores_name}: {ts_name}'s signatures {ts['signature']!r}, "
                f"{ts['chrf_signature']!r} are not this sacreBLEU's"
            )
        alpha = self.report["alpha_choice"][self.label]["alpha"]
        beam = f"{ts_name}.beam{self.study.beam_size}_a{alpha:g}.txt"
        for name, rows, drops, metrics in (
            (beam, [*ts["overall"], *ts["buckets"]], ts["drops"], ("bleu", "chrf")),
            (f"{ts_name}.txt", ts["greedy"]["buckets"], ts["greedy"]["drops"], ("bleu",)),
        ):
            hyps = self.hyps(name, sources, refs)
            if hyps is None:
                continue
            stats = _stats(self.hyps_dir / name, hyps, refs, metrics)
            where = f"{self.hyps_dir / name} -> {ts_name}"
            if not self.summed_checked:
                # sacreBLEU's public path against the summed statistics the buckets use, on
                # this model's first file: it checks the method, and scoring every file
                # twice would cost a third of this test
                self.summed_checked = True
                self.compare(
                    scorer("bleu", refs).corpus_score(hyps, None).score,
                    stats.score("bleu", list(range(len(hyps)))),
                    f"{where} summed",
                )
            for row in _study_rows(rows, self.label):
                bucket = f"{row['min_len']}-{row['max_len'] or ''}"
                idx = in_bucket(sources, bucket)
                if len(idx) != row["n"]:
                    self.bad.append(f"{where} {bucket}: {len(idx)} lines, the JSON {row['n']}")
                for metric in metrics:
                    self.compare(
                        stats.score(metric, idx), row[metric]["score"], f"{where} {bucket} {metric}"
                    )
            for drop in (x for x in drops if x["system"] == self.label):
                for bucket, value in zip(drop["buckets"], drop["bleu"], strict=True):
                    self.compare(
                        stats.score("bleu", in_bucket(sources, bucket)),
                        value["score"],
                        f"{where} drop {bucket}",
                    )

    def val_scores(self) -> None:
        """The val score of each alpha: the mean BLEU on val and on val joined
        ``data.valid_join_ks`` at a time (nmt/commands/study_decode.py, choose_alpha)."""
        d = self.cfg.data
        val = [
            p
            for p in read_dir_split(self.corpus, d.valid_split, d.src_lang, d.tgt_lang)
            if p.src and p.tgt
        ]
        sets = [("val", [p.src for p in val], [p.tgt for p in val])]
        if d.valid_join_ks:
            j = long_sentence_set(sets[0][1], sets[0][2], d.valid_join_ks)
            sets.append(("val_joined", j.sources, j.references))
        for a, want in self.report["alpha_choice"][self.label]["val_score_by_alpha"].items():
            bleus = []
            for name, sources, refs in sets:
                hyps = self.hyps(f"{name}.beam{self.study.beam_size}_a{a}.txt", sources, refs)
                if hyps is not None:
                    bleus.append(scorer("bleu", refs).corpus_score(hyps, None).score)
            if len(bleus) == len(sets):
                self.compare(sum(bleus) / len(bleus), want, f"{self.hyps_dir} val, alpha {a}")


def check_study_model(
    entry: dict[str, Any], label: str, repo: Path, corpus: Path
) -> tuple[int, list[str]]:
    """(numbers compared, mismatches) for one model ``label`` of a ``study_archives`` entry:
    every test set, beam and greedy, whole set and buckets, the drops, and the val scores
    its alpha was chosen by."""
    model = _StudyModel(entry, label, repo, corpus)
    for ts_name in model.report["test_sets"]:
        model.test_set(ts_name)
    model.val_scores()
    return model.count, model.bad


def _study_labels() -> list[tuple[int, str]]:
    out = []
    for i, entry in enumerate(_manifest()["study_archives"]):
        report = json.loads((REPO / entry["scores"]).read_text(encoding="utf-8"))
        out += [(i, label) for label in report["alpha_choice"]]
    return out


def _committed_hypothesis_files() -> set[Path]:
    """Translation files in results/, reports/ and the shipped models/: any file in a ``hyps/``
    folder but the key files, and any gzip'd file (the corpus itself is never committed).
    results/blind/ is left out: its references are withheld on purpose, so nothing here can
    score it."""
    found = set()
    for top in ("results", "reports", "models"):
        for p in (REPO / top).rglob("*"):
            if (REPO / "results" / "blind") in p.parents:
                continue
            if p.is_file() and (
                (p.parent.name == "hyps" and not p.name.endswith(".key.json")) or p.suffix == ".gz"
            ):
                found.add(p)
    return found


def test_manifest_covers_every_committed_translation_file():
    """Every path the manifest names exists, every translation file is ≤ 1 MiB and named by
    the manifest (a study's report covers its models' ``hyps/`` folders in the archive), and
    each study config (with its overrides) names that archive and that report."""
    m = _manifest()
    covered = set()
    for entry in m["study_archives"]:
        study = load_study_config(REPO / entry["config"], entry.get("overrides"))
        assert study.archive_dir is not None, f"{entry['config']} keeps no archive"
        assert study.archive_dir.format(name=study.name) == entry["archive"], entry
        assert f"{study.report_dir.format(name=study.name)}/results.json" == entry["scores"]
        report = json.loads((REPO / entry["scores"]).read_text(encoding="utf-8"))
        for label in report["alpha_choice"]:
            folder = REPO / entry["archive"] / f"{study.run_prefix}_{label}" / "hyps"
            assert folder.is_dir(), folder
            covered |= {p for p in folder.iterdir() if not p.name.endswith(".key.json")}
    for entry in m["files"]:
        assert (REPO / entry["scores"]).is_file(), entry["scores"]
        scores = json.loads((REPO / entry["scores"]).read_text(encoding="utf-8"))
        for check in entry["checks"]:
            assert check["metric"] in ("bleu", "bleu_lc", "chrf", "papers"), check
            pointer(scores, check["value"])
            pointer(scores, check["signature"])
        covered.add(REPO / entry["hypotheses"])
    found = _committed_hypothesis_files()
    assert found, "no committed translations found: is the archive still there?"
    assert not found - covered, f"not in results/hypotheses.json: {sorted(found - covered)}"
    assert not covered - found, f"named but missing: {sorted(covered - found)}"
    big = [p for p in found if p.stat().st_size > MAX_BYTES]
    assert not big, f"over 1 MiB (gzip them): {big}"


def _need_corpus() -> None:
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K} (set NMT_MULTI30K)")


@pytest.mark.parametrize("index,label", _study_labels())
def test_study_archive_translations_rescore_to_the_report(index, label):
    _need_corpus()
    count, bad = check_study_model(_manifest()["study_archives"][index], label, REPO, MULTI30K)
    assert not bad, "\n".join(bad)
    assert count > 0


def test_file_entries_rescore_to_their_json():
    _need_corpus()
    entries = _manifest()["files"]
    if not entries:
        pytest.skip("results/hypotheses.json names no single files yet")
    for entry in entries:
        count, bad = check_file(entry, REPO, MULTI30K)
        assert not bad, "\n".join(bad)
        assert count == len(entry["checks"])


def test_check_file_finds_a_wrong_number_and_a_wrong_signature(tmp_path):
    """The checker on a made-up corpus: a right entry passes; a number off in the second
    decimal, a bucket's number, or a signature of another sacreBLEU version is named."""
    src = ["ein mann läuft .", "zwei hunde spielen im schnee vor dem haus .", "eine katze ."]
    ref = ["a man runs .", "two dogs play in the snow in front of the house .", "a cat ."]
    hyp = ["a man walks .", "two dogs are playing in snow in front of the house .", "a cat ."]
    corpus = tmp_path / "corpus"
    write_split(corpus, "test_x", "de", src, gz=True)
    write_split(corpus, "test_x", "en", ref, gz=True)
    (tmp_path / "hyps.en.gz").write_bytes(gzip.compress("".join(h + "\n" for h in hyp).encode()))
    bleu, chrf = BLEU(), CHRF()
    short = BLEU().corpus_score(hyp[:1] + hyp[2:], [ref[:1] + ref[2:]]).score
    scores = {
        "test": {
            "bleu": bleu.corpus_score(hyp, [ref]).score,
            "sig": str(bleu.get_signature()),
            "chrf": chrf.corpus_score(hyp, [ref]).score,
            "chrf_sig": str(chrf.get_signature()),
            "buckets": [{"lo": 1, "bleu": short}],
        }
    }
    entry = {
        "hypotheses": "hyps.en.gz",
        "split": "test_x",
        "src_lang": "de",
        "tgt_lang": "en",
        "scores": "scores.json",
        "checks": [
            {"metric": "bleu", "value": "test/bleu", "signature": "test/sig"},
            {"metric": "chrf", "value": "test/chrf", "signature": "test/chrf_sig"},
            {
                "metric": "bleu",
                "bucket": "1-5",
                "value": "test/buckets/lo=1/bleu",
                "signature": "test/sig",
            },
        ],
    }

    def run(s: dict) -> list[str]:
        (tmp_path / "scores.json").write_text(json.dumps(s))
        count, bad = check_file(entry, tmp_path, corpus)
        assert count == 3
        return bad

    assert run(scores) == []
    off = json.loads(json.dumps(scores))
    off["test"]["bleu"] += 0.01
    off["test"]["buckets"][0]["bleu"] -= 0.02
    bad = run(off)
    assert len(bad) == 2 and "test/bleu" in bad[0] and "lo=1" in bad[1], bad
    old = json.loads(json.dumps(scores))
    old["test"]["sig"] = old["test"]["sig"].replace("version:", "version:1.")
    assert sum("signature" in b for b in run(old)) == 2  # both BLEU checks name it
