"""Command-line interface: the ``nmt`` command, typer wiring only.

Subcommands ``train``, ``evaluate``, ``translate``, ``average``, ``study``, ``heads`` and
``bench``;
each parses its options and calls the module that does the work.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from nmt.model.checkpoint import CheckpointError
from nmt.config.schema import ConfigError
from nmt.config.load import load_config
from nmt.data.corpus import DataError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="RNN encoder-decoder translation with selectable attention.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        import torch

        typer.echo(f"nmt {version('nmt')} (torch {torch.__version__})")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print nmt's and torch's versions and exit.")) -> None:
    """RNN encoder-decoder translation with selectable attention."""

# search options shared by evaluate and translate; defaults come from the checkpoint
BEAM_OPTION = typer.Option(None, min=1, help="Beam size (1 = greedy); default: the "
                           "checkpoint's search.beam_size.")
ALPHA_OPTION = typer.Option(None, min=0.0, help="GNMT length penalty alpha.")
LENGTH_PENALTY_OPTION = typer.Option(None, help="gnmt | average | none.")
WORKERS_OPTION = typer.Option(None, min=1, help="Batches decoded at once on the CPU, the "
                              "threads shared among them (default: one per torch thread).")
DEVICE_OPTION = typer.Option("auto", help="auto (CUDA when present) | cpu | cuda | cuda:N.")
PRECISION_OPTION = typer.Option(None, help="Search precision: fp32, bf16, fp16 (CUDA) or "
                                "auto (bf16 where the device has it); the matrix products "
                                "only, scores stay fp32. Default: the checkpoint's "
                                "search.precision.")

USER_ERRORS = (ConfigError, DataError, CheckpointError, ValueError, OSError)


def _fail(e: Exception) -> None:
    typer.secho(f"error: {e}", err=True, fg=typer.colors.RED)
    raise typer.Exit(2)


def _length_penalty(value: str | None) -> str | None:
    if value is not None and value not in ("gnmt", "average", "none"):
        _fail(ValueError(f"--length-penalty: {value!r} is not one of gnmt, average, none"))
    return value


@app.command()
def train(
    config: Path = typer.Argument(..., help="YAML config file."),
    overrides: Optional[list[str]] = typer.Argument(
        None, help="key=value overrides with dotted keys, e.g. model.attention=dot"),
    resume: bool = typer.Option(False, "--resume", help="Continue {out_dir}/last.pt."),
) -> None:
    """Train a model; checkpoints, config and a JSONL validation log go to train.out_dir."""
    from nmt.commands.train import run_training
    from nmt.training.state import TrainingError

    try:
        cfg = load_config(config, overrides or [])
        state = run_training(cfg, resume=resume, log=lambda m: typer.echo(m, err=True))
    except (*USER_ERRORS, TrainingError) as e:
        _fail(e)
    except KeyboardInterrupt:  # before the training loop's own handler is installed
        typer.secho("interrupted before training started; nothing to resume", err=True)
        raise typer.Exit(130)
    if state.interrupted is not None:
        # conventional shell codes, so `nmt train ... && nmt evaluate ...` stops here
        raise typer.Exit(130 if state.interrupted == "SIGINT" else 143)
    if os.environ.get("RANK", "0") != "0":
        return
    typer.echo(f"best val BLEU {state.best_bleu_text()}; trained {state.step} steps "
               f"({state.epoch} full epoch{'' if state.epoch == 1 else 's'}) in {state.elapsed_s / 60:.1f} min; "
               f"checkpoint {cfg.out_dir() / 'best.pt'}")


@app.command()
def evaluate(
    checkpoints: list[Path] = typer.Argument(..., help="One or more checkpoints."),
    split: Optional[str] = typer.Option(None, help="Named split (default: first test split)."),
    src: Optional[Path] = typer.Option(None, help="Source file (instead of --split)."),
    ref: Optional[Path] = typer.Option(None, help="Reference file (with --src)."),
    buckets: str = typer.Option("1-10,11-20,21-30,31-", help="Source-length buckets in words."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write scores as JSON."),
    batch_size: int = typer.Option(64, min=1, help="Sentences per decoding batch."),
    examples: int = typer.Option(0, min=0, help="Print this many example translations."),
    data_path: Optional[str] = typer.Option(None, help="Override data.path of the checkpoint."),
    beam: Optional[int] = BEAM_OPTION,
    alpha: Optional[float] = ALPHA_OPTION,
    length_penalty: Optional[str] = LENGTH_PENALTY_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    device: str = DEVICE_OPTION,
    precision: Optional[str] = PRECISION_OPTION,
) -> None:
    """Decode a test set and report sacreBLEU, chrF and BLEU by source length."""
    from nmt.commands.evaluate import evaluate_checkpoints

    if json_out is not None and not json_out.parent.is_dir():
        _fail(ValueError(f"--json: directory {json_out.parent} does not exist"))
    try:
        report = evaluate_checkpoints(checkpoints, split=split, src=src, ref=ref,
                                      buckets=buckets, batch_size=batch_size,
                                      n_examples=examples, data_path=data_path,
                                      beam_size=beam, alpha=alpha,
                                      length_penalty=_length_penalty(length_penalty),
                                      device=device, workers=workers, precision=precision)
    except USER_ERRORS as e:
        _fail(e)
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun every rank decodes the same; rank 0 alone reports
    for warning in report.warnings:
        typer.echo(warning, err=True)
    typer.echo(report.table)
    if json_out is not None:
        json_out.write_text(json.dumps(report.json, indent=2) + "\n", encoding="utf-8")
        typer.echo(f"wrote {json_out}")


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same inode when both exist (links, ``./``
    spellings), else the same absolute path."""
    if a.exists() and b.exists():
        return a.samefile(b)
    return a.resolve() == b.resolve()


