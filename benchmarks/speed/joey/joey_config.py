"""Joey NMT 2.3.0's config, data and SentencePiece model for nmt's reference architecture
(configs/bench_reference.yaml), for benchmarks/speed/joey/bench_joey.sh. Runs in nmt's
environment (it reads the config and the training pairs through nmt's own code):

    .venv/bin/python benchmarks/speed/joey/joey_config.py WORK_DIR --model-dir DIR \
        --config-out FILE [--config configs/bench_reference.yaml] [--data-path DIR] \
        [--seed 42] [--compare-nmt]

Writes into WORK_DIR, once for a given config and corpus (``prep.json`` records what it
made from; a second call with the same inputs writes nothing there), what runs may share:

- ``data/train.{src,tgt}``: nmt's training pairs as plain text (the split after nmt's
  length filter, ``data.max_train_words``), ``data/val.{src,tgt}``: the validation split
  (Joey wants a dev set; the timed run never validates);
- ``spm.model``: one joint SentencePiece model trained as nmt trains it
  (nmt/data/vocab.py's settings: ``subwords.*``, character coverage, sample sizes, one
  thread) on the same sentences, with Joey's special ids (UNK 0, PAD 1, BOS 2, EOS 3) instead
  of nmt's (PAD 0, UNK 1); ``vocab.txt``: its pieces in id order, Joey's ``voc_file``;
- ``prep.json``: the inputs' digest, nmt's parameter count of the reference model, pair
  counts and, with ``--compare-nmt``, whether nmt's own model of these sentences has the
  same pieces and scores (it trains SentencePiece a second time);
and ``--config-out`` (a run's own file, never in WORK_DIR: two runs at once would race for
one): Joey's config (:func:`joey_config`), its ``model_dir`` the ``--model-dir``.

The corpus is always read from a local directory (``data.source=dir``), never the hub.

Exits 2 with one line on a config Joey's RNN model cannot match (e.g. ``model.attn_dim``
other than ``model.dec_hidden``), unreadable data or a ``--config-out`` inside WORK_DIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import sentencepiece as spm
import yaml

from nmt.config.load import load_config
from nmt.config.schema import Config
from nmt.data.corpus import read_split
from nmt.data.training_data import training_pairs
from nmt.data.vocab import train_vocab
from nmt.model.seq2seq import build_model, count_parameters

# Joey NMT 2.3.0's default special symbols (joeynmt/config.py): pieces 0-3 of the model
JOEY_SPECIALS = {"unk": (0, "<unk>"), "pad": (1, "<pad>"), "bos": (2, "<s>"), "eos": (3, "</s>")}
ATTENTION = {"additive": "bahdanau", "general": "luong"}  # nmt's name -> Joey's


class MismatchError(ValueError):
    """configs/bench_reference.yaml sets something Joey's RNN model cannot reproduce."""


