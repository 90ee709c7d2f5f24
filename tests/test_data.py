"""Corpus readers, their error messages, filtering and length-bucketed batching."""

import gzip
import os
import pathlib
import subprocess
import sys

import pytest

from nmt.config.schema import DataConfig
from nmt.data.batches import Example, filter_training_pairs
from nmt.data.bucketing import make_batches
from nmt.data.corpus import DataError, Pair, read_dir_split, read_split, read_tsv_split

from conftest import write_split


def test_reads_plain_and_gzip_with_bom_and_crlf(tmp_path):
    write_split(tmp_path, "train", "de", ["\ufeffHallo Welt\r", "Guten Tag\r"], gz=True)
    write_split(tmp_path, "train", "en", ["Hello world", "Good day"])
    pairs = read_dir_split(tmp_path, "train", "de", "en")
    assert [(p.src, p.tgt) for p in pairs] == [
        ("Hallo Welt", "Hello world"),
        ("Guten Tag", "Good day"),
    ]
    assert pairs[1].origin.endswith("train.de.gz:2")


def test_different_line_counts_are_an_error_naming_both_files(tmp_path):
    write_split(tmp_path, "train", "de", ["a", "b", "c"])
    write_split(tmp_path, "train", "en", ["a", "b"])
    with pytest.raises(DataError, match=r"train\.de has 3 lines but .*train\.en has 2"):
        read_dir_split(tmp_path, "train", "de", "en")


def test_invalid_utf8_names_file_and_line(tmp_path):
    write_split(tmp_path, "train", "en", ["ok", "fine"])
    (tmp_path / "train.de").write_bytes(b"gut\nschlecht \xff\xfe\n")
    with pytest.raises(DataError, match=r"train\.de:2: invalid UTF-8"):
        read_dir_split(tmp_path, "train", "de", "en")