@app.command()
def translate(
    checkpoint: Path = typer.Argument(..., help="Checkpoint file."),
    input: Optional[Path] = typer.Option(None, "--input", "-i", help="Input file (default stdin)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    attention: bool = typer.Option(False, "--attention",
                                   help="Show the most-attended source piece per target piece."),
    batch_size: int = typer.Option(64, min=1, help="Sentences per batch in filter mode."),
    nbest: int = typer.Option(1, min=1, help="Print the N best hypotheses per line as "
                              "'index ||| text ||| score' (needs --beam >= N)."),
    plot: Optional[Path] = typer.Option(None, help="Draw the attention heatmap to this image, "
                                        "in the format of its suffix (.png, .pdf, .svg; "
                                        "several lines: FILE_1.png, FILE_2.png, ...)."),
    beam: Optional[int] = BEAM_OPTION,
    alpha: Optional[float] = ALPHA_OPTION,
    length_penalty: Optional[str] = LENGTH_PENALTY_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    device: str = DEVICE_OPTION,
    precision: Optional[str] = PRECISION_OPTION,
) -> None:
    """Translate interactively (terminal) or as a filter (one line out per line in)."""
    from nmt.model.checkpoint import load_checkpoint
    from nmt.commands.translate import run_filter, run_interactive
    from nmt.ops.device import pick_device
    from nmt.inference.translate import decoding_from_config

    # `-` is standard input / output, as for other filters
    input = None if input is not None and str(input) == "-" else input
    output = None if output is not None and str(output) == "-" else output
    try:
        # the filter writes as it goes, and a heatmap replaces its file: neither may be a
        # file that is read (or, for --plot, the --output)
        for name, written, read in (("--output", output, (("--input", input),
                                                           ("checkpoint", checkpoint))),
                                    ("--plot", plot, (("--input", input),
                                                      ("checkpoint", checkpoint),
                                                      ("--output", output)))):
            for option, path in read:
                if written is not None and path is not None and _same_file(written, path):
                    raise ValueError(f"{name} {written}: is the same file as the {option}; "
                                     "it would be overwritten")
        if plot is not None:
            # checked before any translating: a heatmap that cannot be written loses the work
            if plot.is_dir() or not plot.parent.is_dir():
                raise ValueError(f"--plot {plot}: " + ("is a directory" if plot.is_dir() else
                                                       f"folder {plot.parent} does not exist"))
            from nmt.evaluation.plots import image_format

            try:
                image_format(plot)
            except ValueError as e:
                raise ValueError(f"--plot {e}") from None
        loaded = load_checkpoint(checkpoint, pick_device(device, "--device"))
        decoding = decoding_from_config(loaded.cfg, beam, alpha, _length_penalty(length_penalty),
                                        nbest, precision)
        decoding = decoding.on(next(loaded.model.parameters()).device, "--precision")
        if nbest > decoding.beam_size:
            raise ValueError(f"--nbest {nbest} needs --beam of at least {nbest} "
                             f"(beam is {decoding.beam_size})")
    except USER_ERRORS as e:
        _fail(e)
    if input is None and output is None and sys.stdin.isatty():
        code = run_interactive(loaded, attention, decoding, plot)
        if code:
            raise typer.Exit(code)
        return
    try:
        run_filter(loaded, input, output, attention, decoding, batch_size, plot, workers)
    except BrokenPipeError:
        # the reader stopped (e.g. `| head`): stop quietly, as other filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(141) from None
    except USER_ERRORS as e:
        _fail(e)


