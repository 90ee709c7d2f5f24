"""Command-line interface: the ``nmt`` command, typer wiring only.

Subcommands ``train``, ``evaluate``, ``translate``, ``average``, ``study``, ``export``,
``heads`` and ``bench``;
each parses its options and calls the module that does the work.
"""

from __future__ import annotations

import faulthandler
import json
import os
from pathlib import Path

import typer

from nmt.cli.common import (
    ALPHA_OPTION,
    BEAM_OPTION,
    DEVICE_OPTION,
    LENGTH_PENALTY_OPTION,
    PRECISION_OPTION,
    PROCESSES_OPTION,
    USER_ERRORS,
    WORKERS_OPTION,
    app,
    fail,
)
from nmt.cli.common import length_penalty as _length_penalty
from nmt.config.load import ignored_overrides, load_config
from nmt.ops.files import check_writable, write_atomic


@app.command()
def train(
    config: Path = typer.Argument(..., help="YAML config file."),
    overrides: list[str] | None = typer.Argument(
        None, help="key=value overrides with dotted keys, e.g. model.attention=dot"
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue {out_dir}/last.pt."),
) -> None:
    """Train a model; checkpoints, config and a JSONL validation log go to train.out_dir."""
    from nmt.commands.train import run_training, undertrained_warning
    from nmt.training.state import TrainingError

    try:
        cfg = load_config(config, overrides or [])
        for ignored in ignored_overrides(cfg, overrides):
            typer.echo(ignored, err=True)
        state = run_training(cfg, resume=resume, log=lambda m: typer.echo(m, err=True))
    except (*USER_ERRORS, TrainingError) as e:
        fail(e)
    except KeyboardInterrupt:  # before the training loop's own handler is installed
        typer.secho("interrupted before training started; nothing to resume", err=True)
        raise typer.Exit(130) from None
    if state.interrupted is not None:
        # conventional shell codes, so `nmt train ... && nmt evaluate ...` stops here
        raise typer.Exit(130 if state.interrupted == "SIGINT" else 143)
    if os.environ.get("RANK", "0") != "0":
        return
    typer.echo(
        f"best val BLEU {state.best_bleu_text()}; trained {state.step} steps "
        f"({state.epoch} full epoch{'' if state.epoch == 1 else 's'}) "
        f"in {state.elapsed_s / 60:.1f} min; "
        f"checkpoint {cfg.out_dir() / 'best.pt'}"
    )
    warning = undertrained_warning(cfg, state)
    if warning:
        typer.echo(warning, err=True)


@app.command()
def evaluate(
    checkpoints: list[Path] = typer.Argument(
        ...,
        help="One or more checkpoints: .pt files, exported model folders or shipped "
        "model names (deen-additive).",
    ),
    ensemble: bool = typer.Option(
        False,
        "--ensemble",
        help="Also decode the checkpoints "
        "together as one ensemble (the mean of their "
        "probabilities at each step), one more system.",
    ),
    split: str | None = typer.Option(None, help="Named split (default: first test split)."),
    src: Path | None = typer.Option(None, help="Source file (instead of --split)."),
    ref: Path | None = typer.Option(None, help="Reference file (with --src)."),
    buckets: str = typer.Option("1-10,11-20,21-30,31-", help="Source-length buckets in words."),
    json_out: Path | None = typer.Option(None, "--json", help="Write scores as JSON."),
    batch_size: int = typer.Option(64, min=1, help="Sentences per decoding batch."),
    examples: int = typer.Option(0, min=0, help="Print this many example translations."),
    data_path: str | None = typer.Option(None, help="Override data.path of the checkpoint."),
    beam: int | None = BEAM_OPTION,
    alpha: float | None = ALPHA_OPTION,
    length_penalty: str | None = LENGTH_PENALTY_OPTION,
    workers: int | None = WORKERS_OPTION,
    processes: bool = PROCESSES_OPTION,
    device: str = DEVICE_OPTION,
    precision: str | None = PRECISION_OPTION,
) -> None:
    """Decode a test set and report sacreBLEU, chrF, BLEU by source length and the
    papers' BLEU (lowercased, Moses-tokenized)."""
    from nmt.commands.evaluate import evaluate_checkpoints

    try:
        if json_out is not None:  # before decoding: a path that cannot be written loses it
            check_writable(json_out, "--json")
        report = evaluate_checkpoints(
            checkpoints,
            split=split,
            src=src,
            ref=ref,
            buckets=buckets,
            batch_size=batch_size,
            n_examples=examples,
            data_path=data_path,
            beam_size=beam,
            alpha=alpha,
            length_penalty=_length_penalty(length_penalty),
            device=device,
            workers=workers,
            processes=processes,
            precision=precision,
            ensemble=ensemble,
        )
    except USER_ERRORS as e:
        fail(e)
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun every rank decodes the same; rank 0 alone reports
    for warning in report.warnings:
        typer.echo(warning, err=True)
    typer.echo(report.table)
    if json_out is not None:
        try:
            write_atomic(json_out, json.dumps(report.json, indent=2) + "\n")
        except OSError as e:
            fail(OSError(f"--json {json_out}: {e.strerror or e}"))
        typer.echo(f"wrote {json_out}")


@app.command()
def translate(
    checkpoints: list[Path] = typer.Argument(
        ...,
        help="A checkpoint (.pt), an exported model folder or a shipped model's name "
        "(deen-additive); several: decode them as one ensemble (the mean of their "
        "probabilities at each step).",
    ),
    input: Path | None = typer.Option(None, "--input", "-i", help="Input file (default stdin)."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Output file (default stdout)."
    ),
    attention: bool = typer.Option(
        False, "--attention", help="Show the most-attended source piece per target piece."
    ),
    batch_size: int = typer.Option(64, min=1, help="Sentences per batch in filter mode."),
    nbest: int = typer.Option(
        1,
        min=1,
        help="Print the N best hypotheses per line as "
        "'index ||| text ||| score' (needs --beam >= N).",
    ),
    plot: Path | None = typer.Option(
        None,
        help="Draw the attention heatmap to this image, "
        "in the format of its suffix (.png, .pdf, .svg; "
        "several lines: FILE_1.png, FILE_2.png, ...).",
    ),
    beam: int | None = BEAM_OPTION,
    alpha: float | None = ALPHA_OPTION,
    length_penalty: str | None = LENGTH_PENALTY_OPTION,
    workers: int | None = WORKERS_OPTION,
    processes: bool = PROCESSES_OPTION,
    device: str = DEVICE_OPTION,
    precision: str | None = PRECISION_OPTION,
) -> None:
    """Translate interactively (terminal) or as a filter (one line out per line in)."""
    from nmt.commands.translate import translate as run_translate

    try:
        code = run_translate(
            checkpoints,
            # `-` is standard input / output, as for other filters
            input_path=None if input is not None and str(input) == "-" else input,
            output_path=None if output is not None and str(output) == "-" else output,
            show_attention=attention,
            plot=plot,
            device=device,
            beam_size=beam,
            alpha=alpha,
            length_penalty=_length_penalty(length_penalty),
            n_best=nbest,
            precision=precision,
            batch_size=batch_size,
            workers=workers,
            processes=processes,
        )
    except USER_ERRORS as e:
        fail(e)
    if code:
        raise typer.Exit(code)


@app.command()
def average(
    inputs: list[Path] = typer.Argument(
        ...,
        help="Checkpoints, or a run directory whose "
        "step_*.pt files (train.keep_checkpoints) are used.",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Averaged checkpoint to write."),
    last: int | None = typer.Option(None, min=1, help="Use only the last N checkpoints."),
) -> None:
    """Average the weights of the last N checkpoints of a run into one checkpoint."""
    from nmt.commands.average import average as run_average

    try:
        paths = run_average(inputs, output, last)
    except USER_ERRORS as e:
        fail(e)
    typer.echo(
        f"averaged {len(paths)} checkpoint{'s' if len(paths) != 1 else ''} "
        f"({', '.join(p.name for p in paths)}) into {output}"
    )


@app.command()
def study(
    config: Path = typer.Argument(
        ..., help="Study YAML file (e.g. configs/study_deen_converged.yaml; keys: docs/study.md)."
    ),
    overrides: list[str] | None = typer.Argument(
        None,
        help="key=value overrides of the "
        "study's own keys (e.g. report_dir=DIR); "
        "training keys go in its overrides list.",
    ),
    report_only: bool = typer.Option(
        False,
        "--report-only",
        help="Do not train; report on finished, archived or shipped runs "
        "(into report_dir, which it writes over).",
    ),
    allow_missing: bool = typer.Option(
        False,
        "--allow-missing",
        help="With --report-only: report the models that are ready and list the "
        "missing ones at the top of the report instead of failing (a partial study).",
    ),
) -> None:
    """Train models differing only in attention and compare them by source length. Without
    --report-only it trains every run that is missing (hours on a CPU), resuming
    interrupted ones."""
    from nmt.commands.study import run_study
    from nmt.config.load import ConfigError, load_study_config
    from nmt.study.plan import StudyError

    try:
        cfg = load_study_config(config, overrides or [])
        try:
            path = run_study(
                cfg,
                report_only=report_only,
                log=lambda m: typer.echo(m, err=True),
                allow_missing=allow_missing,
            )
        except ConfigError as e:  # the base config with the study's overrides: name the study
            raise ConfigError(f"{config}: {e}") from None
    except (*USER_ERRORS, StudyError) as e:
        fail(e)
    typer.echo(f"report: {path}")


@app.command()
def export(
    source: Path = typer.Argument(..., help="Run directory (its best.pt) or checkpoint file."),
    out_dir: Path = typer.Argument(..., help="The model folder to write (new or empty)."),
    dtype: str | None = typer.Option(
        None,
        help="fp32 | bf16 | fp16: store the weights in this "
        "precision (default: the smallest whose test BLEU stays "
        "within 0.1 of the checkpoint's).",
    ),
    data_path: str | None = typer.Option(None, help="Override data.path of the checkpoint."),
    batch_size: int = typer.Option(64, min=1, help="Sentences per decoding batch."),
    beam: int | None = BEAM_OPTION,
    alpha: float | None = ALPHA_OPTION,
) -> None:
    """Write a model folder (Hugging Face Hub layout): safetensors weights, config,
    SentencePiece models, manifest with SHA-256s, a model card and the translations behind
    its numbers (test sets, joined test sets, validation; decoded here)."""
    from nmt.commands.export import export_model

    try:
        done = export_model(
            source,
            out_dir,
            dtype=dtype,
            beam_size=beam,
            alpha=alpha,
            data_path=data_path,
            batch_size=batch_size,
            log=lambda m: typer.echo(m, err=True),
        )
    except USER_ERRORS as e:
        fail(e)
    tried = ", ".join(f"{k} {v:.2f}" for k, v in done.dtype_bleu.items())
    typer.echo(
        f"wrote {done.folder} ({done.size_bytes / 1e6:.1f} MB): weights in {done.dtype} "
        f"(test BLEU {tried})"
    )


import nmt.cli.analysis  # noqa: E402,F401  (registers heads, bench and select on the app)


def main() -> None:
    """Entry point of the ``nmt`` console command.

    A bad option or argument (a value out of range, an unknown option or command, a missing
    argument) is one line, ``error: nmt COMMAND: what (see nmt COMMAND --help)``, exit 2, as
    the commands' own errors are; Click's framed usage box said the same in five. ``nmt``
    alone still prints its help.
    """
    if "LOCAL_RANK" in os.environ:
        # under torchrun a rank killed by a signal (gloo's aborts among them) otherwise dies
        # without a word: print every thread's Python stack to its stderr
        faulthandler.enable()
    try:
        # not standalone: Click raises its errors here instead of printing and exiting
        code = app(standalone_mode=False)
    except Exception as e:
        _exit_for_click_error(e)
        raise
    if isinstance(code, int) and code:  # typer.Exit(code), e.g. 130 after a Ctrl-C
        raise SystemExit(code)


def _exit_for_click_error(e: Exception) -> None:
    """Exit as the ``nmt`` command should for one of Click's exceptions (typer's copy of
    Click from typer 0.28 on, Click itself before: told apart by what they have, not by
    class); return for any other exception. Raises SystemExit."""
    name = type(e).__name__
    if name == "Abort":  # a Ctrl-C that no command caught (the commands catch theirs)
        typer.echo("Aborted!", err=True)
        raise SystemExit(1) from None
    if not all(hasattr(e, a) for a in ("show", "format_message", "exit_code")):
        return
    ctx = getattr(e, "ctx", None)
    if name == "NoArgsIsHelpError" or ctx is None or e.exit_code != 2:  # type: ignore[attr-defined]
        e.show()  # type: ignore[attr-defined]
        raise SystemExit(e.exit_code) from None  # type: ignore[attr-defined]
    message = " ".join(e.format_message().split())  # type: ignore[attr-defined]
    typer.echo(f"error: {ctx.command_path}: {message} (see {ctx.command_path} --help)", err=True)
    raise SystemExit(2) from None