def joey_config(cfg: Config, work: Path, model_dir: Path, *, seed: int = 42) -> dict[str, Any]:
    """Joey NMT 2.3.0's config (a dict for its YAML) of ``cfg``'s model and training
    settings: GRU encoder (bidirectional, ``enc_hidden`` per direction) and decoder,
    Bahdanau attention, input feeding, bridge initialisation, dropout ``model.dropout`` on
    embeddings and hidden layers, no tying; token batches of ``train.max_tokens``, Adam at
    ``train.lr`` held constant (Joey's ``exponential`` scheduler with factor 1.0: its
    ``plateau`` fails on torch 2.13), gradient-norm clipping ``train.clip_norm``, the loss
    summed over target tokens and divided by their count, never validated (validation every
    10^9 steps) and logged every step (bench_joey.sh reads each step's tokens and time).

    Raises:
        MismatchError: a setting Joey's model has no match for (one line naming it).
    """
    m, t, d = cfg.model, cfg.train, cfg.data

    def need(ok: bool, key: str, value: Any, why: str) -> None:
        if not ok:
            raise MismatchError(f"{key}: {value!r}: {why}")

    need(m.attention in ATTENTION, "model.attention", m.attention, "Joey has bahdanau/luong")
    need(m.step_order == "luong", "model.step_order", m.step_order, "Joey feeds input (luong)")
    need(m.attn_dim == m.dec_hidden, "model.attn_dim", m.attn_dim, "Joey's is dec_hidden")
    need(m.output_dim == m.dec_hidden, "model.output_dim", m.output_dim, "Joey's is dec_hidden")
    need(not m.output_bias, "model.output_bias", m.output_bias, "Joey's output layer has none")
    need(not m.attention_bias, "model.attention_bias", m.attention_bias, "Joey's keys have none")
    need(not m.tie_embeddings, "model.tie_embeddings", m.tie_embeddings, "untied in the bench")
    need(not m.enc_residual, "model.enc_residual", m.enc_residual, "Joey has no residual RNN")
    need(cfg.subwords.joint, "subwords.joint", cfg.subwords.joint, "one model for both sides")
    specials = {}
    for name, (i, piece) in JOEY_SPECIALS.items():
        specials[f"{name}_id"], specials[f"{name}_token"] = i, piece

    def side(lang: str) -> dict[str, Any]:
        return {
            "lang": lang,
            "level": "bpe",
            "lowercase": False,
            "normalize": False,
            "max_length": -1,  # the pairs are nmt's, already filtered (data.max_train_words)
            "voc_file": str(work / "vocab.txt"),
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": str(work / "spm.model"), "alpha": 0.0},
        }

    return {
        "name": f"{cfg.name}_joey",
        "joeynmt_version": "2.3.0",
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": seed,
        "data": {
            "train": str(work / "data" / "train"),
            "dev": str(work / "data" / "val"),
            "dataset_type": "plain",
            "src": side(d.src_lang),
            "trg": side(d.tgt_lang),
            "special_symbols": specials,
        },
        "testing": {
            "n_best": 1,
            "beam_size": 5,
            "beam_alpha": 0.6,
            "batch_size": 64,
            "batch_type": "sentence",
            "max_output_length": 100,
            "eval_metrics": ["bleu"],
            "sacrebleu_cfg": {"tokenize": "13a"},
        },
        "training": {
            "model_dir": str(model_dir),
            "overwrite": True,
            "optimizer": "adam",
            "adam_betas": [0.9, 0.999],
            "learning_rate": t.lr,
            "learning_rate_min": 1.0e-8,
            "scheduling": "exponential",
            "decrease_factor": 1.0,
            "loss": "crossentropy",
            "label_smoothing": 0.0,
            "normalization": "tokens",
            "clip_grad_norm": t.clip_norm,
            "batch_size": t.max_tokens,
            "batch_type": "token",
            "batch_multiplier": 1,
            "epochs": t.max_epochs,
            "validation_freq": 10**9,
            "logging_freq": 1,
            "early_stopping_metric": "ppl",
            "keep_best_ckpts": 1,
            "shuffle": True,
            "print_valid_sents": [],
            "num_workers": 0,
        },
        "model": {
            "initializer": "xavier_uniform",
            "bias_initializer": "zeros",
            "embed_initializer": "normal",
            "tied_embeddings": False,
            "tied_softmax": False,
            "encoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "bidirectional": True,
                "hidden_size": m.enc_hidden,
                "num_layers": m.enc_layers,
                "dropout": m.dropout,
                "embeddings": {"embedding_dim": m.emb_dim, "scale": False, "dropout": m.dropout},
            },
            "decoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "hidden_size": m.dec_hidden,
                "num_layers": m.dec_layers,
                "attention": ATTENTION[m.attention],
                "input_feeding": True,
                "init_hidden": "bridge",
                "dropout": m.dropout,
                "hidden_dropout": m.dropout,
                "embeddings": {"embedding_dim": m.emb_dim, "scale": False, "dropout": m.dropout},
            },
        },
    }


def train_joey_spm(sentences: list[str], cfg: Config, out: Path) -> None:
    """SentencePiece on ``sentences`` with nmt's settings (nmt/data/vocab.py's
    ``_train_spm``) and Joey's special ids; writes ``out``.spm.model and vocab.txt.

    Raises:
        MismatchError: a piece Joey's line-based ``voc_file`` reader would split or strip.
    """
    s = cfg.subwords
    ids = {f"{name}_id": i for name, (i, _) in JOEY_SPECIALS.items()}
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(out / "spm"),
        vocab_size=s.vocab_size,
        model_type=s.model_type,
        character_coverage=s.character_coverage,
        hard_vocab_limit=False,
        seed_sentencepiece_size=200_000,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        num_threads=1,
        minloglevel=2,
        **ids,
    )
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    for i, piece in enumerate(pieces):
        if piece.splitlines() != [piece]:
            raise MismatchError(f"spm.model: piece {i} {piece!r} would break vocab.txt's lines")
    (out / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")


def same_as_nmt(sentences: list[str], cfg: Config, out: Path) -> dict[str, Any]:
    """Whether nmt's own SentencePiece model of ``sentences`` has the pieces and scores of
    ``out``/spm.model, specials aside (ids 0-3 swap between the two)."""
    s = cfg.subwords
    ours = train_vocab(
        sentences, s.vocab_size, model_type=s.model_type, character_coverage=s.character_coverage
    ).sp
    joey = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    same = len(ours) == len(joey) and all(
        ours.id_to_piece(i) == joey.id_to_piece(i) and ours.get_score(i) == joey.get_score(i)
        for i in range(4, len(joey))
    )
    return {"pieces_and_scores_equal_to_nmt": same, "pieces": len(joey), "nmt_pieces": len(ours)}


def digest(cfg: Config, files: list[Path]) -> str:
    h = hashlib.sha256(json.dumps(dataclass_dict(cfg), sort_keys=True, default=str).encode())
    h.update(spm.__version__.encode())
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def dataclass_dict(cfg: Config) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k in ("data", "subwords")}