@app.command()
def average(
    inputs: list[Path] = typer.Argument(..., help="Checkpoints, or a run directory whose "
                                        "step_*.pt files (train.keep_checkpoints) are used."),
    output: Path = typer.Option(..., "--output", "-o", help="Averaged checkpoint to write."),
    last: Optional[int] = typer.Option(None, min=1, help="Use only the last N checkpoints."),
) -> None:
    """Average the weights of the last N checkpoints of a run into one checkpoint."""
    from nmt.model.checkpoint import average_checkpoints, save_atomic

    paths: list[Path] = []
    for p in inputs:
        paths += sorted(p.glob("step_*.pt")) if p.is_dir() else [p]
    if last is not None:
        if len(paths) < last:
            _fail(CheckpointError(f"--last {last}: only {len(paths)} checkpoint(s) found in "
                                  f"{', '.join(map(str, inputs))} (a run keeps step_*.pt "
                                  "checkpoints when trained with train.keep_checkpoints=N)"))
        paths = paths[-last:]
    try:
        if not paths:
            raise CheckpointError(f"no step_*.pt checkpoints in {', '.join(map(str, inputs))} "
                                  "(train with train.keep_checkpoints=N)")
        save_atomic(average_checkpoints(paths), output)
    except USER_ERRORS as e:
        _fail(e)
    typer.echo(f"averaged {len(paths)} checkpoint{'s' if len(paths) != 1 else ''} "
               f"({', '.join(p.name for p in paths)}) into {output}")


@app.command()
def study(
    config: Path = typer.Argument(..., help="Study YAML file (see configs/study_deen.yaml)."),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides."),
    report_only: bool = typer.Option(False, "--report-only",
                                     help="Do not train; report on finished runs."),
) -> None:
    """Train models differing only in attention and compare them by source length."""
    from nmt.config.load import load_study_config
    from nmt.commands.study import run_study
    from nmt.commands.study_plan import StudyError

    try:
        cfg = load_study_config(config, overrides or [])
        path = run_study(cfg, report_only=report_only, log=lambda m: typer.echo(m, err=True))
    except (*USER_ERRORS, StudyError) as e:
        _fail(e)
    typer.echo(f"report: {path}")


