"""Ensemble decoding: the mean of the members' probabilities at every search step, in
greedy and beam search, through the Translator and the ``nmt translate`` / ``nmt evaluate
--ensemble`` command lines."""

import json
import math
import os
import shutil
from typing import Any, cast

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli.app import app
from nmt.config.load import from_dict
from nmt.config.schema import ModelConfig
from nmt.data.digest import file_sha256
from nmt.data.vocab import BOS, EOS, train_vocab
from nmt.inference.ensemble import (
    Ensemble,
    LoadedEnsemble,
    ensemble_of,
    load_ensemble,
    load_models,
)
from nmt.inference.search import beam_search, greedy, max_output_length
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.checkpoint import (
    CheckpointError,
    Loaded,
    load_checkpoint,
    make_payload,
    save_atomic,
)
from nmt.model.seq2seq import build_model

from conftest import TOY_PAIRS

# tiny models decode slowly on a busy machine: few, short sentences of unequal lengths
SOURCES = ["ein mann läuft .", "zwei hunde spielen im schnee .", "eine katze"]
SMALL = dict(emb_dim=16, enc_hidden=16, dec_hidden=32, attn_dim=16, output_dim=16, dropout=0.0)
# members that differ in seed, attention, step order and size
MEMBERS = [
    dict(seed=1, attention="additive"),
    dict(seed=2, attention="dot", step_order="luong"),
    dict(seed=3, attention="none", emb_dim=8, output_dim=24),
    dict(seed=4, attention="multihead", heads=2, dec_hidden=48),
]


