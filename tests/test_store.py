"""The memory-mapped training store (``data.store: arrow``): the same pairs, filtering and
batching rule as the in-memory path, a cache reused on resume and rebuilt when stale,
errors naming file and line, and training end to end (one process and DDP)."""

import dataclasses
import gzip
import json
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import nmt.data.store
from nmt.commands.train import run_training
from nmt.config.load import from_dict, load_config
from nmt.config.schema import Config, ConfigError, DataConfig, SubwordConfig
from nmt.data.batches import Example, collate, encode_pairs
from nmt.data.bucketing import make_batches, token_batches
from nmt.data.corpus import DataError, Pair
from nmt.data.store import ArrowTrainingSet, open_or_prepare, sample_pairs, stale_reason
from nmt.data.training_data import build_vocabs, sample_vocab_trainer, training_pairs

from conftest import torchrun, write_split

REPO = Path(__file__).resolve().parents[1]
WORDS = {
    "haus": "house",
    "hund": "dog",
    "katze": "cat",
    "mann": "man",
    "frau": "woman",
    "kind": "child",
    "läuft": "runs",
    "springt": "jumps",
    "rot": "red",
    "blau": "blue",
    "groß": "big",
    "klein": "small",
    "ein": "a",
    "der": "the",
    "im": "in the",
    "park": "park",
    "schnee": "snow",
    "wasser": "water",
    "ball": "ball",
    "spielt": "plays",
}
TINY_MODEL = [
    "model.emb_dim=16",
    "model.enc_hidden=16",
    "model.dec_hidden=32",
    "model.attn_dim=16",
    "model.output_dim=16",
    "model.dropout=0.0",
]


def synthetic_corpus(directory: Path, n: int = 3000, seed: int = 0) -> Path:
    """``n`` word-for-word training pairs (de.gz, en plain) with defects the readers clean
    or filter: empty sides, pairs over 30 words, control characters, Windows endings;
    plus a small val split."""
    rng = random.Random(seed)
    de, en = [], []
    for i in range(n):
        words = rng.choices(list(WORDS), k=rng.randint(1, 12))
        s, t = " ".join(words), " ".join(WORDS[w] for w in words)
        if i % 97 == 5:
            s = ""
        elif i % 89 == 7:
            t = " ".join([t] * 8)  # over the 30-word cap
        elif i % 53 == 3:
            s = s.replace(" ", "\x07", 1) + "\r"
        de.append(s)
        en.append(t)
    write_split(directory, "train", "de", de, gz=True)
    write_split(directory, "train", "en", en)
    write_split(directory, "val", "de", de[:40])
    write_split(directory, "val", "en", en[:40])
    return directory


def small_config(corpus: Path, out: Path, **data) -> Config:
    return Config(
        name="store",
        data=DataConfig(
            source="dir",
            path=str(corpus),
            src_lang="de",
            tgt_lang="en",
            max_train_words=30,
            store="arrow",
            **data,
        ),
        subwords=SubwordConfig(vocab_size=60, joint=True),
        train=dataclasses.replace(Config().train, out_dir=str(out)),
    )


