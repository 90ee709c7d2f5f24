"""``nmt select RUN RUN``: each run chosen on val, then the ensemble's alpha on val, then
the ensemble scored on test; on tiny untrained checkpoints and the six toy pairs."""

import json

import pytest
from typer.testing import CliRunner

from nmt.cli.app import app
from nmt.config.load import from_dict
from nmt.data.vocab import train_vocab
from nmt.model.checkpoint import make_payload, save_atomic

from conftest import TOY_PAIRS, tiny_model, write_split

SIZES = {"emb_dim": 16, "enc_hidden": 16, "dec_hidden": 32, "attn_dim": 16, "output_dim": 16}
FAST = ["--beam", "2", "--average", "0", "--test-splits", "test", "--device", "cpu"]


@pytest.fixture
def runs(toy_vocabs, tmp_path):
    """Three run directories on one toy corpus (val and test are the toy pairs): ``a``
    (additive) and ``b`` (dot) share the vocabularies, ``c`` has another target vocabulary."""
    data = tmp_path / "data"
    for split in ("val", "test"):
        write_split(data, split, "de", [s for s, _ in TOY_PAIRS])
        write_split(data, split, "en", [t for _, t in TOY_PAIRS])
    other = train_vocab([t.upper() for _, t in TOY_PAIRS] * 5, vocab_size=44, model_type="bpe")
    made = {}
    for name, attention, vocabs in (
        ("a", "additive", toy_vocabs),
        ("b", "dot", toy_vocabs),
        ("c", "additive", (toy_vocabs[0], other)),
    ):
        cfg = from_dict(
            {
                "name": f"run_{name}",
                "model": {**SIZES, "attention": attention},
                "data": {"source": "dir", "path": str(data), "test_splits": ["test"]},
            }
        )
        model = tiny_model(*vocabs, attention=attention).eval()
        save_atomic(make_payload(cfg, model, *vocabs), tmp_path / name / "best.pt")
        made[name] = tmp_path / name
    return made


def test_select_of_two_runs_chooses_the_ensembles_alpha_on_val(runs, tmp_path):
    js = tmp_path / "select.json"
    r = CliRunner().invoke(
        app,
        ["select", str(runs["a"]), str(runs["b"]), *FAST, "--alphas", "0.6,1.4", "--json", str(js)],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads(js.read_text())
    assert [m["run"] for m in summary["members"]] == [str(runs["a"]), str(runs["b"])]
    ens = summary["ensemble"]
    assert ens["checkpoints"] == [m["chosen_checkpoint"] for m in summary["members"]]
    assert [row["alpha"] for row in ens["val_selection"]] == [0.6, 1.4]
    assert ens["alpha"] == max(ens["val_selection"], key=lambda row: row["bleu"])["alpha"]
    test = ens["test"]["test"]
    assert test["signature"].startswith("nrefs:1|") and test["papers_signature"]
    # the ensemble's test score is what nmt evaluate --ensemble gives with the chosen alpha
    scores = tmp_path / "scores.json"
    r2 = CliRunner().invoke(
        app,
        [
            "evaluate",
            "--ensemble",
            *ens["checkpoints"],
            "--split",
            "test",
            "--beam",
            "2",
            "--alpha",
            str(ens["alpha"]),
            "--device",
            "cpu",
            "--json",
            str(scores),
        ],
    )
    assert r2.exit_code == 0, r2.output
    assert json.loads(scores.read_text())[-1]["bleu"] == pytest.approx(test["beam_bleu"])
    assert "ensemble of 2:" in r.stdout and f"member {runs['b']}:" in r.stdout
    assert sum("test: BLEU greedy" in line for line in r.stdout.splitlines()) == 3
    # with two alphas every choice is at an edge of the grid, and the log says so
    side = "largest" if ens["alpha"] == 1.4 else "smallest"
    assert f"warning: alpha {ens['alpha']:g} is the {side} of --alphas 0.6,1.4" in r.stderr


def test_grid_edge_warns_only_where_val_bleu_may_rise_beyond_the_grid():
    from nmt.analysis.selection import grid_edge

    grid = (0.6, 1.0, 1.4)
    top, bottom = grid_edge(1.4, grid), grid_edge(0.6, grid)
    assert top is not None and "try --alphas 1.4,1.8,2.2" in top
    assert bottom is not None and "the smallest of --alphas 0.6,1,1.4" in bottom
    assert grid_edge(1.0, grid) is None  # inside the grid: val's own optimum
    assert grid_edge(0.0, (0.0, 1.0)) is None  # no length penalty is the smallest there is
    assert grid_edge(1.0, (1.0,)) is None and grid_edge(1.0, (1.0, 1.0)) is None


def test_select_refuses_what_cannot_be_an_ensemble_before_decoding(runs, monkeypatch):
    import nmt.analysis.selection as selection

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded before the runs were checked")

    monkeypatch.setattr(selection, "score_checkpoints", no_decoding)
    a, b, c = (str(runs[k]) for k in "abc")
    r = CliRunner().invoke(app, ["select", a, c, *FAST])
    assert r.exit_code == 2 and f"{c}/best.pt: cannot be ensembled with {a}/best.pt" in r.output
    again = f"{a}/../{runs['a'].name}"  # another spelling of the same directory
    r = CliRunner().invoke(app, ["select", a, b, again, *FAST])
    assert r.exit_code == 2 and f"{again} is given twice (also as {a})" in r.output
    r = CliRunner().invoke(app, ["select", a, a, *FAST])  # the same spelling: no "also as"
    assert r.exit_code == 2 and f"{a} is given twice: an ensemble" in r.output
    r = CliRunner().invoke(app, ["select", a, str(runs["a"].parent / "missing"), *FAST])
    assert r.exit_code == 2 and "missing/best.pt not found" in r.output
    r = CliRunner().invoke(app, ["select", f"{a}/best.pt", b, *FAST])  # a file, not a run
    assert r.exit_code == 2 and f"{a}/best.pt is a file: give the run directory" in r.output
    r = CliRunner().invoke(app, ["select", f"{a}/best.pt", *FAST])  # and for a single run
    assert r.exit_code == 2 and f"({a}), not a checkpoint" in r.output