def test_truncated_gzip_is_an_error(tmp_path):
    write_split(tmp_path, "train", "en", ["x"] * 1000)
    blob = gzip.compress(("ein satz\n" * 1000).encode())
    (tmp_path / "train.de.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError, match="cut short or corrupt"):
        read_dir_split(tmp_path, "train", "de", "en")


def test_missing_split_and_directory(tmp_path):
    write_split(tmp_path, "train", "de", ["a"])
    with pytest.raises(DataError, match=r"no file train\.en or train\.en\.gz"):
        read_dir_split(tmp_path, "train", "de", "en")
    with pytest.raises(DataError, match="corpus directory not found"):
        read_dir_split(tmp_path / "nope", "train", "de", "en")


def test_missing_test_2017_mscoco_points_to_where_it_is_downloaded(tmp_path):
    """The workplace's copy of Multi30k lacks test_2017_mscoco, so its error names data/README.md;
    other splits' errors do not."""
    write_split(tmp_path, "train", "de", ["a"])
    with pytest.raises(DataError, match=r"test_2017_mscoco\.de\.gz .*data/README\.md"):
        read_dir_split(tmp_path, "test_2017_mscoco", "de", "en")
    with pytest.raises(DataError) as missing:
        read_dir_split(tmp_path, "train", "de", "en")
    assert "README" not in str(missing.value)


def test_control_characters_are_replaced(tmp_path):
    write_split(tmp_path, "val", "de", ["a\x00b\x07c"])
    write_split(tmp_path, "val", "en", ["x"])
    assert read_dir_split(tmp_path, "val", "de", "en")[0].src == "a b c"


def test_tsv_reader_and_bad_line(tmp_path):
    good = tmp_path / "train.tsv"
    good.write_text("Hallo\tHello\nTschüss\tBye\n", encoding="utf-8")
    cfg = DataConfig(source="tsv", path=str(tmp_path / "{split}.tsv"), src_lang="de", tgt_lang="en")
    assert [(p.src, p.tgt) for p in read_split(cfg, "train")] == [
        ("Hallo", "Hello"),
        ("Tschüss", "Bye"),
    ]
    (tmp_path / "bad.tsv").write_text("a\tb\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tsv:2: expected 2 tab-separated fields"):
        read_tsv_split(tmp_path / "bad.tsv")


def test_limit_and_auto_source(tmp_path):
    write_split(tmp_path, "train", "de", ["a", "b", "c"])
    write_split(tmp_path, "train", "en", ["x", "y", "z"])
    cfg = DataConfig(path=str(tmp_path), src_lang="de", tgt_lang="en")
    assert len(read_split(cfg, "train", limit=2)) == 2


def test_length_filter_applies_to_training_only():
    pairs = [
        Pair("a b c", "x y z", ""),
        Pair("", "x", ""),
        Pair("a " * 100, "x", ""),
        Pair("a", "y " * 10_000, ""),
    ]
    kept, stats = filter_training_pairs(pairs, max_words=50)
    assert [p.src for p in kept] == ["a b c"]
    assert (stats.kept, stats.empty, stats.too_long) == (1, 1, 2)


def test_batches_group_similar_lengths_and_are_deterministic():
    examples = [Example([5] * n + [3], [5] * n, i) for i, n in enumerate(range(1, 101))]
    batches = make_batches(examples, batch_size=10, shuffle_seed=7)
    assert sorted(e.index for b in batches for e in b) == list(range(100))
    assert all(max(len(e.src) for e in b) - min(len(e.src) for e in b) <= 10 for b in batches)
    again = make_batches(examples, batch_size=10, shuffle_seed=7)
    assert [[e.index for e in b] for b in batches] == [[e.index for e in b] for b in again]
    other = make_batches(examples, batch_size=10, shuffle_seed=8)
    assert [[e.index for e in b] for b in batches] != [[e.index for e in b] for b in other]


def test_token_budget_caps_batch_size():
    examples = [Example([5] * 19 + [3], [5] * 19, i) for i in range(100)]
    batches = make_batches(examples, batch_size=64, max_tokens=200)
    assert all(len(b) * 20 <= 200 for b in batches)
    assert sum(len(b) for b in batches) == 100


def test_hub_offline_fails_at_once_with_local_files_hint(tmp_path):
    code = (
        "from nmt.config.schema import DataConfig\n"
        "from nmt.data.corpus import read_split, DataError\n"
        "try:\n"
        "    read_split(DataConfig(source='hf', hf_name='bentrevett/multi30k'), 'train')\n"
        "except DataError as e:\n"
        "    print('DataError:', e)\n"
    )
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert "DataError:" in out.stdout, out.stderr
    assert "data.source=dir" in out.stdout


def _fake_hub(monkeypatch, rows):
    import datasets

    import nmt.data.corpus

    monkeypatch.setattr(nmt.data.corpus, "_hub_reachable", lambda timeout_s=5.0: True)
    calls = []

    def load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return rows

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_hub_translation_column_and_split_mapping(monkeypatch):
    calls = _fake_hub(monkeypatch, [{"translation": {"fr": "Bonjour", "en": "Hello"}}])
    cfg = DataConfig(source="hf", hf_name="wmt14", hf_config="fr-en", src_lang="en", tgt_lang="fr")
    pairs = read_split(cfg, "val")
    assert (pairs[0].src, pairs[0].tgt) == ("Hello", "Bonjour")
    assert calls == [("wmt14", "fr-en", "validation")]


def test_hub_language_columns_and_missing_keys(monkeypatch):
    _fake_hub(monkeypatch, [{"de": "Hallo", "en": "Hello"}])
    assert read_split(DataConfig(source="hf"), "train")[0].src == "Hallo"
    _fake_hub(monkeypatch, [{"translation": {"de": "Hallo", "en": "Hello"}}])
    with pytest.raises(DataError, match=r"no 'fr'/'en' keys \(found \['de', 'en'\]\)"):
        read_split(DataConfig(source="hf", src_lang="fr"), "train")


def test_joined_training_pairs_are_added_and_then_length_filtered():
    from nmt.data.batches import add_joined_pairs

    pairs = [Pair(f"s{i} a b", f"t{i} x", f"f:{i}") for i in range(1, 6)]
    out = add_joined_pairs(pairs, (2, 3))
    assert len(out) == 5 + 2 + 1
    assert (out[5].src, out[5].tgt) == ("s1 a b s2 a b", "t1 x t2 x")
    assert (out[7].src, out[7].tgt) == ("s1 a b s2 a b s3 a b", "t1 x t2 x t3 x")
    kept, stats = filter_training_pairs(out, max_words=6)
    assert stats.too_long == 1 and len(kept) == 7


def test_joined_training_data_counts_per_k_no_pair_lost_or_duplicated_caps_applied():
    from collections import Counter

    from nmt.data.batches import add_joined_pairs, evenly_spaced

    n = 103
    pairs = [Pair(" ".join([f"s{i}"] * (1 + i % 7)), f"t{i}", f"f:{i + 1}") for i in range(n)]
    ks, per_k = (2, 3, 4, 5), 12
    out = add_joined_pairs(pairs, ks, per_k)
    assert out[:n] == pairs  # every single pair kept, in order
    joined = out[n:]
    by_k = Counter(p.tgt.count(" ") + 1 for p in joined)
    assert by_k == {k: min(per_k, n // k) for k in ks}
    # every joined pair is exactly its k consecutive originals, and none appears twice
    assert len({(p.src, p.tgt) for p in joined}) == len(joined)
    for p in joined:
        ids = [int(t[1:]) for t in p.tgt.split()]
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        assert ids[0] % len(ids) == 0  # non-overlapping blocks starting at line 0
        assert p.src == " ".join(pairs[i].src for i in ids)
        assert p.origin == f"f:{ids[0] + 1} (+{len(ids) - 1} joined)"
    # per_k=None takes every block; per_k larger than the blocks takes them all
    assert len(add_joined_pairs(pairs, (2,))) == n + n // 2
    assert add_joined_pairs(pairs, (2,), 10_000) == add_joined_pairs(pairs, (2,))
    assert evenly_spaced(10, 4) == [0, 2, 5, 7] and evenly_spaced(3, None) == [0, 1, 2]
    # the word cap applies to joined pairs like any other (both sides)
    cap = 12
    kept, stats = filter_training_pairs(out, max_words=cap)
    assert all(len(p.src.split()) <= cap and len(p.tgt.split()) <= cap for p in kept)
    assert stats.too_long == sum(len(p.src.split()) > cap or len(p.tgt.split()) > cap for p in out)
    assert len(kept) + stats.too_long == len(out)


def test_training_pairs_with_per_k_and_cap_from_a_config(tmp_path):
    from nmt.data.training_data import training_pairs

    src = [" ".join(["w"] * (3 + i % 5)) for i in range(40)]
    write_split(tmp_path, "train", "de", src)
    write_split(tmp_path, "train", "en", [f"t{i}" for i in range(40)])
    d = DataConfig(
        source="dir",
        path=str(tmp_path),
        train_join_ks=(2, 4),
        train_join_per_k=5,
        max_train_words=20,
    )
    raw, kept, stats = training_pairs(d)
    assert len(raw) == 40 and stats.kept + stats.too_long == 40 + 5 + 5
    assert all(len(p.src.split()) <= 20 for p in kept)


# --- readers never guess (issue 12 kind 5) -------------------------------------------------


def test_plain_and_gzip_copies_of_a_split_are_ambiguous(tmp_path):
    write_split(tmp_path, "train", "de", ["a"])
    write_split(tmp_path, "train", "de", ["b"], gz=True)
    write_split(tmp_path, "train", "en", ["c"])
    with pytest.raises(DataError, match=r"both train\.de and train\.de\.gz exist"):
        read_dir_split(tmp_path, "train", "de", "en")


def test_every_malformed_tsv_line_and_bad_utf8_line_is_named(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"a\tb\nno tab\nx\ty\tz\nok\tfine\n\xff\xfe\tq\n")
    with pytest.raises(DataError) as e:
        read_tsv_split(path)
    msg = str(e.value)
    assert msg.startswith("3 malformed lines in")
    assert all(f"c.tsv:{n}:" in msg for n in (2, 3, 5)) and "c.tsv:4" not in msg
    txt = tmp_path / "t.de"
    txt.write_bytes(b"gut\n\xff eins\nauch gut\n\xc3 zwei\n")
    from nmt.data.corpus import read_lines

    with pytest.raises(DataError, match=r"2 lines of .*t\.de are not UTF-8: .*t\.de:2: .*t\.de:4:"):
        read_lines(txt)


def test_records_with_missing_values_or_two_layouts_are_reported_with_their_index():
    from nmt.data.corpus import pairs_from_records

    rows = [
        {"de": "Hallo", "en": "Hello"},
        {"de": None, "en": "x"},
        {"de": "y", "en": 3},
        {"translation": {"de": "a", "en": "b"}, "de": "c", "en": "d"},
        {"translation": {"de": "a", "en": "b"}},
    ]
    with pytest.raises(DataError) as e:
        pairs_from_records(rows, "de", "en", "ds[train]")
    msg = str(e.value)
    assert msg.startswith("3 malformed records")
    assert "ds[train][1]: 'de' is missing (None)" in msg
    assert "ds[train][2]: 'en' is int" in msg
    assert "ds[train][3]: both a 'translation' column" in msg
    good = pairs_from_records([rows[0], rows[4]], "de", "en", "ds[train]")
    assert [(p.src, p.tgt, p.origin) for p in good] == [
        ("Hallo", "Hello", "ds[train][0]"),
        ("a", "b", "ds[train][1]"),
    ]
    many = [{"de": None, "en": "x"}] * 25
    with pytest.raises(DataError, match=r"^25 malformed records: .*\[9\]: .*; and 15 more$"):
        pairs_from_records(many, "de", "en", "ds")


def test_skipped_training_pairs_are_reported_with_their_lines():
    pairs = [
        Pair("a b", "c", "f:1"),
        Pair("", "x", "f:2"),
        Pair("a " * 9, "c", "f:3"),
        Pair("a " * 9, "c", "f:1 (+1 joined)"),
    ]
    kept, stats = filter_training_pairs(pairs, max_words=5)
    assert [p.origin for p in kept] == ["f:1"]
    assert stats.skipped == ("f:2 (empty side)", "f:3 (over 5 words)")
    assert (stats.empty, stats.too_long) == (1, 2)


def test_hub_check_is_bounded_even_when_name_lookup_hangs(monkeypatch):
    """The check returns while the lookup still hangs (no clock is read: the hang is an
    event that is only set after the check has returned)."""
    import socket
    import threading

    from nmt.data import corpus

    started, released = threading.Event(), threading.Event()

    def hang(*args, **kwargs):
        started.set()
        released.wait()
        raise OSError("no answer")

    monkeypatch.setattr(socket, "create_connection", hang)
    try:
        assert corpus._hub_reachable(timeout_s=0.05) is False
        assert started.is_set() and not released.is_set()
    finally:
        released.set()


def test_unknown_piece_in_output_is_shown_not_dropped(toy_vocabs):
    from nmt.data.vocab import BOS, EOS, PAD, UNK

    _src, tgt = toy_vocabs
    ids = tgt.encode("a man runs")
    text = tgt.decode([BOS, ids[0], UNK, *ids[1:], EOS, PAD])
    assert "⁇" in text
    assert text.replace("⁇", "").split() == tgt.decode(ids).split()


def test_gzip_is_recognised_by_its_magic_bytes_whatever_the_name(tmp_path):
    import gzip

    from nmt.data.corpus import iter_lines
    from nmt.ops.files import open_bytes

    (tmp_path / "plain.de").write_bytes(b"ein hund\n")
    (tmp_path / "packed.de").write_bytes(gzip.compress(b"ein hund\n"))
    for name in ("plain.de", "packed.de"):
        with open_bytes(tmp_path / name) as f:
            assert f.read() == b"ein hund\n"
    bad: list[str] = []
    assert list(iter_lines(tmp_path / "packed.de", bad)) == ["ein hund"] and not bad


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes and SIGALRM")
@pytest.mark.parametrize("packed", [False, True])
def test_a_pipe_is_read_whole_plain_or_gzip(tmp_path, packed):
    """A pipe cannot be reopened: open_bytes used to read its gzip magic bytes, close it
    and open it again, so `nmt translate -i <(...)` lost its first bytes (or hung)."""
    import signal
    import threading

    from nmt.ops.files import open_bytes

    fifo = tmp_path / "pipe.de"
    os.mkfifo(fifo)
    text = b"ein hund\neine katze\n"
    data = gzip.compress(text) if packed else text

    def write() -> None:
        with open(fifo, "wb") as w:
            w.write(data)

    def hung(*_) -> None:
        raise TimeoutError("open_bytes waited for a writer that had gone: the pipe was reopened")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with open_bytes(fifo) as f:
            assert f.read() == text
            raw = f.fileobj if packed else f  # type: ignore[attr-defined]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    writer.join(5)
    assert not writer.is_alive() and raw.closed


def test_a_missing_split_lists_splits_and_joined_sets(
    tmp_path: pathlib.Path,
) -> None:
    """`--split test_2099` listed the splits with files but not the joined long-sentence
    sets that evaluate also accepts (a new user's report)."""
    from nmt.data.corpus import split_files

    for name in ("test_a.de", "test_a.en", "val.de", "val.en"):
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        split_files(tmp_path, "test_2099", "de", "en")
    assert "test_a, val" in str(e.value) and "SPLIT_joined" in str(e.value)


def test_id_to_pieces_reads_sentencepiece_pieces_and_names_a_bad_id(toy_vocabs):
    import torch

    v = toy_vocabs[1]
    ids = list(range(len(v)))
    assert v.id_to_pieces(ids) == [v.sp.id_to_piece(i) for i in ids]
    assert v.id_to_pieces(torch.tensor([5, 0, 5])) == [v.sp.id_to_piece(i) for i in (5, 0, 5)]
    assert v.id_to_piece(3) == v.sp.id_to_piece(3) and v.id_to_pieces([]) == []
    for bad in (-1, len(v)):  # a table read as a list would give the last piece for -1
        with pytest.raises(IndexError, match=f"piece id {bad} is outside 0..{len(v) - 1}"):
            v.id_to_pieces([4, bad])
