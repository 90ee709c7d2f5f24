"""benchmarks/speed/joey/: the Joey NMT 2.3.0 speed harness's own code, without Joey and
without training: the config it writes for the reference architecture, the SentencePiece
model with Joey's special ids, how it reads /usr/bin/time -v, and the sittings' table with a
Joey record."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from nmt.config.load import load_config

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str, relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None, relative
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


joey_config = _module("joey_config", "benchmarks/speed/joey/joey_config.py")
joey_train_bench = _module("joey_train_bench", "benchmarks/speed/joey/joey_train_bench.py")
variants_table = _module("variants_table", "benchmarks/speed/ab/variants_table.py")


def _reference():
    return load_config(ROOT / "configs" / "bench_reference.yaml")


def test_joey_config_is_the_reference_architecture_and_training(tmp_path):
    joey = joey_config.joey_config(_reference(), tmp_path, tmp_path / "model")
    enc, dec = joey["model"]["encoder"], joey["model"]["decoder"]
    assert enc | {"embeddings": None} == {
        "type": "recurrent",
        "rnn_type": "gru",
        "bidirectional": True,
        "hidden_size": 256,
        "num_layers": 1,
        "dropout": 0.2,
        "embeddings": None,
    }
    assert (
        enc["embeddings"]
        == dec["embeddings"]
        == {
            "embedding_dim": 256,
            "scale": False,
            "dropout": 0.2,
        }
    )
    assert (dec["type"], dec["rnn_type"], dec["hidden_size"], dec["attention"]) == (
        "recurrent",
        "gru",
        512,
        "bahdanau",
    )
    assert (dec["input_feeding"], dec["init_hidden"], dec["hidden_dropout"]) == (
        True,
        "bridge",
        0.2,
    )
    assert not joey["model"]["tied_embeddings"] and not joey["model"]["tied_softmax"]
    t = joey["training"]
    assert (t["batch_type"], t["batch_size"], t["optimizer"], t["learning_rate"]) == (
        "token",
        2000,
        "adam",
        0.001,
    )
    # a constant learning rate: Joey's plateau scheduler fails on torch 2.13
    assert (t["scheduling"], t["decrease_factor"], t["clip_grad_norm"]) == (
        "exponential",
        1.0,
        1.0,
    )
    assert t["normalization"] == "tokens" and t["logging_freq"] == 1
    assert t["validation_freq"] >= 10**9  # never validates inside the timed part
    assert joey["random_seed"] == 42 and joey["use_cuda"] is False
    assert (joey["data"]["src"]["lang"], joey["data"]["trg"]["lang"]) == ("de", "en")
    assert joey["data"]["src"]["voc_file"] == str(tmp_path / "vocab.txt")
    specials = joey["data"]["special_symbols"]
    assert [specials[f"{s}_id"] for s in ("unk", "pad", "bos", "eos")] == [0, 1, 2, 3]


def test_joey_config_refuses_what_joeys_rnn_cannot_match(tmp_path):
    cfg = _reference()
    wide = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, attn_dim=256))
    with pytest.raises(joey_config.MismatchError, match=r"^model\.attn_dim: 256: "):
        joey_config.joey_config(wide, tmp_path, tmp_path / "model")
    biased = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, output_bias=True))
    with pytest.raises(joey_config.MismatchError, match=r"^model\.output_bias: True: "):
        joey_config.joey_config(biased, tmp_path, tmp_path / "model")


def test_sentencepiece_model_has_joeys_special_ids_and_a_matching_vocab_file(tmp_path):
    import sentencepiece as spm

    cfg = _reference()
    small = dataclasses.replace(cfg, subwords=dataclasses.replace(cfg.subwords, vocab_size=80))
    words = "ein Hund läuft über die Wiese a dog runs across the meadow".split()
    sentences = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 5
    joey_config.train_joey_spm(sentences, small, tmp_path)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    assert [sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<pad>", "<s>", "</s>"]
    assert (sp.unk_id(), sp.pad_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert lines == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


TIME_V = """\tCommand being timed: "python joey_train_bench.py train ..."
\tUser time (seconds): 378.57
\tSystem time (seconds): 28.94
\tElapsed (wall clock) time (h:mm:ss or m:ss): 3:29.61
\tMaximum resident set size (kbytes): 1296281
"""


def test_finish_adds_peak_rss_cpu_times_and_nmts_parameter_count(tmp_path):
    out, time_v, prep = tmp_path / "joey_bench.json", tmp_path / "time_v.txt", tmp_path / "p.json"
    out.write_text(json.dumps({"n_params": 12262912, "train": {"target_tokens_per_s": 900.0}}))
    time_v.write_text(TIME_V)
    vocab = {"pieces": 8000, "joint": True, "model_type": "unigram"}
    prep.write_text(
        json.dumps({"n_params_nmt_reference": 12262912, "vocab": vocab, "train_pairs": 29000})
    )
    joey_train_bench.finish(out, time_v, prep, "1.91 1.55 1.60")
    record = json.loads(out.read_text())
    assert record["train"]["peak_rss_mib"] == round(1296281 / 1024, 1)
    assert record["train"]["process_wall_s"] == 209.61
    assert record["train"]["process_user_cpu_s"] == 378.57
    assert record["loadavg_before"] == [1.91, 1.55, 1.6]
    assert record["n_params_nmt_reference"] == record["n_params"]
    assert record["vocab"]["train_pairs"] == 29000


def test_variants_table_shows_joey_and_each_variants_ratio_to_it(tmp_path):
    def nmt_run(fixed: float, window: float) -> dict:
        return {
            "train": {
                "fixed_steps": {"target_tokens_per_s": fixed},
                "window": {"target_tokens_per_s": window},
            }
        }

    (tmp_path / "fp32_round1.json").write_text(json.dumps(nmt_run(2400.0, 2500.0)))
    (tmp_path / "fp32_round1.log").write_text("Maximum resident set size (kbytes): 1048576\n")
    (tmp_path / "bf16_round1.json").write_text(json.dumps(nmt_run(4800.0, 5000.0)))
    for r, rate in ((1, 900.0), (2, 1100.0)):  # bench_joey.sh's record: a window only
        joey = {"train": {"target_tokens_per_s": rate, "peak_rss_mib": 1200.0}}
        (tmp_path / f"joey_round{r}.json").write_text(json.dumps(joey))
    runs, searches = variants_table.read_sitting(tmp_path)
    assert runs["joey"] == [(None, 900.0, 1200.0), (None, 1100.0, 1200.0)] and not searches
    lines = variants_table.training_table(runs)
    assert "window vs Joey" in lines[0] and lines[1].count("---") == 8
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert rows["fp32"] == "| fp32 | 2,400 | 1.00x | 2,500 | 1.00x | 2.50x | 1,024 | 1.00x |"
    assert rows["bf16"].split(" | ")[5] == "5.00x"  # 5,000 over Joey's mean of 1,000
    assert (
        rows["joey"] == "| joey | - / - | - | 900 / 1,100 | 0.40x | 1.00x | 1,200 / 1,200 | 1.17x |"
    )


def test_variants_table_without_joey_keeps_its_columns(tmp_path):
    run = {"train": {"fixed_steps": {"target_tokens_per_s": 10.0}, "window": None}}
    (tmp_path / "fp32_round1.json").write_text(json.dumps(run))
    lines = variants_table.training_table(variants_table.read_sitting(tmp_path)[0])
    assert "Joey" not in lines[0] and lines[2] == "| fp32 | 10 | 1.00x | - | - | - | - |"


BENCH = ROOT / "benchmarks" / "speed" / "joey" / "bench_joey.sh"


def _bench(tmp_path: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """bench_joey.sh with its venv, work and output directories under ``tmp_path`` (none
    exists before) and ``env`` on top; PYTHON=false makes setup.sh fail at once (exit 1)
    should the checks let the input through."""
    base = {
        "PATH": os.environ["PATH"],
        "JOEY_VENV": str(tmp_path / "venv"),
        "JOEY_WORK": str(tmp_path / "work"),
        "JOEY_OUT": str(tmp_path / "out"),
        "PYTHON": "false",
    }
    return subprocess.run(
        ["bash", str(BENCH), *args],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _multi30k(tmp_path: Path) -> Path:
    data = tmp_path / "multi30k"
    data.mkdir()
    for lang in ("de", "en"):
        (data / f"train.{lang}.gz").write_bytes(b"")
    return data


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ([], {}, "THREADS"),
        (["2", "3"], {}, "THREADS"),
        (["0"], {}, "THREADS=0"),
        (["abc"], {}, "THREADS=abc"),
        (["-2"], {}, "THREADS=-2"),
        (["2"], {"WINDOW_S": "0"}, "WINDOW_S=0"),
        (["2"], {"WINDOW_S": "-5"}, "WINDOW_S=-5"),
        (["2"], {"WINDOW_S": "abc"}, "WINDOW_S=abc"),
        (["2"], {"WINDOW_S": "0.0"}, "WINDOW_S=0.0"),
        (["2"], {"WARMUP_S": "-1"}, "WARMUP_S=-1"),
        (["2"], {"WARMUP_S": "ten"}, "WARMUP_S=ten"),
        (["2"], {"DATA": "/nonexist/a/b"}, "DATA=/nonexist/a/b"),
    ],
)
def test_bench_joey_refuses_bad_input_in_one_line_before_any_setup(tmp_path, args, env, named):
    run = _bench(tmp_path, args, **env)
    lines = run.stderr.splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith(f"bench_joey: {named}"), run.stderr
    assert "Traceback" not in run.stderr and "line " not in run.stderr and not run.stdout
    for made in ("venv", "work", "out"):  # setup.sh and joey_config.py never ran
        assert not (tmp_path / made).exists(), made


def test_bench_joey_refuses_a_data_directory_without_multi30ks_training_files(tmp_path):
    data = _multi30k(tmp_path)
    (data / "train.en.gz").unlink()
    run = _bench(tmp_path, ["2"], DATA=str(data))
    assert run.returncode == 2 and run.stderr.splitlines() == [
        f"bench_joey: DATA={data}: no train.en.gz or train.en (not Multi30k's directory?)"
    ]
    assert not (tmp_path / "venv").exists()


def test_bench_joey_lets_good_input_through_to_setup(tmp_path):
    # PYTHON=false: setup.sh's `$PYTHON -m venv` fails, exit 1 rather than the checks' 2
    run = _bench(tmp_path, ["2"], DATA=str(_multi30k(tmp_path)), WARMUP_S="0", WINDOW_S=".5")
    assert run.returncode == 1 and "bench_joey:" not in run.stderr, run.stderr


def test_joey_config_writes_the_runs_config_to_config_out_not_the_shared_work_dir(
    tmp_path, monkeypatch
):
    record = {"n_params_nmt_reference": 1, "vocab": {}, "train_pairs": 0}
    monkeypatch.setattr(joey_config, "prepare", lambda cfg, work, compare: record)
    work, out = tmp_path / "work", tmp_path / "run" / "config.yaml"
    reference = str(ROOT / "configs" / "bench_reference.yaml")
    argv = [str(work), "--model-dir", str(tmp_path / "run" / "model"), "--config", reference]
    assert joey_config.main([*argv, "--config-out", str(out)]) == 0
    assert not (work / "config.yaml").exists()
    written = yaml.safe_load(out.read_text())
    assert written["model_dir"] == str(tmp_path / "run" / "model")
    assert written["data"]["src"]["voc_file"] == str(work / "vocab.txt")
    assert joey_config.main([*argv, "--config-out", str(work / "config.yaml")]) == 2


def test_joey_config_reads_a_missing_corpus_as_an_error_not_from_the_hub(tmp_path, capsys):
    missing = tmp_path / "none"
    reference = str(ROOT / "configs" / "bench_reference.yaml")
    argv = [str(tmp_path / "work"), "--model-dir", str(tmp_path / "m"), "--config", reference]
    code = joey_config.main(
        [*argv, "--config-out", str(tmp_path / "c.yaml"), "--data-path", str(missing)]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and str(missing) in err
    assert "hub" not in err.lower() and "data.source" not in err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["0", "30", "60"], "THREADS=0"),
        (["abc", "30", "60"], "THREADS=abc"),
        (["2", "-1", "60"], "WARMUP_S=-1"),
        (["2", "30", "0"], "WINDOW_S=0"),
        (["2", "30", "-5"], "WINDOW_S=-5"),
        (["2", "30", "nan"], "WINDOW_S=nan"),
        (["2", "x", "60"], "WARMUP_S=x"),
    ],
)
def test_joey_train_bench_refuses_bad_numbers_in_one_line(tmp_path, capsys, args, named):
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    assert joey_train_bench.main(["train", str(config), *args, str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"joey_train_bench: {named}: must be")
    assert joey_train_bench.train_args("2", "0", "0.5") == (2, 0.0, 0.5)


def test_joey_train_bench_warns_of_a_window_of_few_steps():
    warning = joey_train_bench.few_steps_warning(1, 0.5)
    assert len(warning.splitlines()) == 1 and "0.5 s window holds 1 step" in warning
    assert joey_train_bench.MIN_WINDOW_STEPS == 5