def _model(vocabs, seed, **overrides):
    """A tiny model of its own seed, its weights scaled up so that its distributions are
    peaked (an untrained model's are nearly uniform, and averages of those say little)."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(**{**SMALL, **overrides}), len(vocabs[0]), len(vocabs[1]))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model.eval()


def _batch(vocab, lines):
    ids = [vocab.encode(x) + [EOS] for x in lines]
    S = max(map(len, ids))
    src = torch.zeros(len(ids), S, dtype=torch.long)
    for i, x in enumerate(ids):
        src[i, : len(x)] = torch.tensor(x)
    return src, torch.tensor([len(x) for x in ids])


def _forced_members(models, src, src_len, tokens):
    """Each member's step log-probabilities (T, V) and attention (T, S) or None along one
    forced target (``tokens`` with EOS last), for the single sentence of ``src``."""
    out = []
    with torch.inference_mode():
        for m in models:
            mem, state = m.encode(src, src_len)
            prev, logps, attns = torch.tensor([BOS]), [], []
            for tok in tokens:
                logp, state, attn = m.step(prev, state, mem)
                logps.append(logp[0])
                attns.append(None if attn is None else attn[0])
                prev = torch.tensor([tok])
            out.append(
                (
                    torch.stack(logps),
                    None if attns[0] is None else torch.stack(cast(list[torch.Tensor], attns)),
                )
            )
    return out


def _mean_logp(per_member):
    """log of the mean probability (T, V), computed the plain way."""
    probs = torch.stack([lp.double().exp() for lp, _ in per_member]).mean(0)
    return probs.log()


def _same(a, b, exact=True):
    for x, y in zip(a, b, strict=True):
        assert x.tokens == y.tokens
        if exact:
            assert x.score == y.score and x.log_prob == y.log_prob
            assert (x.attention is None) == (y.attention is None)
            if x.attention is not None:
                assert torch.equal(x.attention, y.attention)
        else:
            assert x.score == pytest.approx(y.score, rel=1e-5, abs=1e-5)
            torch.testing.assert_close(x.attention, y.attention)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_one_model_is_that_model(toy_vocabs, beam):
    model = _model(toy_vocabs, 1)
    src, src_len = _batch(toy_vocabs[0], SOURCES)
    if beam == 1:
        _same(greedy(Ensemble([model]), src, src_len), greedy(model, src, src_len))
    else:
        for a, b in zip(
            beam_search(Ensemble([model]), src, src_len, beam, n_best=beam),
            beam_search(model, src, src_len, beam, n_best=beam),
            strict=True,
        ):
            _same(a, b)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_two_copies_is_the_single_model(toy_vocabs, beam):
    model = _model(toy_vocabs, 1)
    twice = Ensemble([model, _model(toy_vocabs, 1)])
    src, src_len = _batch(toy_vocabs[0], SOURCES)
    if beam == 1:
        _same(greedy(twice, src, src_len), greedy(model, src, src_len), exact=False)
    else:
        for a, b in zip(
            beam_search(twice, src, src_len, beam, n_best=2),
            beam_search(model, src, src_len, beam, n_best=2),
            strict=True,
        ):
            _same(a, b, exact=False)


@pytest.mark.parametrize("pair", [(0, 1), (0, 2), (1, 3), (2, 3)])
def test_each_step_is_the_mean_of_the_members_distributions(toy_vocabs, pair):
    models = [_model(toy_vocabs, **MEMBERS[i]) for i in pair]
    ens = Ensemble(models)
    src, src_len = _batch(toy_vocabs[0], ["ein kind isst einen apfel ."])
    tokens = toy_vocabs[1].encode("a child eats an apple .") + [EOS]
    per_member = _forced_members(models, src, src_len, tokens)
    expected = _mean_logp(per_member)
    ((got, attn),) = _forced_members([ens], src, src_len, tokens)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)
    assert torch.allclose(got.exp().sum(-1), torch.ones(len(tokens)), atol=1e-5)  # a distribution
    with_attention = [a for _, a in per_member if a is not None]
    if not with_attention:
        assert attn is None
    else:  # the mean over the members that have attention; `none` has none
        torch.testing.assert_close(attn, torch.stack(with_attention).mean(0))


@pytest.mark.parametrize("pair", [(0, 1), (2, 3)])
def test_greedy_and_beam_score_by_the_averaged_distribution(toy_vocabs, pair):
    models = [_model(toy_vocabs, **MEMBERS[i]) for i in pair]
    ens = Ensemble(models)
    for line in SOURCES[:2]:
        src, src_len = _batch(toy_vocabs[0], [line])
        g = greedy(ens, src, src_len)[0]
        # every hypothesis ends in EOS and is scored with it: picked, or forced at the
        # length limit in place of the last piece (a cut hypothesis, complete=False)
        tokens = g.tokens + [EOS]
        limit = int(max_output_length(src_len, 2.0)[0])
        assert len(tokens) <= limit and (g.complete or len(tokens) == limit)
        expected = _mean_logp(_forced_members(models, src, src_len, tokens))
        # every greedy pick is the most probable piece of the mean distribution (all but
        # the forced EOS of a cut hypothesis, which was not the most probable piece)
        picks = expected.argmax(-1).tolist()
        if g.complete:
            assert picks == tokens
        else:
            assert picks[:-1] == tokens[:-1] and picks[-1] != EOS
        picked = expected[torch.arange(len(tokens)), torch.tensor(tokens)]
        assert g.log_prob == pytest.approx(float(picked.sum()), abs=1e-4)
        for h in beam_search(ens, src, src_len, beam_size=3, n_best=3)[0]:
            seq = h.tokens + [EOS]  # a cut hypothesis is scored with its forced EOS too
            exp = _mean_logp(_forced_members(models, src, src_len, seq))
            assert h.log_prob == pytest.approx(
                float(exp[torch.arange(len(seq)), torch.tensor(seq)].sum()), abs=1e-4
            )


def test_beam_one_of_an_ensemble_is_its_greedy_search(toy_vocabs):
    ens = Ensemble([_model(toy_vocabs, **m) for m in MEMBERS])
    src, src_len = _batch(toy_vocabs[0], SOURCES)
    for g, b in zip(greedy(ens, src, src_len), beam_search(ens, src, src_len, 1), strict=True):
        assert g.tokens == b[0].tokens
        assert g.log_prob == pytest.approx(b[0].log_prob, abs=1e-5)


def _save(path, vocabs, seed, name, **model):
    """A checkpoint of :func:`_model` (its config named ``name``)."""
    cfg = from_dict({"name": name, "model": {**SMALL, **model}})
    save_atomic(make_payload(cfg, _model(vocabs, seed, **model), *vocabs), path)
    return path


@pytest.fixture
def checkpoints(toy_vocabs, tmp_path):
    """Two checkpoints of different seed, attention and size, and one of another target
    vocabulary."""
    a = _save(tmp_path / "a.pt", toy_vocabs, 1, "run_a")
    b = _save(
        tmp_path / "b.pt", toy_vocabs, 2, "run_b", attention="dot", step_order="luong", emb_dim=8
    )
    other = train_vocab([t.upper() for _, t in TOY_PAIRS] * 5, vocab_size=44, model_type="bpe")
    c = _save(tmp_path / "c.pt", (toy_vocabs[0], other), 3, "run_c")
    return a, b, c


def test_checkpoints_of_another_vocabulary_are_refused_naming_both(checkpoints, tmp_path):
    a, b, c = checkpoints
    with pytest.raises(CheckpointError) as e:
        load_ensemble([a, b, c])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(
        f"{c}: cannot be ensembled with {a}: another target vocabulary (44 SentencePiece pieces"
    )
    src = tmp_path / "in.de"
    src.write_text("ein mann .\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["translate", str(a), str(c), "--input", str(src)])
    assert r.exit_code == 2 and r.stderr.strip() == f"error: {msg}"


def test_the_translator_decodes_checkpoints_as_their_ensemble(checkpoints, toy_vocabs):
    a, b, _ = checkpoints
    dec = Decoding(beam_size=3)
    tr = Translator.from_checkpoints([a, b], decoding=dec)
    assert isinstance(tr.model, Ensemble) and len(tr.model.members) == 2
    ens = load_ensemble([a, b])
    direct = Translator(ens.model, ens.src_vocab, ens.tgt_vocab, dec).translate(SOURCES)
    assert [t.text for t in tr.translate(SOURCES)] == [t.text for t in direct]
    one = Translator.from_checkpoints([a], decoding=dec)
    assert not isinstance(one.model, Ensemble)
    assert isinstance(load_models([a]), Loaded)
    both = load_models([a, b])
    assert isinstance(both, LoadedEnsemble)
    assert both.describe() == "ensemble of 2 (additive, dot)"  # what nmt translate loads


def test_translate_parses_several_checkpoints_as_one_ensemble(checkpoints, tmp_path):
    a, b, _ = checkpoints
    src, out = tmp_path / "in.de", tmp_path / "out.en"
    src.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    r = CliRunner().invoke(
        app,
        [
            "translate",
            str(a),
            str(b),
            "--input",
            str(src),
            "--output",
            str(out),
            "--beam",
            "2",
            "--attention",
        ],
    )
    assert r.exit_code == 0, r.output
    ens = load_ensemble([a, b])
    # as the command builds it: search.precision=auto measured on this CPU (search_choice.py)
    expected = Translator.from_loaded(ens, beam_size=2).translate(SOURCES)
    assert out.read_text(encoding="utf-8").splitlines() == [
        " ".join(t.text.split()) for t in expected
    ]
    assert "<-" in r.output  # the members' mean attention, shown per target piece
    r = CliRunner().invoke(
        app, ["translate", str(a), str(b), "--input", str(src), "--output", str(b)]
    )
    assert r.exit_code == 2 and "is the same file as the checkpoint" in r.output


def test_evaluate_ensemble_adds_one_system(checkpoints, tmp_path):
    a, b, c = checkpoints
    src, ref, js = tmp_path / "s.de", tmp_path / "r.en", tmp_path / "scores.json"
    src.write_text("\n".join(s for s, _ in TOY_PAIRS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(t for _, t in TOY_PAIRS) + "\n", encoding="utf-8")
    files = ["--src", str(src), "--ref", str(ref), "--beam", "1"]
    r = CliRunner().invoke(
        app, ["evaluate", "--ensemble", str(a), str(b), *files, "--json", str(js)]
    )
    assert r.exit_code == 0, r.output
    header = r.output.split("BLEU ")[0]
    # each column as its checkpoint was typed (not the run's name inside), then the ensemble
    columns = next(line for line in header.splitlines() if line.startswith(" " * 24))
    assert columns.split() == [str(a), str(b), "ensemble", "of", "2"]
    assert "run_a" not in header
    assert f"ensemble of 2: {a}, {b} (mean of the models' probabilities" in r.output
    records = json.loads(js.read_text())
    assert [x["name"] for x in records] == ["run_a", "run_b", "ensemble of 2"]
    assert records[2]["ensemble"] == [str(a), str(b)] and "ensemble" not in records[0]
    assert records[2]["checkpoint"] == f"{a}+{b}" and records[2]["attention"] == "additive, dot"
    assert all(x["bleu_papers"] is not None for x in records)
    # without --ensemble: the checkpoints side by side, no ensemble
    r = CliRunner().invoke(app, ["evaluate", str(a), str(b), *files])
    assert r.exit_code == 0 and "ensemble of" not in r.output
    r = CliRunner().invoke(app, ["evaluate", "--ensemble", str(a), *files])
    assert r.exit_code == 2 and "--ensemble needs at least two checkpoints, got 1" in r.output
    r = CliRunner().invoke(app, ["evaluate", "--ensemble", str(a), str(c), *files])
    assert r.exit_code == 2 and f"{c}: cannot be ensembled with {a}" in r.output


def test_mean_of_probabilities_not_of_log_probabilities():
    """The rule itself, on numbers: p = (0.9, 0.1) and (0.1, 0.9) average to (0.5, 0.5)."""

    class Fixed(torch.nn.Module):
        def __init__(self, p):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.logp = torch.tensor([p]).log()

        def encode(self, src, src_len):
            return _Rows(), _Rows()

        def step(self, prev, state, mem):
            return self.logp.expand(len(prev), -1), state, None

    ens = Ensemble([Fixed([0.9, 0.1]), Fixed([0.1, 0.9])])
    mem, state = ens.encode(torch.tensor([[EOS]]), torch.tensor([1]))
    logp, _, attn = ens.step(torch.tensor([BOS]), state, mem)
    assert logp.exp().tolist()[0] == pytest.approx([0.5, 0.5]) and attn is None
    assert logp[0, 0].item() == pytest.approx(math.log(0.5))  # mean log-prob would be 0.3


class _Rows:
    """A memory or state with nothing in it."""

    def index_select(self, idx):
        return self


def test_checkpoints_of_one_run_ensemble_but_one_file_twice_is_refused(
    checkpoints, toy_vocabs, tmp_path
):
    """The same file twice, by path (however spelled) or by content, would count one model
    twice; refused as ``nmt average`` refuses it."""
    a, b, _ = checkpoints
    later = _save(tmp_path / "a_last.pt", toy_vocabs, 5, "run_a")  # same run, other weights
    dec = Decoding(beam_size=2)
    assert len(Translator.from_checkpoints([a, later], decoding=dec).translate(SOURCES)) == 3
    with pytest.raises(
        CheckpointError,
        match=rf"^{a}: given twice; each checkpoint can be "
        "ensembled once$",
    ):
        load_ensemble([a, b, a])
    os.symlink(a, tmp_path / "link.pt")
    with pytest.raises(CheckpointError, match=f"link.pt: given twice \\(also as {a}\\)"):
        Translator.from_checkpoints([a, tmp_path / "link.pt"], decoding=dec)
    shutil.copy(a, tmp_path / "copy.pt")
    with pytest.raises(
        CheckpointError,
        match=rf"copy.pt: the same checkpoint as {a} "
        r"\(identical contents\); each checkpoint can be ensembled once",
    ):
        load_ensemble([a, b, tmp_path / "copy.pt"])
    r = CliRunner().invoke(app, ["translate", str(a), str(a), "--input", str(a)])
    assert r.exit_code == 2 and "given twice" in r.stderr


def test_an_ensemble_of_loaded_members_is_the_loaded_ensemble(checkpoints, tmp_path):
    """:func:`ensemble_of` builds from checkpoints already loaded, with the same checks."""
    a, b, c = checkpoints
    loaded = [load_checkpoint(p, with_digest=True) for p in (a, b, c)]
    assert loaded[0].sha256 == file_sha256(a)
    ens, direct = ensemble_of([a, b], loaded[:2]), load_ensemble([a, b])
    assert ens.members[0] is loaded[0] and ens.describe() == direct.describe()
    dec = Decoding(beam_size=2)
    assert [
        t.text for t in Translator(ens.model, ens.src_vocab, ens.tgt_vocab, dec).translate(SOURCES)
    ] == [
        t.text
        for t in Translator(direct.model, direct.src_vocab, direct.tgt_vocab, dec).translate(
            SOURCES
        )
    ]
    with pytest.raises(CheckpointError, match=f"^{c}: cannot be ensembled with {a}"):
        ensemble_of([a, c], [loaded[0], loaded[2]])
    with pytest.raises(CheckpointError, match="identical contents"):
        # without digests the files are hashed
        ensemble_of([a, shutil.copy(a, tmp_path / "copy.pt")], [loaded[0], load_checkpoint(a)])


def test_an_ensemble_of_fixed_vector_models_has_no_heatmap(toy_vocabs, tmp_path):
    n1 = _save(tmp_path / "n1.pt", toy_vocabs, 1, "n1", attention="none")
    n2 = _save(tmp_path / "n2.pt", toy_vocabs, 2, "n2", attention="none")
    src = tmp_path / "in.de"
    src.write_text("ein mann .\n", encoding="utf-8")
    r = CliRunner().invoke(
        app, ["translate", str(n1), str(n2), "--input", str(src), "--plot", str(tmp_path / "h.png")]
    )
    assert r.exit_code == 2 and "--plot: the fixed-vector model" in r.stderr


def test_evaluate_ensemble_reads_each_checkpoint_once(checkpoints, tmp_path, monkeypatch):
    """The ensemble is built from the models loaded for their own rows, not loaded again."""
    from nmt.commands import evaluate
    from nmt.inference import ensemble, scoring

    a, b, _ = checkpoints
    src, ref = tmp_path / "s.de", tmp_path / "r.en"
    src.write_text("ein mann .\n", encoding="utf-8")
    ref.write_text("a man .\n", encoding="utf-8")
    reads: list[object] = []
    real = scoring.load_checkpoint

    def counting_load(p: Any, *a: Any, **k: Any) -> Any:
        reads.append(p)
        return real(p, *a, **k)

    monkeypatch.setattr(scoring, "load_checkpoint", counting_load)
    monkeypatch.setattr(ensemble, "load_checkpoint", lambda *a, **k: pytest.fail("read again"))
    report = evaluate.evaluate_checkpoints([a, b], src=src, ref=ref, beam_size=1, ensemble=True)
    assert reads == [a, b] and [r["name"] for r in report.json][-1] == "ensemble of 2"
    assert [r["checkpoint_sha256"] for r in report.json] == [file_sha256(a), file_sha256(b), None]