def prepare(cfg: Config, work: Path, compare_nmt: bool) -> dict[str, Any]:
    """Data, SentencePiece model and prep.json in ``work`` (skipped when prep.json matches
    the config's data and subword settings and the corpus files)."""
    d = cfg.data
    inputs = sorted(Path(d.path).glob(f"*.{d.src_lang}*")) + sorted(
        Path(d.path).glob(f"*.{d.tgt_lang}*")
    )
    key = digest(cfg, inputs)
    stamp = work / "prep.json"
    if stamp.exists():
        old = json.loads(stamp.read_text())
        if old.get("digest") == key and (not compare_nmt or "compare_nmt" in old):
            print(f"joey_config: {work} is up to date (prep.json matches), skipping", flush=True)
            return old
    (work / "data").mkdir(parents=True, exist_ok=True)
    _raw, pairs, stats = training_pairs(d)
    val = read_split(d, d.valid_split)
    for name, rows in (("train", pairs), ("val", val)):
        for i, pair in enumerate(rows):  # Joey reads its files with str.splitlines()
            if len(pair.src.splitlines()) > 1 or len(pair.tgt.splitlines()) > 1:
                raise MismatchError(f"{d.path}: {name} pair {i + 1} has a line break inside")
        for lang, text in (
            (d.src_lang, [p.src for p in rows]),
            (d.tgt_lang, [p.tgt for p in rows]),
        ):
            (work / "data" / f"{name}.{lang}").write_text("\n".join(text) + "\n", encoding="utf-8")
    sentences = [s for s in [p.src for p in pairs] + [p.tgt for p in pairs] if s.strip()]
    print(f"joey_config: SentencePiece on {len(sentences)} sentences -> {work}", flush=True)
    train_joey_spm(sentences, cfg, work)
    sp = spm.SentencePieceProcessor(model_file=str(work / "spm.model"))
    record: dict[str, Any] = {
        "digest": key,
        "config": cfg.name,
        "data_path": str(Path(d.path).resolve()),
        "train_pairs": len(pairs),
        "train_pairs_skipped": stats.skipped_count,
        "val_pairs": len(val),
        "n_params_nmt_reference": count_parameters(build_model(cfg.model, len(sp), len(sp))),
        "vocab": {"pieces": len(sp), "joint": True, "model_type": cfg.subwords.model_type},
        "sentencepiece": spm.__version__,
    }
    if compare_nmt:
        record["compare_nmt"] = same_as_nmt(sentences, cfg, work)
    stamp.write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("work", type=Path)
    p.add_argument("--model-dir", type=Path, required=True)
    p.add_argument("--config-out", type=Path, required=True)
    p.add_argument("--config", default="configs/bench_reference.yaml")
    p.add_argument("--data-path", default=None)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--compare-nmt", action="store_true")
    args = p.parse_args(argv)
    # a local corpus only: a missing one is an error here, not a download from the hub
    overrides = ["data.source=dir"] + ([f"data.path={args.data_path}"] if args.data_path else [])
    work, config_out = args.work.resolve(), args.config_out.resolve()
    if work in config_out.parents:
        print(
            f"joey_config: --config-out {config_out}: inside WORK_DIR, which runs share; "
            "give the run's own directory",
            file=sys.stderr,
        )
        return 2
    try:
        cfg = load_config(args.config, overrides)
        joey = joey_config(cfg, work, args.model_dir.resolve(), seed=args.seed)
        record = prepare(cfg, work, args.compare_nmt)
        config_out.parent.mkdir(parents=True, exist_ok=True)
        config_out.write_text(yaml.safe_dump(joey, sort_keys=False))
    except (ValueError, OSError) as e:  # ConfigError, DataError, MismatchError, files: one line
        print(f"joey_config: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: record[k] for k in ("n_params_nmt_reference", "vocab", "train_pairs")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