@app.command()
def heads(
    checkpoint: Path = typer.Argument(..., help="Checkpoint to analyse (any attention but "
                                      "none; multihead shows every head)."),
    compare: Optional[list[Path]] = typer.Option(None, "--compare", help="Checkpoint whose "
                                                 "attention is shown beside the heads, e.g. "
                                                 "a single-head model (repeatable)."),
    split: Optional[str] = typer.Option(None, help="Test split of the checkpoint's corpus "
                                        "(default: its first data.test_splits)."),
    src: Optional[Path] = typer.Option(None, help="Source file instead of --split."),
    ref: Optional[Path] = typer.Option(None, help="Reference file (with --src; unused in "
                                       "the statistics, read to check the pairing)."),
    data_path: Optional[str] = typer.Option(None, help="Corpus directory replacing the "
                                            "checkpoint's data.path."),
    max_sentences: Optional[int] = typer.Option(None, min=1, help="Use the first N "
                                                "sentences only."),
    maps: int = typer.Option(3, min=0, help="Heatmaps of the N sentences (8-25 words) "
                             "whose heads agree least."),
    sentence: Optional[list[str]] = typer.Option(None, "--sentence", help="Draw the heads "
                                                 "for this source sentence instead "
                                                 "(repeatable)."),
    out: Path = typer.Option(Path("heads"), "--out", help="Directory for heads.md, "
                             "heads.json and heads_N.png."),
    join: Optional[int] = typer.Option(None, help="Join K consecutive test pairs into one "
                                       "(long input) before the analysis."),
    device: str = DEVICE_OPTION,
) -> None:
    """Per-head attention statistics and heatmaps on a test set.

    Entropy, distance from the diagonal, share on the final token and on punctuation, and
    agreement between heads; multi-head models show every head."""
    from nmt.commands.heads import HeadsError, heads_report

    try:
        path = heads_report(checkpoint, out, compare or [], split, src, ref, data_path,
                            max_sentences, maps, sentence or [], device, join=join)
    except (*USER_ERRORS, HeadsError) as e:
        _fail(e)
    typer.echo(f"report: {path}")


@app.command()
def bench(
    source: Path = typer.Argument(..., help="A YAML config (a fresh model; the vocabulary is "
                                  "built on its training data) or a checkpoint (.pt)."),
    overrides: Optional[list[str]] = typer.Argument(
        None, help="key=value overrides of a CONFIG, as for nmt train."),
    warmup: int = typer.Option(5, help="Untimed training steps first."),
    train_steps: int = typer.Option(40, help="Timed training steps."),
    train_seconds: float = typer.Option(30.0, help="Then a wall-clock window of training "
                                        "steps, in seconds (0: none)."),
    split: str = typer.Option("test_2016_flickr", help="Split to decode."),
    sentences: int = typer.Option(1000, help="Decode the first N sentences of --split."),
    batch_size: int = typer.Option(64, help="Sentences per decoding batch."),
    beam: int = typer.Option(5, help="Beam size measured beside greedy search."),
    skip_train: bool = typer.Option(False, "--skip-train", help="Measure decoding only."),
    skip_decode: bool = typer.Option(False, "--skip-decode", help="Measure training only."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: the "
                                          "config's train.threads, else torch's)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the numbers as "
                                            "JSON."),
    data_path: Optional[str] = typer.Option(None, help="Override data.path."),
    precision: Optional[str] = typer.Option(None, help="Training precision: auto, fp32, bf16 "
                                            "or fp16 (default: the run's train.precision)."),
    decode_precision: Optional[str] = typer.Option(
        None, help="Search precision of the decoding runs: auto, fp32, bf16 or fp16 "
        "(default: the checkpoint's search.precision)."),
    workers: Optional[int] = WORKERS_OPTION,
    device: str = DEVICE_OPTION,
) -> None:
    """Training and decoding speed, FLOPs, padding, peak memory and BLEU, in one table.

    Training tokens/s over fixed steps and a wall-clock window, the analytic FLOPs per
    target token against the machine's measured matmul peak, and greedy and beam
    sentences/s with the BLEU of that output."""
    from nmt.commands.bench import BenchOptions, run_bench
    from nmt.commands.bench_table import format_table

    options = BenchOptions(source, tuple(overrides or ()), threads, device, warmup, train_steps,
                           train_seconds, sentences, split, beam, batch_size, skip_train,
                           skip_decode, data_path, json_out, precision, workers,
                           decode_precision)
    try:
        result = run_bench(options, log=lambda m: typer.echo(m, err=True))
    except USER_ERRORS as e:
        _fail(e)
    typer.echo(format_table(result))
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        except OSError as e:
            _fail(OSError(f"--json {json_out}: {e.strerror or e}"))
        typer.echo(f"wrote {json_out}", err=True)


def main() -> None:
    """Entry point of the ``nmt`` console command."""
    app()


if __name__ == "__main__":
    main()
