"""Training-only noise (nmt/data/noise.py): subword sampling (Kudo 2018) varies the training
segmentation by epoch and leaves validation alone, word dropout hits the expected share of
training pieces only, both are seeded and resume exactly, and their off values leave
training bit-identical."""

import json
import random
from pathlib import Path

import pytest
import torch

import nmt.data.vocab
import nmt.training.loop
import nmt.training.validation
from nmt.commands.train import run_training
from nmt.config.load import apply_overrides, from_dict
from nmt.config.schema import ConfigError
from nmt.data.batches import Batch, ExampleSet, encode_pairs
from nmt.data.corpus import Pair
from nmt.data.noise import SampledExampleSet, Sampling, drop_words, step_generator
from nmt.data.vocab import BOS, EOS, PAD, UNK, train_vocab
from nmt.model.seq2seq import Seq2Seq

from conftest import write_split

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
    "schnee": "snow",
}


def _pairs(n: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.choices(list(WORDS), k=rng.randint(1, 8))
        out.append(Pair(" ".join(words), " ".join(WORDS[w] for w in words), f"toy:{i}"))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for split, pairs in (("train", _pairs(160, 0)), ("val", _pairs(16, 1))):
        write_split(d, split, "de", [p.src for p in pairs])
        write_split(d, split, "en", [p.tgt for p in pairs])
    return d


def _config(corpus: Path, out: Path, *overrides: str):
    raw = {
        "name": "noise",
        "data": {
            "source": "dir",
            "path": str(corpus),
            "src_lang": "de",
            "tgt_lang": "en",
            "test_splits": ["val"],
        },
        "subwords": {"vocab_size": 48},
        "model": {
            "emb_dim": 8,
            "enc_hidden": 8,
            "dec_hidden": 16,
            "attn_dim": 8,
            "output_dim": 8,
            "dropout": 0.3,
        },
        "train": {
            "batch_size": 16,
            "max_epochs": 2,
            "patience": None,
            "threads": 1,
            "device": "cpu",
            "precision": "fp32",
            "progress": False,
            "seed": 3,
            "out_dir": str(out),
        },
        "search": {"precision": "fp32"},
    }
    return from_dict(apply_overrides(raw, list(overrides)))


def _records(out: Path) -> list[tuple]:
    return [
        (r["step"], r["train_loss"], r["val_loss"])
        for r in map(json.loads, (out / "valid_log.jsonl").read_text().splitlines())
    ]


NOISY = (
    "subwords.sampling_alpha=0.1",
    "subwords.sample_target=true",
    "model.word_dropout=0.2",
    "model.word_dropout_target=true",
)


# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    "override,message",
    [
        ("subwords.sampling_alpha=-0.1", "subwords.sampling_alpha: must be >= 0"),
        ("subwords.nbest_size=0", "subwords.nbest_size: must be -1"),
        ("subwords.nbest_size=1", "subwords.nbest_size: must be -1"),
        ("subwords.nbest_size=513", "subwords.nbest_size: must be -1"),
        ("model.word_dropout=1.0", "model.word_dropout: must be in [0, 1)"),
        ("model.word_dropout=-0.1", "model.word_dropout: must be in [0, 1)"),
    ],
)
def test_impossible_noise_settings_name_the_key(override, message):
    with pytest.raises(
        ConfigError,
        match=message.replace(".", r"\.")
        .replace("[", r"\[")
        .replace("(", r"\(")
        .replace(")", r"\)"),
    ):
        from_dict(apply_overrides({}, [override]))


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["subwords.model_type=bpe", "subwords.sampling_alpha=1.0"],
            "subwords.sampling_alpha: with bpe it is BPE-dropout's probability",
        ),
        (
            ["subwords.model_type=bpe", "subwords.sampling_alpha=0.1", "subwords.nbest_size=64"],
            "subwords.nbest_size: bpe samples by BPE-dropout",
        ),
        (
            ["data.store=arrow", "data.source=dir", "subwords.sampling_alpha=0.1"],
            "subwords.sampling_alpha: subword sampling needs data.store memory",
        ),
    ],
)
def test_unsupported_sampling_combinations_are_refused_naming_the_option(overrides, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(apply_overrides({}, overrides))


def test_noise_defaults_are_off_and_sampling_settings_load():
    cfg = from_dict({})
    assert cfg.subwords.sampling_alpha is None and cfg.subwords.nbest_size == -1
    assert not cfg.subwords.sample_target and cfg.model.word_dropout == 0.0
    assert Sampling.from_config(cfg.subwords) is None
    off = from_dict(apply_overrides({}, ["subwords.sampling_alpha=0"]))
    assert Sampling.from_config(off.subwords) is None
    on = from_dict(apply_overrides({}, ["subwords.sampling_alpha=0.1", "subwords.nbest_size=64"]))
    assert Sampling.from_config(on.subwords) == Sampling(0.1, 64, False)
    bpe = ["subwords.model_type=bpe", "subwords.sampling_alpha=0.1"]
    assert from_dict(apply_overrides({}, bpe)).subwords.nbest_size == -1


# ---------------------------------------------------------------- subword sampling


@pytest.mark.parametrize("model_type,nbest", [("unigram", -1), ("unigram", 8), ("bpe", -1)])
def test_sampling_varies_by_epoch_seed_keeps_the_text_and_leaves_encode_alone(model_type, nbest):
    pairs = _pairs(60, 2)
    src = train_vocab([p.src for p in pairs], 48, model_type=model_type)
    tgt = train_vocab([p.tgt for p in pairs], 48, model_type=model_type)
    best = encode_pairs(pairs, src, tgt)
    alpha = 0.1 if model_type == "unigram" else 0.2
    only_src = SampledExampleSet(pairs, src, tgt, Sampling(alpha, nbest, False))
    e1, e2, again = only_src.examples(11), only_src.examples(12), only_src.examples(11)
    assert [e.src for e in e1] != [e.src for e in e2]  # a new segmentation each epoch
    assert e1 == again  # a function of the seed, whatever was sampled in between
    assert [e.tgt for e in e1] == [e.tgt for e in best]  # sample_target false
    assert all(e.src[-1] == EOS and e.index == i for i, e in enumerate(e1))
    # a segmentation of the same text, not noise on it
    assert [src.decode(e.src) for e in e2] == [src.decode(e.src) for e in best]
    both = SampledExampleSet(pairs, src, tgt, Sampling(alpha, nbest, True))
    assert [e.tgt for e in both.examples(11)] != [e.tgt for e in both.examples(12)]
    # the deterministic encoding that validation, test and decoding use is untouched
    assert encode_pairs(pairs, src, tgt) == best
    assert [src.encode(p.src) + [EOS] for p in pairs] == [e.src for e in best]
    assert only_src.token_counts() == ExampleSet(best).token_counts()


@pytest.mark.slow
def test_training_samples_each_epoch_and_validates_on_the_best_segmentation(
    corpus, tmp_path, monkeypatch
):
    seen: dict[int, dict[int, list[int]]] = {}
    validated: list[list] = []
    step, loss = nmt.training.loop.Trainer.train_step, nmt.training.validation.validation_loss

    def spy_step(self, chunk):
        seen.setdefault(self.state.epoch, {}).update({e.index: e.src for e in chunk})
        return step(self, chunk)

    def spy_loss(model, examples, *a, **k):
        validated.append([(e.src, e.tgt) for e in examples])
        return loss(model, examples, *a, **k)

    monkeypatch.setattr(nmt.training.loop.Trainer, "train_step", spy_step)
    monkeypatch.setattr(nmt.training.validation, "validation_loss", spy_loss)
    logs: list[str] = []
    run_training(_config(corpus, tmp_path, "subwords.sampling_alpha=0.1"), log=logs.append)
    assert any("subword sampling: every epoch" in line for line in logs)
    assert set(seen) == {0, 1} and len(seen[0]) == len(seen[1]) == 160
    differ = sum(seen[0][i] != seen[1][i] for i in seen[0])
    assert differ > 40, differ
    assert len(validated) == 2 and validated[0] == validated[1]
    from nmt.model.checkpoint import read_payload, vocabs_of

    src, tgt = vocabs_of(read_payload(tmp_path / "last.pt"), "last.pt")
    val = [Pair(s, t, "") for s, t in zip(*_read_val(corpus), strict=True)]
    assert validated[0] == [(e.src, e.tgt) for e in encode_pairs(val, src, tgt)]


def _read_val(corpus: Path) -> tuple[list[str], list[str]]:
    return (
        (corpus / "val.de").read_text().splitlines(),
        (corpus / "val.en").read_text().splitlines(),
    )


# ---------------------------------------------------------------- word dropout


def test_word_dropout_replaces_the_expected_share_of_real_pieces_only():
    g = torch.Generator().manual_seed(0)
    B, S, T = 64, 40, 30
    src = torch.randint(4, 50, (B, S))
    src_len = torch.randint(1, S, (B,))
    src[torch.arange(S) >= src_len[:, None]] = PAD
    src[torch.arange(B), src_len - 1] = EOS
    tgt_out = torch.randint(4, 50, (B, T))
    tgt_in = torch.cat([torch.full((B, 1), BOS), tgt_out[:, :-1]], 1)
    batch = Batch(src, src_len, tgt_in, tgt_out, torch.arange(B))
    p = 0.25
    out = drop_words(batch, p, target=True, generator=g)
    real = (src != PAD) & (src != EOS)
    share = float((out.src[real] == UNK).float().mean())
    sigma = (p * (1 - p) / int(real.sum())) ** 0.5
    assert abs(share - p) < 4 * sigma, share
    assert torch.equal(out.src[~real], src[~real])  # PAD and EOS stay
    assert torch.equal(out.src[real & (out.src != UNK)], src[real & (out.src != UNK)])
    assert abs(float((out.tgt_in[:, 1:] == UNK).float().mean()) - p) < 0.03
    assert (out.tgt_in[:, 0] == BOS).all() and torch.equal(out.tgt_out, tgt_out)
    source_only = drop_words(batch, p, target=False, generator=torch.Generator().manual_seed(0))
    assert torch.equal(source_only.tgt_in, tgt_in) and torch.equal(source_only.src, out.src)
    again = drop_words(batch, p, target=True, generator=step_generator(3, 17))
    assert torch.equal(
        again.src, drop_words(batch, p, target=True, generator=step_generator(3, 17)).src
    )
    assert not torch.equal(
        again.src, drop_words(batch, p, target=True, generator=step_generator(3, 18)).src
    )


@pytest.mark.slow
def test_word_dropout_applies_to_training_steps_and_never_to_validation(
    corpus, tmp_path, monkeypatch
):
    calls: list[tuple[bool, torch.Tensor, torch.Tensor]] = []
    forward = Seq2Seq.forward

    def spy(self, src, src_len, tgt_in, tgt_out, **k):
        calls.append((self.training, src.clone(), tgt_in.clone()))
        return forward(self, src, src_len, tgt_in, tgt_out, **k)

    monkeypatch.setattr(Seq2Seq, "forward", spy)
    run_training(_config(corpus, tmp_path, "model.word_dropout=0.3"), log=lambda _m: None)
    train = [c for c in calls if c[0]]
    evals = [c for c in calls if not c[0]]
    assert train and evals
    src = torch.cat([c[1].flatten() for c in train])
    real = (src != PAD) & (src != EOS)
    assert abs(float((src[real] == UNK).float().mean()) - 0.3) < 0.05
    assert all(not (c[2] == UNK).any() for c in train)  # word_dropout_target false
    # the validation loss sees the corpus as it is (its words have no UNK)
    assert all(not (c[1] == UNK).any() and not (c[2] == UNK).any() for c in evals)


# ---------------------------------------------------------------- runs


@pytest.mark.slow
def test_off_values_leave_training_bit_identical_and_draw_nothing(corpus, tmp_path, monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("noise code ran with the noise off")

    monkeypatch.setattr(nmt.training.loop, "drop_words", never)
    monkeypatch.setattr(nmt.training.loop, "step_generator", never)
    monkeypatch.setattr(nmt.data.vocab.Vocab, "sample_batch", never)
    run_training(_config(corpus, tmp_path / "default"), log=lambda _m: None)
    run_training(
        _config(
            corpus,
            tmp_path / "off",
            "subwords.sampling_alpha=0",
            "subwords.nbest_size=-1",
            "subwords.sample_target=false",
            "model.word_dropout=0.0",
            "model.word_dropout_target=true",
        ),
        log=lambda _m: None,
    )
    default = _records(tmp_path / "default")
    assert len(default) == 2 and default == _records(tmp_path / "off")
    monkeypatch.undo()
    run_training(_config(corpus, tmp_path / "noisy", *NOISY), log=lambda _m: None)
    assert _records(tmp_path / "noisy") != default  # the keys are wired in


@pytest.mark.slow
def test_noisy_runs_are_seeded_and_resume_exactly(corpus, tmp_path):
    run_training(_config(corpus, tmp_path / "a", *NOISY), log=lambda _m: None)
    run_training(_config(corpus, tmp_path / "b", *NOISY), log=lambda _m: None)
    straight = _records(tmp_path / "a")
    assert straight == _records(tmp_path / "b")
    run_training(_config(corpus, tmp_path / "c", *NOISY, "train.seed=4"), log=lambda _m: None)
    assert _records(tmp_path / "c") != straight
    # stopped in the middle of epoch 2 (10 batches an epoch), then resumed
    run_training(
        _config(corpus, tmp_path / "split", *NOISY, "train.max_steps=14"), log=lambda _m: None
    )
    run_training(_config(corpus, tmp_path / "split", *NOISY), resume=True, log=lambda _m: None)
    resumed = _records(tmp_path / "split")
    assert [r[0] for r in resumed] == [10, 14, 20]
    assert resumed[0] == straight[0] and resumed[-1] == straight[-1]
