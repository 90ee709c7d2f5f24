"""``nmt bench``: the analytic FLOPs count against a hand count and against the built
model's weight matrices, the JSON report's fields and values, one-line errors, and the
verb end to end on a tiny config and a tiny checkpoint (Multi30k slices, a few steps)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from nmt.analysis.bench_options import BenchOptions
from nmt.cli.app import app
from nmt.commands.bench import load_subject, run_bench
from nmt.config.load import load_config
from nmt.config.schema import ModelConfig
from nmt.model.checkpoint import make_payload, save_atomic
from nmt.model.flops import TokenCounts, forward_macs, training_flops, training_flops_by_term
from nmt.model.seq2seq import build_model

from conftest import MULTI30K, REPO, write_split

REFERENCE = REPO / "configs" / "bench_reference.yaml"
TINY = [
    "subwords.vocab_size=300",
    "model.emb_dim=16",
    "model.enc_hidden=16",
    "model.dec_hidden=32",
    "model.attn_dim=16",
    "model.output_dim=16",
    "train.batch_size=32",
    "train.max_tokens=400",
]
QUICK: dict[str, Any] = dict(
    threads=1, warmup=1, train_steps=2, train_seconds=0.3, sentences=16, batch_size=8
)
QUICK_ARGS = [
    "--threads",
    "1",
    "--warmup",
    "1",
    "--train-steps",
    "2",
    "--train-seconds",
    "0.3",
    "--sentences",
    "16",
    "--batch-size",
    "8",
]


def test_flops_of_the_reference_model_match_a_hand_count():
    cfg = load_config(REFERENCE).model
    macs = forward_macs(cfg, tgt_vocab_size=8000)
    # E = 256, H = 256 (M = 512), D = 512, A = 512, O = 512, V = 8000, input feeding
    assert macs.per_source_token == {
        "encoder_gru": 2 * 3 * 256 * (256 + 256),  # 786,432
        "attention_keys": 512 * 512,
    }  # U h_i
    assert macs.per_target_token == {
        "decoder_gru": 3 * 512 * (256 + 512 + 512),  # 1,966,080
        "attention_query": 512 * 512,  # W s
        "pre_output": (512 + 512) * 512,  # W_c [c; s]
        "generator": 512 * 8000,
    }
    assert macs.per_attended_position == {"attention_scores_and_context": 512 + 512 + 512}
    # 1,100 source and 1,000 target tokens, each target token attending to 16 positions
    counts = TokenCounts(source_tokens=1100, target_tokens=1000, attended_positions=16_000)
    hand = 6 * (1100 * 1_048_576 + 1000 * 6_848_512 + 16_000 * 1_536)
    assert hand == 48_159_129_600
    assert training_flops(macs, counts) == hand  # 48.2 MFLOP per target token, as issue 13
    assert sum(training_flops_by_term(macs, counts).values()) == hand


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"step_order": "luong", "output_dim": 24},
        {"attention": "dot", "dec_hidden": 32},
        {"attention": "general"},
        {"attention": "scaled_dot", "dec_hidden": 32},
        {"attention": "multihead", "heads": 2},
        {"attention": "none"},
        {"attention": "local_p", "local_score": "additive"},
        {"attention": "local_m"},
        {"enc_layers": 2, "dec_layers": 2, "step_order": "luong"},
    ],
)
def test_every_weight_matrix_is_counted_once_per_token(overrides):
    """Per-token MACs equal the weight-matrix entries of the built model: each matrix is
    used once per source or target token. Embeddings (lookups), the per-sentence initial
    state and fixed context, and additive attention's v (once per attended position) are
    left out of the per-token count by design."""
    cfg = ModelConfig(
        **{**dict(emb_dim=8, enc_hidden=16, dec_hidden=24, attn_dim=12, output_dim=10), **overrides}
    )
    model = build_model(cfg, 50, 60)
    per_sentence = ("embed.weight", "decoder.init.", "decoder.fixed.")
    matrices = sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.dim() == 2
        and not any(s in name for s in per_sentence)
        and not name.endswith(("scorer.v.weight", "score.v.weight"))
    )
    macs = forward_macs(cfg, tgt_vocab_size=60)
    assert sum(macs.per_source_token.values()) + sum(macs.per_target_token.values()) == matrices
    per_position = {
        "additive": 12 + 12 + 32,
        "dot": 64,
        "scaled_dot": 64,
        "general": 24 + 32,
        "multihead": 64,
        "none": 0,
        "local_p": 12 + 12 + 32,
        "local_m": 24 + 32,
    }
    assert macs.per_attended_position["attention_scores_and_context"] == per_position[cfg.attention]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """``data.path=DIR`` of a Multi30k slice: 300 training pairs, 40 of test_2016_flickr."""
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    out = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 300), ("test_2016_flickr", 40)):
        for lang in ("de", "en"):
            text = gzip.decompress((MULTI30K / f"{split}.{lang}.gz").read_bytes()).decode()
            write_split(out, split, lang, text.splitlines()[:n])
    return f"data.path={out}"


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_corpus, tmp_path_factory):
    """A checkpoint of the tiny config (fresh weights, 300-piece vocabulary)."""
    subject = load_subject(
        BenchOptions(REFERENCE, overrides=(*TINY, tiny_corpus)), log=lambda _m: None
    )
    path = tmp_path_factory.mktemp("bench") / "tiny.pt"
    save_atomic(
        make_payload(subject.cfg, subject.model, subject.src_vocab, subject.tgt_vocab), path
    )
    return path


def test_json_has_every_field_with_sane_values(tiny_checkpoint, monkeypatch):
    for v in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        monkeypatch.delenv(v, raising=False)  # and removed again after the test
    threads = torch.get_num_threads()
    try:
        result = run_bench(BenchOptions(tiny_checkpoint, **QUICK))
    finally:
        torch.set_num_threads(threads)
    assert set(result) == {
        "source",
        "kind",
        "name",
        "attention",
        "parameters",
        "machine",
        "matmul_peak_gflop_s",
        "decode",
        "train",
    }
    assert result["kind"] == "checkpoint" and result["parameters"] > 0
    assert set(result["machine"]) == {
        "cpu",
        "logical_cores",
        "avx512f",
        "avx512_bf16",
        "amx_bf16",
        "cpu_bf16",
        "torch",
        "torch_threads",
        "device",
        "device_name",
        "primitive_caches",
    }
    assert result["machine"]["torch_threads"] == 1 and result["machine"]["cpu"]
    # a bench that measures training sets the caps a training run sets (nmt/ops/primitive_cache.py)
    assert set(result["machine"]["primitive_caches"].values()) == {"128"}
    peak = result["matmul_peak_gflop_s"]
    assert peak["shape"] == "(512x512)@(512x4096)" and peak["fp32"] > 0
    assert (peak["bf16"] is None) == (not result["machine"]["cpu_bf16"])
    tr = result["train"]
    for phase, steps in ((tr["fixed_steps"], 2), (tr["window"], None)):
        assert set(phase) == {
            "steps",
            "seconds",
            "target_tokens_per_s",
            "source_tokens_per_s",
            "achieved_gflop_s",
            "fraction_of_fp32_peak",
            "fraction_of_bf16_peak",
        }
        assert phase["steps"] == steps if steps else phase["steps"] >= 1
        assert phase["target_tokens_per_s"] > 0 and phase["source_tokens_per_s"] > 0
        assert 0 < phase["fraction_of_fp32_peak"] < 10
    assert tr["window"]["seconds"] >= 0.3
    assert all(0 <= tr["padding_fraction"][side] < 1 for side in ("source", "target"))
    assert 0.5 < tr["source_per_target_token"] < 2 and tr["attended_positions_per_target_token"] > 1
    by_term = tr["flops_per_target_token_by_term"]
    assert abs(sum(by_term.values()) - tr["flops_per_target_token"]) <= len(by_term)
    assert tr["peak_memory_mib"] > 0 and tr["warmup_steps"] == 1
    dec = result["decode"]
    assert dec["split"] == "test_2016_flickr" and dec["sentences"] == 16
    assert dec["bleu_meaningful"] is True and dec["peak_memory_mib"] > 0
    for key, search in (("greedy", "greedy search"), ("beam5", "beam search, beam 5")):
        assert dec[key]["search"].startswith(search) and dec[key]["sentences_per_s"] > 0
        assert 0 <= dec[key]["bleu"] <= 100 and dec[key]["bleu_signature"].startswith("nrefs:1")
        # the rate is the median pass's, every pass recorded
        passes = dec[key]["pass_seconds"]
        assert len(passes) == 3 and all(p > 0 for p in passes)
        assert dec[key]["seconds"] == round(sorted(passes)[1], 3)


def _one_line_error(args: list[str | Path], *expected: str) -> None:
    r = CliRunner().invoke(app, ["bench", *map(str, args)])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert len(lines) == 1 and all(e in lines[0] for e in expected), r.stderr


@pytest.mark.parametrize(
    "option,value",
    [
        ("--train-steps", "0"),
        ("--warmup", "-1"),
        ("--train-seconds", "-1"),
        ("--sentences", "0"),
        ("--batch-size", "0"),
        ("--beam", "0"),
        ("--search-passes", "0"),
        ("--threads", "0"),
        ("--device", "tpu"),
    ],
)
def test_bad_option_values_exit_2_naming_the_option(option, value):
    _one_line_error([REFERENCE, option, value], option)


def test_bad_files_and_inputs_exit_2_naming_them(tmp_path, tiny_checkpoint):
    _one_line_error([tmp_path / "missing.pt"], "missing.pt", "not found")
    _one_line_error([tmp_path / "missing.yaml"], "missing.yaml")
    _one_line_error([tmp_path / "run.ckpt"], "run.ckpt", ".yaml", ".pt")
    (tmp_path / "other.yaml").write_text("colour: blue\n")
    _one_line_error([tmp_path / "other.yaml"], "other.yaml", "colour")
    _one_line_error([tiny_checkpoint, "model.emb_dim=8"], "tiny.pt", "override")
    _one_line_error([tiny_checkpoint, "--json", tmp_path / "no" / "b.json"], "--json")
    _one_line_error([tiny_checkpoint, "--skip-train", "--skip-decode"], "--skip-train")
    _one_line_error(
        [tiny_checkpoint, "--skip-train", "--split", "test_2099"],
        "--split test_2099",
        "no file test_2099.de",
    )
    _one_line_error(
        [tiny_checkpoint, "--skip-decode", "--train-steps", "1000"], "--train-steps 1000", "batches"
    )


def _nmt(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def test_verb_on_a_tiny_checkpoint_writes_table_and_json(tiny_checkpoint, tmp_path):
    out = tmp_path / "bench.json"
    r = _nmt("bench", tiny_checkpoint, *QUICK_ARGS, "--beam", "3", "--json", out)
    assert r.returncode == 0, r.stderr
    assert "| measure | value |" in r.stdout and "target / source tokens/s" in r.stdout
    assert "beam search, beam 3" in r.stdout and "BLEU signature: nrefs:1" in r.stdout
    assert "(median of 3 passes, " in r.stdout
    assert "only meaningful for a checkpoint" not in r.stdout
    data = json.loads(out.read_text())
    assert data["kind"] == "checkpoint" and "beam3" in data["decode"]


def test_verb_on_a_tiny_config_says_its_bleu_means_nothing(tiny_corpus):
    threads = torch.get_num_threads()
    try:  # in this process, to save a second start of Python and torch
        r = CliRunner().invoke(
            app,
            [
                "bench",
                str(REFERENCE),
                *TINY,
                tiny_corpus,
                *QUICK_ARGS,
                "--train-seconds",
                "0",
                "--beam",
                "1",
            ],
        )
    finally:
        torch.set_num_threads(threads)
    assert r.exit_code == 0, r.stderr
    assert "building the 300-piece vocabulary" in r.stderr
    assert "(config: bench_reference, additive attention" in r.stdout
    assert "only meaningful for a checkpoint" in r.stdout
    assert "window" not in r.stdout and "beam search" not in r.stdout


def test_a_decoding_record_names_the_int8_library_only_for_int8(monkeypatch):
    from nmt.analysis.bench import _precision_record

    monkeypatch.setenv("NMT_INT8_ENGINE", "onednn")
    assert _precision_record("int8", None) == {"precision": "int8", "int8_engine": "onednn"}
    monkeypatch.delenv("NMT_INT8_ENGINE")
    assert _precision_record("int8", "auto: int8")["int8_engine"] == "fbgemm"
    assert _precision_record("fp32", "auto: fp32") == {
        "precision": "fp32",
        "precision_auto": "auto: fp32",
    }