def prepare(cfg: Config, vocabs=None, log=print):
    return open_or_prepare(
        cfg,
        cfg.out_dir() / "data",
        vocabs=vocabs,
        make_vocabs=sample_vocab_trainer(cfg, log),
        log=log,
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return synthetic_corpus(tmp_path_factory.mktemp("corpus"))


# ---------------------------------------------------------------- batching


def _examples(src_len, tgt_len):
    return [
        Example([5] * (s - 1) + [3], [5] * t, i)
        for i, (s, t) in enumerate(zip(src_len.tolist(), tgt_len.tolist(), strict=True))
    ]


@pytest.mark.parametrize("batch_size,max_tokens", [(7, None), (64, 90), (3, 40), (50, 10)])
def test_token_batches_are_make_batches_without_a_seed(batch_size, max_tokens):
    rng = np.random.default_rng(0)
    src_len = rng.integers(1, 30, 500).astype(np.int32)
    tgt_len = rng.integers(0, 30, 500).astype(np.int32)
    ours = token_batches(src_len, tgt_len, batch_size, max_tokens=max_tokens)
    theirs = make_batches(_examples(src_len, tgt_len), batch_size, max_tokens=max_tokens)
    assert [b.tolist() for b in ours] == [[e.index for e in b] for b in theirs]


def test_token_batches_obey_the_limits_and_depend_only_on_the_seed():
    rng = np.random.default_rng(1)
    src_len = rng.integers(1, 60, 5000).astype(np.int32)
    tgt_len = rng.integers(1, 60, 5000).astype(np.int32)
    batches = token_batches(src_len, tgt_len, 64, max_tokens=500, shuffle_seed=7)
    assert sorted(np.concatenate(list(batches)).tolist()) == list(range(5000))
    for b in batches:
        width = max(src_len[b].max(), tgt_len[b].max() + 1)
        assert len(b) <= 64 and (len(b) * width <= 500 or len(b) == 1)
    same = token_batches(src_len, tgt_len, 64, max_tokens=500, shuffle_seed=7)
    assert [b.tolist() for b in batches] == [b.tolist() for b in same]
    other = token_batches(src_len, tgt_len, 64, max_tokens=500, shuffle_seed=8)
    assert [b.tolist() for b in batches] != [b.tolist() for b in other]
    # what the trainer does with them: DDP shares and resume skips are views of one order
    share = batches[: len(batches) // 2 * 2][1::2]
    assert [b.tolist() for b in share] == [b.tolist() for b in list(batches)[1::2]][: len(share)]
    assert [b.tolist() for b in batches[3:]] == [b.tolist() for b in list(batches)[3:]]


# ---------------------------------------------------------------- the same data as memory


def test_arrow_and_memory_give_the_same_pairs_filtering_and_batches(corpus, tmp_path):
    cfg = small_config(corpus, tmp_path / "run")
    raw, kept, stats = training_pairs(cfg.data)
    src_vocab, tgt_vocab = build_vocabs(cfg, [p for p in raw if p.src and p.tgt])
    examples = encode_pairs(kept, src_vocab, tgt_vocab)
    opened = prepare(cfg)
    assert not opened.reused
    # a corpus smaller than subwords.sample_size: the sample is the whole split, in order
    assert opened.src_vocab.model_bytes == src_vocab.model_bytes
    got = opened.train_set
    assert len(got) == len(examples) == stats.kept
    assert stats.empty > 0 and stats.too_long > 0
    src, tgt = got.rows(np.arange(len(got)))
    assert src == [e.src for e in examples] and tgt == [e.tgt for e in examples]
    memory_stats = nmt.data.store.filter_stats(opened.manifest)
    assert (memory_stats.kept, memory_stats.empty, memory_stats.too_long) == (
        stats.kept,
        stats.empty,
        stats.too_long,
    )
    assert memory_stats.skipped == stats.skipped[:10]
    assert memory_stats.skipped_count == len(stats.skipped)
    assert got.token_counts() == (
        sum(len(e.src) for e in examples),
        sum(len(e.tgt) + 1 for e in examples),
    )
    for rows in got.batches(16, 120, shuffle_seed=3)[:5]:
        ours, theirs = got.collate(rows), collate([examples[i] for i in rows])
        for field in ("src", "src_len", "tgt_in", "tgt_out", "index"):
            assert torch.equal(getattr(ours, field), getattr(theirs, field)), field
    unshuffled = got.batches(16, 120, shuffle_seed=None)
    assert [b.tolist() for b in unshuffled] == [
        [e.index for e in b] for b in make_batches(examples, 16, max_tokens=120)
    ]


def test_vocabulary_sample_is_a_seeded_reservoir(corpus):
    d = DataConfig(source="dir", path=str(corpus), src_lang="de", tgt_lang="en")
    logs: list[str] = []
    src, tgt = sample_pairs(d, 100, seed=1, log=logs.append)
    assert len(src) == len(tgt) == 100 and all(src) and all(tgt)
    assert sample_pairs(d, 100, seed=1, log=logs.append) == (src, tgt)
    assert sample_pairs(d, 100, seed=2, log=logs.append)[0] != src
    whole, _ = sample_pairs(d, 10_000, seed=1, log=logs.append)
    raw = training_pairs(d)[0]
    assert whole == [p.src for p in raw if p.src and p.tgt]
    assert "vocabulary sample: 100 of" in logs[0]


# ---------------------------------------------------------------- the cache


def test_cache_is_reused_and_a_changed_file_or_setting_invalidates_it(
    corpus, tmp_path, monkeypatch
):
    local = synthetic_corpus(tmp_path / "corpus", n=500)
    cfg = small_config(local, tmp_path / "run")
    first = prepare(cfg)
    manifest = json.loads((tmp_path / "run" / "data" / "manifest.json").read_text())
    assert manifest["rows"] == len(first.train_set) and manifest["vocab_sha256"]

    def no_preparing(*_a, **_k):
        raise AssertionError("prepared again")

    with monkeypatch.context() as m:
        m.setattr(nmt.data.store, "prepare_store", no_preparing)
        logs: list[str] = []
        again = prepare(cfg, log=logs.append)  # a new run: the cached vocabulary too
        assert again.reused and again.src_vocab.model_bytes == first.src_vocab.model_bytes
        assert any("reused" in line and "not preparing again" in line for line in logs)
        resumed = prepare(cfg, vocabs=(first.src_vocab, first.tgt_vocab))
        assert resumed.reused
    cache = tmp_path / "run" / "data"

    def why(c: Config, vocabs=None) -> str | None:
        want = nmt.data.store.fingerprint(c, nmt.data.store.source_files(c.data))
        return stale_reason(cache, want, vocabs)

    smaller = dataclasses.replace(cfg, subwords=SubwordConfig(vocab_size=50, joint=True))
    assert why(smaller) == "subwords.vocab_size changed"
    # subword sampling re-segments each epoch from the same vocabulary and store
    sampled = dataclasses.replace(
        cfg,
        subwords=dataclasses.replace(
            cfg.subwords, sampling_alpha=0.2, nbest_size=8, sample_target=True
        ),
    )
    assert why(sampled) is None
    # a resumed run brings its vocabulary: what counts is that the cache was encoded with it
    assert why(smaller, (first.src_vocab, first.tgt_vocab)) is None
    capped = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_train_words=5))
    assert why(capped) == "data.max_train_words changed"
    write_split(local, "train", "en", ["changed"] * 500)
    assert why(cfg) == "the content of train.en changed"
    logs = []
    rebuilt = prepare(cfg, log=logs.append)
    assert not rebuilt.reused and "preparing" in logs[0] and "train.en changed" in logs[0]
    assert rebuilt.train_set.rows(np.array([0]))[1] == [rebuilt.tgt_vocab.encode("changed")]


