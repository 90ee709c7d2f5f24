"""What ``nmt bench`` is asked (:class:`BenchOptions`, checked before any work), what it
measures (:class:`Subject`) and the data it reads: the split it decodes and the training
batches it times (nmt/analysis/bench.py measures)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from nmt.config.schema import Config, DataConfig, SearchConfig
from nmt.data.batches import Example, encode_pairs
from nmt.data.bucketing import make_batches
from nmt.data.corpus import DataError, Pair, read_split
from nmt.data.vocab import Vocab
from nmt.model.folder import names_folder
from nmt.model.seq2seq import Seq2Seq
from nmt.ops.files import check_writable


@dataclass
class Subject:
    """The model under test. kind: ``checkpoint`` or ``config`` (fresh weights);
    data: where its splits are read; train_pairs: None when training is skipped."""

    kind: str
    cfg: Config
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    data: DataConfig
    train_pairs: list[Pair] | None


class BenchError(ValueError):
    """Bad input to ``nmt bench``; the message names the option or file."""


@dataclass(frozen=True)
class BenchOptions:
    """What to measure; field names are the command's options (``train_steps`` is
    ``--train-steps``). ``source`` is a YAML config or a ``.pt`` checkpoint;
    ``train_seconds`` 0 leaves out the wall-clock window."""

    source: Path
    _: KW_ONLY
    overrides: tuple[str, ...] = ()
    threads: int | None = None
    device: str = "auto"
    warmup: int = 5
    train_steps: int = 40
    train_seconds: float = 30.0
    sentences: int = 1000
    split: str = "test_2016_flickr"
    beam: int = SearchConfig.beam_size
    batch_size: int = 64
    skip_train: bool = False
    skip_decode: bool = False
    data_path: str | None = None
    json_path: Path | None = None  # where the caller will write the JSON (checked here)
    precision: str | None = None  # train.precision for the training steps; None: the run's
    workers: int | None = None  # batches decoded at once (translate_lines); None: its default
    decode_precision: str | None = None  # search.precision of the decoding runs; None: the run's
    processes: bool = False  # search in processes (nmt.inference.search_processes)
    search_passes: int = 3  # timed passes of each search; the median is reported

    def check(self) -> None:
        """Raises BenchError naming the first option with an impossible value."""
        at_least = {"train_steps": 1, "sentences": 1, "beam": 1, "batch_size": 1, "warmup": 0}
        at_least["search_passes"] = 1
        for name, low in at_least.items():
            if getattr(self, name) < low:
                raise BenchError(
                    f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least {low}"
                )
        for name in ("threads", "workers"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise BenchError(f"--{name} {getattr(self, name)}: must be at least 1")
        if not self.train_seconds >= 0:
            raise BenchError(f"--train-seconds {self.train_seconds}: must be 0 or more")
        if self.skip_train and self.skip_decode:
            raise BenchError("--skip-train and --skip-decode together leave nothing to measure")
        if self.json_path is not None:
            try:
                check_writable(self.json_path, "--json")
            except ValueError as e:
                raise BenchError(str(e)) from None
        if self.source.suffix not in (".pt", ".yaml", ".yml") and not names_folder(self.source):
            raise BenchError(
                f"{self.source}: give a YAML config (.yaml, .yml) or a checkpoint "
                "(.pt or a model folder)"
            )
        if self.overrides and self.source.suffix not in (".yaml", ".yml"):
            raise BenchError(
                f"{self.source}: key=value overrides ({self.overrides[0]!r}) "
                "apply to a CONFIG, not to a checkpoint"
            )


def decode_split(subject: Subject, opts: BenchOptions) -> tuple[list[str], list[str]]:
    """(sources, references): the first ``opts.sentences`` pairs of ``opts.split``.

    Raises:
        BenchError: the split cannot be read or is empty (names ``--split``).
    """
    try:
        pairs = read_split(subject.data, opts.split, limit=opts.sentences)
    except DataError as e:
        raise BenchError(f"--split {opts.split}: {e}") from None
    if not pairs:
        raise BenchError(f"--split {opts.split}: the split is empty")
    return [p.src for p in pairs], [p.tgt for p in pairs]


def training_batches(
    subject: Subject, opts: BenchOptions, trim: int | None = None
) -> list[list[Example]]:
    """The first epoch's shuffled, length-bucketed batches, as ``nmt train`` makes them
    (``trim``: ``train.batch_trim`` where the run applies it).

    Raises:
        BenchError: fewer batches than ``--warmup`` + ``--train-steps``.
    """
    t = subject.cfg.train
    examples = encode_pairs(subject.train_pairs or [], subject.src_vocab, subject.tgt_vocab)
    seed = t.seed * 100_003
    batches = make_batches(
        examples, t.batch_size, max_tokens=t.max_tokens, shuffle_seed=seed, trim=trim
    )
    needed = opts.warmup + opts.train_steps
    if len(batches) < needed:
        raise BenchError(
            f"--warmup {opts.warmup} + --train-steps {opts.train_steps} asks for "
            f"{needed} batches, but the training data of {opts.source} makes "
            f"only {len(batches)}"
        )
    return batches
