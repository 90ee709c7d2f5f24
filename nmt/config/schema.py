"""Config schema: frozen dataclasses that hold every default, each key with its meaning.

Reading YAML files and ``key=value`` overrides, coercing them to these types and checking
the values is nmt/config/load.py; an unknown key, a value of the wrong type or an
impossible value raises :class:`ConfigError` naming the dotted key
(``model.atention: unknown key``) before any work starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

# Each enumeration is written once, here; code that lists the values uses get_args.
# A test (tests/test_defined_once.py) fails when another module spells one of these out again.
ScoreKind = Literal["additive", "dot", "general", "scaled_dot"]  # global alignment scores
LocalKind = Literal["local_m", "local_p"]  # Luong et al. 2015 sec. 3.2: monotonic, predictive
AttentionKind = Literal[ScoreKind, LocalKind, "multihead", "none"]
StepOrder = Literal["bahdanau", "luong", "cgru"]
LengthPenalty = Literal["gnmt", "average", "none"]
ComputePrecision = Literal["fp32", "bf16", "fp16"]  # what "auto" resolves to
Precision = Literal["auto", ComputePrecision]
# search alone may also take its step products in int8 (CPU; nmt/ops/int8.py)
SearchPrecision = Literal[Precision, "int8"]

ATTENTION_TYPES: tuple[str, ...] = get_args(AttentionKind)
SCORE_KINDS: tuple[str, ...] = get_args(ScoreKind)
LOCAL_KINDS: tuple[str, ...] = get_args(LocalKind)
LENGTH_PENALTIES: tuple[str, ...] = get_args(LengthPenalty)
PRECISIONS: tuple[str, ...] = get_args(Precision)
SEARCH_PRECISIONS: tuple[str, ...] = get_args(SearchPrecision)
COMPUTE_PRECISIONS: tuple[str, ...] = get_args(ComputePrecision)


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the dotted key."""


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel corpus comes from and which side is source and target."""

    # auto: a directory of {split}.{lang}[.gz] files at `path` when it exists, else the hub
    source: Literal["auto", "dir", "hf", "tsv"] = "auto"
    # directory of {split}.{lang}[.gz] files, or for tsv a path containing "{split}"
    path: str | None = "../shared/data/multi30k"
    hf_name: str = "bentrevett/multi30k"
    hf_config: str | None = None
    # our split name -> the hub's split name (the hub calls "val" "validation")
    hf_splits: dict[str, str] = field(
        default_factory=lambda: {
            "train": "train",
            "val": "validation",
            "test_2016_flickr": "test",
        }
    )
    src_lang: str = "de"
    tgt_lang: str = "en"
    train_split: str = "train"
    valid_split: str = "val"
    test_splits: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr")
    # training pairs with more words than this on either side are dropped (never eval)
    max_train_words: int | None = 80
    # add joined training pairs: for each k, every k consecutive pairs joined into one
    # (as the long-sentence test set is built); empty = off. Same for every model compared.
    train_join_ks: tuple[int, ...] = ()
    # at most this many joined pairs per k, evenly spaced through the split (no randomness),
    # so that joined pairs do not crowd out the single sentences; None = all len(split)//k
    train_join_per_k: int | None = None
    # also validate on the validation split joined k pairs at a time, for these k (>= 2);
    # the selection score (val_bleu) is then the mean of plain and joined BLEU, so the best
    # checkpoint is not one that stops early on long input. Empty = plain validation only.
    valid_join_ks: tuple[int, ...] = ()
    # take only the first N pairs of a split (quick experiments, tests)
    train_limit: int | None = None
    valid_limit: int | None = None
    # where the encoded training split lives while training. memory: a Python list of
    # examples (every existing result; fine up to a few million pairs). arrow: streamed from
    # the files once, encoded into a memory-mapped Arrow dataset cached in {out_dir}/data/
    # and reused on --resume, so a corpus larger than memory trains (nmt/data/store.py); reads
    # a directory of {split}.{lang}[.gz] files; no joined pairs (train_join_ks)
    store: Literal["memory", "arrow"] = "memory"


@dataclass(frozen=True)
class SubwordConfig:
    """SentencePiece settings; models are trained on the training split only."""

    model_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000
    # one model shared by source and target, or one per language
    joint: bool = False
    character_coverage: float = 1.0
    # data.store arrow: SentencePiece trains on a reservoir sample of at most this many
    # training pairs, drawn while streaming the files (seeded by train.seed), so the
    # vocabulary step never holds the corpus. SentencePiece needs about 20 bytes per
    # character of its input: 200,000 Multi30k-length pairs peak at 1 GiB, 1,000,000 at
    # 4 GiB. (data.store memory gives SentencePiece every pair; it samples 2M sentences.)
    sample_size: int = 200_000
    # subword regularisation (Kudo 2018): each training epoch segments the training sources
    # again by sampling from SentencePiece (seeded by train.seed and the epoch, so a run and
    # its resume see the same samples); validation, test and all decoding keep the one best
    # segmentation. unigram: the smoothing alpha of P(x)^alpha (Kudo's 0.1-0.5); bpe:
    # BPE-dropout's probability of dropping a merge (Provilkov et al. 2020), below 1.
    # null or 0: no sampling. Needs data.store memory.
    sampling_alpha: float | None = None
    # unigram: sample from the whole lattice (-1, forward-filtering backward-sampling) or
    # from the nbest_size best segmentations (2..512); bpe: -1 only
    nbest_size: int = -1
    sample_target: bool = False  # also sample the training targets' segmentation


@dataclass(frozen=True)
class ModelConfig:
    """Encoder-decoder sizes; identical for every attention type unless changed here."""

    emb_dim: int = 256
    enc_hidden: int = 256  # per direction: encoder memory size is 2 * enc_hidden
    dec_hidden: int = 512
    enc_layers: int = 1
    # add each encoder layer's input to its output from the second layer on (Wu et al. 2016,
    # sec. 3.1): x_{l+1} = BiGRU_l(x_l) + x_l, both 2 * enc_hidden wide; needs enc_layers >= 2
    enc_residual: bool = False
    dec_layers: int = 1
    # on embeddings, between layers and on each step's output; on a CPU drawn on a grid of
    # 1/65,536 (nmt/ops/dropout.py: 0.3 drops a share of 0.300003)
    dropout: float = 0.3
    # global: additive | dot | general | scaled_dot; local (Luong et al. 2015, sec. 3.2):
    # local_m | local_p, scored with local_score; multihead (heads heads); none
    attention: AttentionKind = "additive"
    # bahdanau: attend with s_{t-1}, then GRU([y; c]); luong: GRU first, then attend;
    # cgru: Nematus's conditional GRU (Sennrich et al. 2017): s' = GRU1(y, s_{t-1}),
    # attend with s', then s_t = GRU2(c, s'); the pre-output reads [s_t; c; y] as bahdanau's
    step_order: StepOrder = "bahdanau"
    attn_dim: int = 256  # additive attention's hidden size A
    output_dim: int = 256  # pre-output / attentional vector size
    # the generator's weight is the target embedding matrix (Press & Wolf 2017; Inan et al.
    # 2017); needs output_dim == emb_dim
    tie_embeddings: bool = False
    # local attention's alignment score (Luong's best: general) and window half-width D
    local_score: ScoreKind = "general"
    local_window: int = 10  # source pieces on each side of p_t (the paper's D = 10)
    heads: int = 4  # multihead: h heads of (2 * enc_hidden) / h dims each
    # biases that some implementations leave out (Joey NMT has neither): the generator's
    # b in softmax(W h~ + b), and the additive scorer's key projection U h_i + b
    output_bias: bool = True
    attention_bias: bool = True
    # training only: each source piece (not EOS) is replaced by UNK with this probability,
    # a new draw every step, so the model cannot lean on any one piece (word dropout as in
    # Sennrich et al. 2016, WMT16; Gal & Ghahramani 2016); the UNK embedding plays the
    # dropped word. 0 = off
    word_dropout: float = 0.0
    # also drop the decoder's input pieces (not BOS); what it must predict stays intact
    word_dropout_target: bool = False


@dataclass(frozen=True)
class SearchConfig:
    """Decoding used by evaluate, translate and validation."""

    beam_size: int = 5  # 1 = greedy search
    # gnmt: Wu et al. 2016 eq. 14; average: log P / length; none: raw log P
    length_penalty: LengthPenalty = "gnmt"
    alpha: float = 0.6  # GNMT length penalty strength
    valid_beam_size: int = 1  # validation BLEU during training (greedy is fastest)
    # matrix products of search steps: auto (CUDA: bf16 where native; CPU: the fastest of
    # fp32, bf16 and int8 by a cached measurement, nmt/inference/search_choice.py), fp32,
    # bf16, fp16 (CUDA), or int8 (CPU: fbgemm's int8 products, nmt/ops/int8.py); the
    # search's scores stay fp32 (nmt.model.seq2seq.Seq2Seq.step)
    precision: SearchPrecision = "auto"


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, budgets and bookkeeping."""

    seed: int = 1
    batch_size: int = 64  # sentences per batch
    max_tokens: int | None = None  # if set, batches hold at most this many target tokens
    # CPU under bf16/fp16 autocast only (oneDNN builds a kernel per matrix shape): pad each
    # training batch with dummy pairs (zero loss, zero gradient) to a multiple of this many
    # sentences, and its source width to a multiple of 8 (nmt/ops/shapes.py); None = off
    batch_multiple: int | None = None
    # CPU under bf16/fp16 autocast only: a batch closing with at least this many sentences
    # keeps a multiple of it, the rest start the next batch (no pair dropped, no dummy rows;
    # nmt/data/bucketing.py), so that B takes few values and oneDNN builds few kernels; the
    # kernel caches then get 512 entries, not 128 (nmt/ops/primitive_cache.py). None = off
    batch_trim: int | None = None
    lr: float = 1e-3
    clip_norm: float = 1.0
    label_smoothing: float = 0.0
    max_epochs: int = 30
    # wall-clock budget of the training loop, validations included: it stops in time for one
    # more validation, timed by the last one. Inside the first epoch there is no last one, so
    # a budget that ends there overruns by one validation; setup (vocabulary, data store)
    # and the final test scoring are outside it
    max_minutes: float | None = None
    # stop after this many optimizer steps (batches): a budget that, unlike minutes, does
    # not depend on what else runs on the machine; None = no step limit
    max_steps: int | None = None
    patience: int | None = 5  # validations without a val BLEU gain before stopping
    max_output_ratio: float = 2.0  # decode at most ratio * src_len + 10 pieces
    valid_max_sentences: int | None = None
    out_dir: str = "runs/{name}"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int | None = None  # torch CPU threads; None keeps torch's default
    progress: bool = True  # progress bar on a terminal, a log line every 50 batches otherwise
    # a NaN/inf loss: stop with an error naming the step, or skip that batch and go on
    on_nonfinite_loss: Literal["stop", "skip"] = "stop"
    # constant; plateau: lr *= lr_decay when val BLEU stalls for lr_patience validations;
    # warmup_decay: linear warm-up over warmup_steps, then lr * sqrt(warmup_steps / step)
    lr_schedule: Literal["constant", "plateau", "warmup_decay"] = "constant"
    lr_decay: float = 0.5
    lr_patience: int = 1
    min_lr: float = 1e-5
    warmup_steps: int = 1000
    valid_every_steps: int | None = None  # also validate every N steps (else once an epoch)
    keep_checkpoints: int = 0  # keep the last N validation checkpoints, for `nmt average`
    # matrix multiplies of the training step: fp32; bf16 or fp16 autocast (fp32 master
    # weights, optimizer and loss); auto = bf16 on a GPU that computes it natively, on a
    # CPU with AVX512_BF16/AMX only where a short measurement finds it faster
    # (nmt/training/calibrate.py), else fp32. fp16 is CUDA only (with loss scaling). auto is the
    # default since bf16 was measured to cost no quality: the same per-step validation
    # loss as fp32, and higher BLEU after the same wall clock (results/speed/2026-12-01-d)
    precision: Precision = "auto"