def _swap_keeping_size_and_mtime(path: Path, i: int, j: int) -> None:
    """Swap lines ``i`` and ``j`` of a plain file, then give it back its modification
    time (what ``cp -p``, ``rsync -a`` and ``touch -r`` do): size and mtime are unchanged."""
    before = path.stat()
    lines = path.read_bytes().split(b"\n")
    lines[i], lines[j] = lines[j], lines[i]
    path.write_bytes(b"\n".join(lines))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_nmt40_a_content_change_that_keeps_size_and_mtime_rebuilds_the_store(tmp_path):
    """NMT-40: two target lines swapped, size and mtime restored: the old store would train
    on stale pairs. The content key sees the change, and the new store has the new pairs."""
    local = tmp_path / "corpus"
    write_split(local, "train", "de", ["der hund", "die katze", "ein haus", "der mann"] * 10)
    write_split(local, "train", "en", ["the dog", "the cat", "a house", "the man"] * 10)
    cfg = small_config(local, tmp_path / "run")
    first = prepare(cfg, log=lambda _m: None)
    _swap_keeping_size_and_mtime(local / "train.en", 1, 2)
    logs: list[str] = []
    again = prepare(cfg, log=logs.append)
    assert not again.reused
    assert "preparing" in logs[0] and "the content of train.en changed" in logs[0]
    _src, tgt = again.train_set.rows(np.array([1, 2]))
    assert tgt == [again.tgt_vocab.encode("a house"), again.tgt_vocab.encode("the cat")]
    # a resumed run (the checkpoint's vocabulary) is not served the stale store either
    _swap_keeping_size_and_mtime(local / "train.en", 1, 2)
    resumed = prepare(cfg, vocabs=(first.src_vocab, first.tgt_vocab), log=lambda _m: None)
    assert not resumed.reused
    assert resumed.train_set.rows(np.array([1]))[1] == [first.tgt_vocab.encode("the cat")]


