"""The papers' BLEU (lowercased, Moses-tokenized) beside cased sacreBLEU in the reports of
``nmt evaluate`` and ``nmt select``, on a tiny checkpoint and a six-pair corpus."""

import json
import logging

import pytest
from typer.testing import CliRunner

from nmt.cli.app import app
from nmt.config.load import from_dict
from nmt.model.checkpoint import make_payload, save_atomic

from conftest import TOY_PAIRS, tiny_model, write_split

SIZES = {"emb_dim": 16, "enc_hidden": 16, "dec_hidden": 32, "attn_dim": 16, "output_dim": 16}


@pytest.fixture
def run(toy_vocabs, tmp_path):
    """A run directory with best.pt, trained on nothing, whose corpus (val and test) is
    the toy pairs."""
    data = tmp_path / "data"
    for split in ("val", "test"):
        write_split(data, split, "de", [s for s, _ in TOY_PAIRS])
        write_split(data, split, "en", [t for _, t in TOY_PAIRS])
    cfg = from_dict(
        {
            "name": "toy",
            "model": SIZES,
            "data": {"source": "dir", "path": str(data), "test_splits": ["test"]},
        }
    )
    save_atomic(
        make_payload(cfg, tiny_model(*toy_vocabs).eval(), *toy_vocabs), tmp_path / "run" / "best.pt"
    )
    return tmp_path / "run"


def test_evaluate_reports_the_papers_bleu_beside_sacrebleu(run, tmp_path):
    js = tmp_path / "scores.json"
    r = CliRunner().invoke(
        app, ["evaluate", str(run / "best.pt"), "--beam", "1", "--device", "cpu", "--json", str(js)]
    )
    assert r.exit_code == 0, r.output
    rows = r.stdout.splitlines()
    names = [row.split("  ")[0] for row in rows]
    # the headline stays first; the papers' number comes after the lowercased one
    assert (
        names.index("BLEU")
        < names.index("BLEU lowercased")
        < names.index("BLEU papers (lc, Moses)")
    )
    sig = next(row for row in rows if row.startswith("BLEU papers (lc, Moses) signature"))
    assert "case:lc|eff:no|tok:none|" in sig and sig.endswith("+moses-tok.en+lc")
    record = json.loads(js.read_text())[0]
    assert record["papers_signature"].endswith("+moses-tok.en+lc")
    assert 0 <= record["bleu_papers"] <= 100


def test_select_prints_the_papers_bleu_of_the_test_splits(run, tmp_path):
    js = tmp_path / "select.json"
    r = CliRunner().invoke(
        app,
        [
            "select",
            str(run),
            "--beam",
            "2",
            "--alphas",
            "0.6",
            "--average",
            "0",
            "--test-splits",
            "test",
            "--device",
            "cpu",
            "--json",
            str(js),
        ],
    )
    assert r.exit_code == 0, r.output
    test = json.loads(js.read_text())["test"]["test"]
    assert test["papers_signature"].endswith("+moses-tok.en+lc")
    line = next(row for row in r.stdout.splitlines() if "BLEU papers" in row)
    assert line.startswith(
        f"test: BLEU papers (lc, Moses) greedy {test['greedy_bleu_papers']:.2f}"
        f", beam {test['beam_bleu_papers']:.2f} (lowercased, Moses-tokenized"
    )
    assert line.endswith(test["papers_signature"])


def test_references_are_moses_tokenized_once_per_list(monkeypatch):
    import nmt.evaluation.metrics as metrics

    metrics._tokenized_references.cache_clear()
    calls: list[int] = []
    real = metrics.moses_tokenize

    def counting_tokenize(lines: list[str], lang: str) -> list[str]:
        calls.append(len(lines))
        return real(lines, lang)

    monkeypatch.setattr(metrics, "moses_tokenize", counting_tokenize)
    refs = ["A man, running.", "Two dogs."]
    first = metrics.papers_bleu(["a man , running .", "two dogs ."], refs, "en")
    again = metrics.papers_bleu(["a man runs .", "two dogs ."], refs, "en")
    assert calls == [2, 2, 2]  # hypotheses twice, the references once
    assert first[0] == pytest.approx(100.0) and again[0] < 99


def test_papers_bleu_gives_no_false_detokenize_warning(caplog):
    """The Moses-tokenized side ends in " ." by design; sacreBLEU would warn past 100 lines."""
    from nmt.evaluation.metrics import papers_bleu

    hyps = [f"A dog number {i} runs." for i in range(120)]
    with caplog.at_level(logging.WARNING):
        value, _ = papers_bleu(hyps, hyps, "en")
    assert value == pytest.approx(100.0)
    assert not [r for r in caplog.records if "detokenize" in r.getMessage()]
