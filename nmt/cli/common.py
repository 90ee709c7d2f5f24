"""What every ``nmt`` subcommand shares: the typer app, the search options, and the one
way a user error ends a command (a red ``error:`` line on stderr, exit status 2)."""

from __future__ import annotations

import math
from typing import get_args

import typer

from nmt.config.schema import ConfigError, LengthPenalty
from nmt.data.corpus import DataError
from nmt.model.checkpoint import CheckpointError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="RNN encoder-decoder translation with selectable attention.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        import torch

        typer.echo(f"nmt {version('nmt')} (torch {torch.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print nmt's and torch's versions and exit.",
    ),
) -> None:
    """RNN encoder-decoder translation with selectable attention."""


# search options shared by evaluate and translate; defaults come from the checkpoint
BEAM_OPTION = typer.Option(
    None, min=1, help="Beam size (1 = greedy); default: the checkpoint's search.beam_size."
)


def _finite_alpha(value: float | None) -> float | None:
    """``--alpha``: click's ``min=0`` lets nan and inf through, which would score every
    hypothesis nan (or divide by an infinite penalty) without a word."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number >= 0")
    return value


ALPHA_OPTION = typer.Option(
    None, min=0.0, callback=_finite_alpha, help="GNMT length penalty alpha."
)
LENGTH_PENALTY_OPTION = typer.Option(None, help="gnmt | average | none.")
WORKERS_OPTION = typer.Option(
    None,
    min=1,
    help="Batches decoded at once on the CPU, the "
    "threads shared among them (default: one per torch thread).",
)
PROCESSES_OPTION = typer.Option(
    False,
    "--processes",
    help="On the CPU, search the batches in --workers processes of one thread each "
    "instead of threads of this one (faster where search steps are short, e.g. int8; Linux).",
)
DEVICE_OPTION = typer.Option("auto", help="auto (CUDA when present) | cpu | cuda | cuda:N.")
PRECISION_OPTION = typer.Option(
    None,
    help="Search precision: fp32, bf16, fp16 (CUDA), int8 (CPU) or "
    "auto (on a CPU the fastest of fp32, bf16 and int8, measured once and cached; "
    "bf16 on a CUDA device that has it); the matrix products "
    "only, scores stay fp32. Default: the checkpoint's "
    "search.precision.",
)

USER_ERRORS = (ConfigError, DataError, CheckpointError, ValueError, OSError)


def fail(e: Exception) -> None:
    """Print ``error: e`` in red on stderr and exit with status 2."""
    typer.secho(f"error: {e}", err=True, fg=typer.colors.RED)
    raise typer.Exit(2)


def length_penalty(value: str | None) -> str | None:
    """``--length-penalty`` checked against the config's names (exits on a bad one)."""
    names = get_args(LengthPenalty)
    if value is not None and value not in names:
        fail(ValueError(f"--length-penalty: {value!r} is not one of {', '.join(names)}"))
    return value