def _dog_cat_corpus(tmp_path):
    """A 20-pair training split under ``tmp_path/corpus`` and a small config over it."""
    local = tmp_path / "corpus"
    write_split(local, "train", "de", ["der hund", "die katze"] * 10)
    write_split(local, "train", "en", ["the dog", "the cat"] * 10)
    return local, small_config(local, tmp_path / "run")


def test_store_key_is_content_a_moved_or_touched_file_still_reuses(tmp_path):
    local, cfg = _dog_cat_corpus(tmp_path)
    prepare(cfg, log=lambda _m: None)
    os.utime(local / "train.de", ns=(1, 1))  # a new time, the same content
    assert prepare(cfg, log=lambda _m: None).reused


def test_store_refuses_a_file_that_changes_while_it_is_prepared(tmp_path):
    local, cfg = _dog_cat_corpus(tmp_path)
    want = nmt.data.store.fingerprint(cfg, nmt.data.store.source_files(cfg.data))
    vocabs = build_vocabs(cfg, [Pair("der hund", "the dog", "")])
    _swap_keeping_size_and_mtime(local / "train.en", 0, 1)  # after the key was taken
    cache = tmp_path / "run" / "data"
    with pytest.raises(
        DataError,
        match=r"train\.en: changed while the training store was "
        r"being prepared",
    ):
        nmt.data.store.prepare_store(cfg.data, cache, vocabs=vocabs, want=want, log=lambda _m: None)
    assert not (cache / "manifest.json").exists() and not (cache / "train.arrow").exists()
    with pytest.raises(DataError, match="changed while"):
        sample_pairs(cfg.data, 100, seed=1, log=lambda _m: None, want=want)


def test_store_without_content_keys_or_with_other_vocab_files_is_rebuilt(tmp_path):
    local, cfg = _dog_cat_corpus(tmp_path)
    prepare(cfg, log=lambda _m: None)
    cache = tmp_path / "run" / "data"
    want = nmt.data.store.fingerprint(cfg, nmt.data.store.source_files(cfg.data))
    manifest = json.loads((cache / "manifest.json").read_text())
    # a store of an older nmt recorded sizes and times: it cannot vouch for the content
    old = {
        **manifest,
        "sources": [{"path": s["path"], "bytes": 1, "mtime_ns": 1} for s in manifest["sources"]],
    }
    (cache / "manifest.json").write_text(json.dumps(old))
    reason = stale_reason(cache, want, None)
    assert reason is not None and "before stores recorded the content" in reason
    (cache / "manifest.json").write_text(json.dumps(manifest))
    assert stale_reason(cache, want, None) is None
    other = build_vocabs(cfg, [Pair("ganz andere wörter", "other words entirely", "")])
    (cache / "vocab.tgt.model").write_bytes(other[1].model_bytes)
    assert stale_reason(cache, want, None) == (
        "its vocabulary files are not the ones it was encoded with"
    )


def test_bad_files_are_errors_naming_file_and_line_and_leave_no_cache(tmp_path):
    cases = {
        "utf8": (
            lambda d: (d / "train.de").write_bytes(b"gut\nschlecht \xff\n"),
            r"train\.de:2: invalid UTF-8",
        ),
        "counts": (
            lambda d: write_split(d, "train", "de", ["a", "b", "c"]),
            r"train\.de has 3 lines but .*train\.en has 2",
        ),
        "gzip": (
            lambda d: (d / "train.de.gz").write_bytes(
                gzip.compress(("ein satz\n" * 2).encode())[:-12]
            ),
            "cut short or corrupt",
        ),
    }
    for name, (write_bad, message) in cases.items():
        d = tmp_path / name
        write_split(d, "train", "en", ["a", "b"])
        write_split(d, "val", "de", ["a"])
        write_split(d, "val", "en", ["a"])
        write_bad(d)
        cfg = small_config(d, tmp_path / f"run_{name}")
        with pytest.raises(DataError, match=message):
            prepare(cfg)
        assert not (tmp_path / f"run_{name}" / "data" / "manifest.json").exists()
        # the same file fails the same way once a vocabulary exists (the encoding pass)
        vocab = build_vocabs(cfg, [Pair("a b", "c d", "")])
        with pytest.raises(DataError, match=message):
            prepare(cfg, vocabs=vocab)
        assert not list((tmp_path / f"run_{name}" / "data").glob("*.arrow*"))