@dataclass(frozen=True)
class Config:
    """The whole run: ``name`` plus one section per stage."""

    name: str = "nmt"
    data: DataConfig = field(default_factory=DataConfig)
    subwords: SubwordConfig = field(default_factory=SubwordConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def out_dir(self) -> Path:
        """Run directory, with ``{name}`` filled in."""
        return Path(self.train.out_dir.format(name=self.name))

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples become lists) suitable for YAML and checkpoints."""
        return plain(dataclasses.asdict(self))


@dataclass(frozen=True)
class StudyConfig:
    """``nmt study``: models that differ only in attention, trained with one budget and
    compared by source length (see nmt/commands/study.py)."""

    name: str = "study"
    base_config: str = "configs/multi30k_deen_additive.yaml"
    run_prefix: str = "study"  # model runs are named {run_prefix}_{attention}
    attentions: tuple[str, ...] = ("none", "additive", "dot")
    # key=value overrides applied to every model (budget, threads, seed ...)
    overrides: tuple[str, ...] = ()
    parallel: int = 1  # models trained at the same time (give each train.threads=1)
    baseline: str = "none"  # the model every other one is compared with
    test_splits: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr")
    # the joined long-sentence set is built from this split by joining k consecutive pairs
    long_set_split: str | None = "test_2016_flickr"
    # more splits whose joined sets (the same join_ks) are scored too, e.g. test_2017_flickr
    long_set_splits: tuple[str, ...] = ()
    # the report's search: beam search of this size (1: greedy only), the GNMT alpha chosen
    # per model on the validation score (plain and joined val, as in training) among
    # ``alphas``; greedy search is always reported beside it
    beam_size: int = 1
    alphas: tuple[float, ...] = (0.6, 1.0, 1.4)
    join_ks: tuple[int, ...] = (1, 2, 3, 4)
    buckets: str = "1-10,11-20,21-30,31-40,41-50,51-60,61-"
    min_bucket: int = 30  # smaller buckets are reported but marked too few
    # the headline: each model's BLEU on the first bucket minus its BLEU on the second
    drop_buckets: str = "1-10,51-60"
    n_samples: int = 1000  # bootstrap resamples
    bootstrap_seed: int = 12345
    heatmap_sentences: tuple[str, ...] = ()  # source sentences to draw attention for
    sampled_heatmaps: int = 2  # plus this many test sentences, chosen by a fixed seed
    # long joined test sentences (source words in this range) whose attention is drawn,
    # with the fixed-vector model's output beside them
    long_heatmap_words: tuple[int, ...] = (40, 60)
    long_heatmaps: int = 1
    # the training-length axis of Bahdanau et al. (2015, Fig. 2: RNNsearch-30 vs -50): for
    # each cap, the attentions in cap_attentions are trained again with
    # data.max_train_words=cap, as runs {run_prefix}_{attention}-{cap}
    extra_caps: tuple[int, ...] = ()
    cap_attentions: tuple[str, ...] = ("none", "additive")
    # multi-head attention with other head counts: for each h, a ``multihead`` model with
    # model.heads=h, run {run_prefix}_multihead-{h}h (same total size, so a fair
    # single-head vs multi-head comparison: h=1 against the ``multihead`` of attentions)
    head_counts: tuple[int, ...] = ()
    # the seed axis (run-to-run spread): each model named in seed_models (by its label,
    # e.g. multihead-4h or additive) is trained again with train.seed=s for each s in
    # extra_seeds, as run {run_prefix}_{label}_s{s}; the base config's own seed is the first
    extra_seeds: tuple[int, ...] = ()
    seed_models: tuple[str, ...] = ()
    report_dir: str = "reports/{name}"
    # where each run's records and the report's translations are kept in git
    # (nmt/study/archive.py), e.g. "results/{name}/models": a run found only there
    # is reported from it and not trained again; None keeps no archive
    archive_dir: str | None = None
    # exported model folders (``nmt export``: model.safetensors, config.yaml ...) that are
    # models of the study: a model with no run directory whose folder's config.yaml has its
    # name and config is reported from the folder (nmt/study/shipped.py), not trained
    model_folders: tuple[str, ...] = ()


# Keys the study sets for each of its models (nmt/study/plan.py run_overrides),
# with what to do instead of overriding them: the study's ``overrides`` may not set them.
STUDY_SET_KEYS = {
    "model.attention": "list the models' attentions in attentions (and cap_attentions) instead",
    "name": "the runs are named {run_prefix}_{model}: set run_prefix instead",
}


# Keys that only extend or budget a run: ``--resume`` applies (and logs) new values of
# these; any other difference from the stored configuration is refused.
RESUME_ADJUSTABLE = (
    "train.max_epochs",
    "train.max_minutes",
    "train.max_steps",
    "train.patience",
    "train.valid_every_steps",
    "train.keep_checkpoints",
    "train.progress",
    "train.threads",
    "train.device",
    "train.precision",
    "train.out_dir",
    "name",
)


def plain(x: Any) -> Any:
    """A copy of nested dicts, lists and tuples as dicts and lists (tuples become lists)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x