def test_options_only_in_memory_are_config_errors_naming_the_key(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"data\.train_join_ks: joined training pairs need "
        r"data\.store memory",
    ):
        from_dict({"data": {"store": "arrow", "train_join_ks": [2]}})
    with pytest.raises(ConfigError, match=r"data\.store: arrow streams a directory"):
        from_dict({"data": {"store": "arrow", "source": "hf"}})
    with pytest.raises(ConfigError, match=r"data\.store: 'disk' is not one of memory, arrow"):
        load_config(REPO / "configs/multi30k_deen_additive.yaml", ["data.store=disk"])
    cfg = small_config(tmp_path / "nothing", tmp_path / "run")
    with pytest.raises(DataError, match="data.store: arrow streams a directory"):
        prepare(dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, source="auto")))


# ---------------------------------------------------------------- training


def _train_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    """``nmt train`` overrides for a tiny model on ``corpus`` with the arrow store."""
    return [
        f"data.path={corpus}",
        "data.source=dir",
        "data.store=arrow",
        "data.max_train_words=30",
        "data.test_splits=[]",
        "subwords.vocab_size=60",
        "subwords.joint=true",
        *TINY_MODEL,
        "train.batch_size=32",
        "train.max_tokens=400",
        "train.patience=null",
        "train.progress=false",
        "train.valid_max_sentences=10",
        "train.seed=3",
        f"train.out_dir={out}",
        *extra,
    ]


def _train(corpus: Path, out: Path, *extra: str, resume: bool = False) -> list[str]:
    logs: list[str] = []
    cfg = load_config(
        REPO / "configs/multi30k_deen_additive.yaml", _train_args(corpus, out, *extra)
    )
    run_training(cfg, resume=resume, log=logs.append)
    return logs


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "valid_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_training_with_the_arrow_store_runs_and_resumes_exactly(tmp_path, monkeypatch):
    corpus = synthetic_corpus(tmp_path / "corpus", n=1200)
    logs = _train(corpus, tmp_path / "straight", "train.max_epochs=2")
    assert any("training store: preparing" in line for line in logs)
    _train(corpus, tmp_path / "split", "train.max_epochs=1")

    def no_preparing(*_a, **_k):
        raise AssertionError("prepared again on resume")

    monkeypatch.setattr(nmt.data.store, "prepare_store", no_preparing)
    monkeypatch.setattr(nmt.data.store, "sample_pairs", no_preparing)
    logs = _train(corpus, tmp_path / "split", "train.max_epochs=2", resume=True)
    assert any("not preparing again" in line for line in logs)
    a, b = _records(tmp_path / "straight"), _records(tmp_path / "split")
    assert len(a) == 2
    assert [(r["step"], r["train_loss"], r["val_loss"]) for r in a] == [
        (r["step"], r["train_loss"], r["val_loss"]) for r in b
    ]


@pytest.mark.slow
def test_torchrun_two_processes_train_from_the_arrow_store(tmp_path):
    corpus = synthetic_corpus(tmp_path / "corpus", n=600)
    r = subprocess.run(
        [
            *torchrun(2),
            "-m",
            "nmt",
            "train",
            "configs/multi30k_deen_additive.yaml",
            *_train_args(corpus, tmp_path / "ddp", "train.max_epochs=1"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "ranks agree: identical weights, learning rate and step on 2 ranks" in r.stderr
    assert r.stderr.count("training store: preparing") == 1  # rank 0 prepares, rank 1 waits
    opened = ArrowTrainingSet(tmp_path / "ddp" / "data" / "train.arrow")
    n_batches = len(opened.batches(32, 400, shuffle_seed=3 * 100_003))
    assert _records(tmp_path / "ddp")[-1]["step"] == n_batches // 2
