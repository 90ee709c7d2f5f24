"""``nmt heads``, ``nmt bench``, ``nmt select`` and ``nmt serve``: the analysis commands,
typer wiring only (registered on the app of nmt/cli/common.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from nmt.cli.common import DEVICE_OPTION, PROCESSES_OPTION, USER_ERRORS, WORKERS_OPTION, app, fail
from nmt.ops.files import check_writable, write_atomic


@app.command()
def heads(
    checkpoint: Path = typer.Argument(
        ..., help="Checkpoint to analyse (any attention but none; multihead shows every head)."
    ),
    compare: list[Path] | None = typer.Option(
        None,
        "--compare",
        help="Checkpoint whose "
        "attention is shown beside the heads, e.g. "
        "a single-head model (repeatable).",
    ),
    split: str | None = typer.Option(
        None, help="Test split of the checkpoint's corpus (default: its first data.test_splits)."
    ),
    src: Path | None = typer.Option(None, help="Source file instead of --split."),
    ref: Path | None = typer.Option(
        None,
        help="Reference file (with --src; unused in the statistics, read to check the pairing).",
    ),
    data_path: str | None = typer.Option(
        None, help="Corpus directory replacing the checkpoint's data.path."
    ),
    max_sentences: int | None = typer.Option(None, min=1, help="Use the first N sentences only."),
    maps: int = typer.Option(
        3, min=0, help="Heatmaps of the N sentences (8-25 words) whose heads agree least."
    ),
    sentence: list[str] | None = typer.Option(
        None,
        "--sentence",
        help="Draw the heads for this source sentence instead of the chosen test sentences "
        "(repeatable); the statistics still cover the test set (--max-sentences N for fewer).",
    ),
    out: Path = typer.Option(
        Path("heads"), "--out", help="Directory for heads.md, heads.json and heads_N.png."
    ),
    join: int | None = typer.Option(
        None,
        min=1,
        help="Join K consecutive test pairs into one (long input) before the analysis.",
    ),
    alignments: Path | None = typer.Option(
        None,
        "--alignments",
        help="Directory of reference word alignments (scripts/align_multi30k.py); with "
        "--split, each head's precision, recall and AER when the split's file is there "
        "(printed, and in heads.md). Default: data/alignments, from the current directory, "
        "else from the project root; left out with a note when missing. A directory given "
        "must exist.",
        show_default=False,
    ),
    device: str = DEVICE_OPTION,
) -> None:
    """Per-head attention statistics and heatmaps on a test set: entropy, distance from
    the diagonal, share on the final token and on punctuation, agreement between heads,
    and with reference word alignments each head's precision, recall and AER (printed,
    and written to heads.md with the rest); multi-head models show every head."""
    from nmt.analysis.heads import HeadsError
    from nmt.commands.heads import heads_report
    from nmt.evaluation.alignment import AlignmentError

    try:
        path = heads_report(
            checkpoint,
            out,
            compare=compare or [],
            split=split,
            src=src,
            ref=ref,
            data_path=data_path,
            max_sentences=max_sentences,
            maps=maps,
            sentences=sentence or [],
            device=device,
            join=join,
            alignments=alignments,
            log=lambda message: typer.echo(message, err=True),
            show=typer.echo,
        )
    except (*USER_ERRORS, HeadsError, AlignmentError) as e:
        fail(e)
    typer.echo(f"report: {path}")


@app.command()
def bench(
    source: Path = typer.Argument(
        ...,
        help="A YAML config (a fresh model; the vocabulary is "
        "built on its training data), a checkpoint (.pt), a model folder or a shipped "
        "model's name (models/NAME).",
    ),
    overrides: list[str] | None = typer.Argument(
        None, help="key=value overrides of a CONFIG, as for nmt train."
    ),
    warmup: int = typer.Option(5, help="Untimed training steps first."),
    train_steps: int = typer.Option(40, help="Timed training steps."),
    train_seconds: float = typer.Option(
        30.0, help="Then a wall-clock window of training steps, in seconds (0: none)."
    ),
    split: str = typer.Option("test_2016_flickr", help="Split to decode."),
    sentences: int = typer.Option(1000, help="Decode the first N sentences of --split."),
    batch_size: int = typer.Option(64, help="Sentences per decoding batch."),
    beam: int = typer.Option(5, help="Beam size measured beside greedy search."),
    search_passes: int = typer.Option(
        3, help="Timed passes of each search over the sentences; the median is reported."
    ),
    skip_train: bool = typer.Option(False, "--skip-train", help="Measure decoding only."),
    skip_decode: bool = typer.Option(False, "--skip-decode", help="Measure training only."),
    threads: int | None = typer.Option(
        None, help="torch CPU threads (default: the config's train.threads, else torch's)."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the numbers as JSON."),
    data_path: str | None = typer.Option(None, help="Override data.path."),
    precision: str | None = typer.Option(
        None,
        help="Training precision: auto, fp32, bf16 or fp16 (default: the run's train.precision).",
    ),
    decode_precision: str | None = typer.Option(
        None,
        help="Search precision of the decoding runs: auto, fp32, bf16, fp16 or int8 "
        "(default: the checkpoint's search.precision).",
    ),
    workers: int | None = WORKERS_OPTION,
    processes: bool = PROCESSES_OPTION,
    device: str = DEVICE_OPTION,
) -> None:
    """Training and decoding speed, FLOPs, padding, peak memory and BLEU, in one table:
    training tokens/s over fixed steps and a wall-clock window, the analytic FLOPs per
    target token against the machine's measured matmul peak, and greedy and beam
    sentences/s with the BLEU of that output."""
    from nmt.analysis.bench_options import BenchOptions
    from nmt.analysis.bench_table import format_table
    from nmt.commands.bench import run_bench

    options = BenchOptions(
        source,
        overrides=tuple(overrides or ()),
        threads=threads,
        device=device,
        warmup=warmup,
        train_steps=train_steps,
        train_seconds=train_seconds,
        sentences=sentences,
        split=split,
        beam=beam,
        search_passes=search_passes,
        batch_size=batch_size,
        skip_train=skip_train,
        skip_decode=skip_decode,
        data_path=data_path,
        json_path=json_out,
        precision=precision,
        workers=workers,
        processes=processes,
        decode_precision=decode_precision,
    )
    try:
        result = run_bench(options, log=lambda m: typer.echo(m, err=True))
    except USER_ERRORS as e:
        fail(e)
    typer.echo(format_table(result))
    if json_out is not None:
        try:
            write_atomic(json_out, json.dumps(result, indent=1) + "\n")
        except OSError as e:
            fail(OSError(f"--json {json_out}: {e.strerror or e}"))
        typer.echo(f"wrote {json_out}", err=True)


def _echo_tests(summary: dict[str, Any], prefix: str = "") -> None:
    """The test lines of one ``nmt select`` choice: cased sacreBLEU, then the papers' BLEU."""
    from nmt.evaluation.metrics import PAPERS_LABEL

    for split, t in summary["test"].items():
        typer.echo(
            f"{prefix}{split}: BLEU greedy {t['greedy_bleu']:.2f}, beam "
            f"{summary['beam']} alpha {summary['alpha']:g} {t['beam_bleu']:.2f} "
            f"(chrF {t['beam_chrf']:.2f}); {t['signature']}"
        )
        typer.echo(
            f"{prefix}{split}: {PAPERS_LABEL} greedy {t['greedy_bleu_papers']:.2f}, "
            f"beam {t['beam_bleu_papers']:.2f} (lowercased, Moses-tokenized, as "
            f"published; not comparable with the line above); {t['papers_signature']}"
        )


@app.command()
def select(
    runs: list[Path] = typer.Argument(
        ...,
        help="A finished run directory (best.pt, and "
        "step_*.pt when trained with train.keep_checkpoints=N); "
        "several: each is chosen, then their ensemble.",
        metavar="RUN...",
    ),
    beam: int = typer.Option(5, min=2, help="Beam size (greedy is always decoded too)."),
    alphas: str = typer.Option(
        "0.6,1.0,1.4", help="GNMT alphas to try on the validation split, comma-separated."
    ),
    average: int = typer.Option(
        5,
        min=0,
        help="Average the last N kept checkpoints into "
        "RUN/averaged.pt and compare it with best.pt (0: off).",
    ),
    valid_split: str = typer.Option("val", help="Split to choose checkpoint and alpha on."),
    test_splits: str = typer.Option(
        "test_2016_flickr,test_2017_flickr",
        help="Splits to score with the choice, comma-separated.",
    ),
    data_path: str | None = typer.Option(None, help="Override the checkpoint's data.path."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the summary as JSON."),
    device: str = DEVICE_OPTION,
) -> None:
    """Choose checkpoint and length penalty on val, then score the test splits. With
    several runs, choose each, then the ensemble's length penalty, and score it too."""
    from nmt.analysis.selection import SelectOptions, parse_alphas
    from nmt.commands.select import select_runs

    try:
        opts = SelectOptions(
            beam=beam,
            alphas=parse_alphas(alphas),
            average=average,
            valid_split=valid_split,
            test_splits=tuple(s for s in test_splits.split(",") if s),
            data_path=data_path,
            device=device,
        )
        if json_out is not None:
            check_writable(json_out, "--json")
        summary = select_runs(runs, opts, log=lambda m: typer.echo(m, err=True))
    except USER_ERRORS as e:
        fail(e)
    if len(runs) == 1:
        _echo_tests(summary)
    else:
        for run, member in zip(runs, summary["members"], strict=True):
            typer.echo(f"member {run}: {member['chosen_checkpoint']}")
            _echo_tests(member, prefix="  ")
        typer.echo(f"ensemble of {len(runs)}:")
        _echo_tests(summary["ensemble"], prefix="  ")
    if json_out is not None:
        try:
            write_atomic(json_out, json.dumps(summary, indent=1) + "\n")
        except OSError as e:
            fail(OSError(f"--json {json_out}: {e.strerror or e}"))
        typer.echo(f"wrote {json_out}", err=True)


@app.command()
def serve(
    model: list[str] | None = typer.Option(
        None,
        "--model",
        help="ID=CHECKPOINT to serve, "
        "e.g. additive=runs/a/best.pt (repeatable; the "
        "only models the server loads; a model folder, "
        "name or hf://ORG/NAME too). Default: the models "
        "shipped in models/.",
    ),
    study: list[Path] | None = typer.Option(
        None, "--study", help="A study report folder (reports/NAME) for the study tab (repeatable)."
    ),
    host: str = typer.Option(
        "127.0.0.1",
        help="Address to listen on (other machines reach "
        "the server only when this says so, e.g. 0.0.0.0).",
    ),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    threads: int | None = typer.Option(
        None,
        min=1,
        help="torch CPU threads (default: torch's count), fixed, so concurrent requests "
        "get the same results; with several models they search at once, one search per "
        "model on an equal share of the threads.",
    ),
    queue: int = typer.Option(
        16, min=1, help="Requests waiting or running per model; one more is answered 429."
    ),
    data_path: str | None = typer.Option(
        None, help="Corpus of the example test sets (default: the first model's data.path)."
    ),
    device: str = DEVICE_OPTION,
    max_batch: int = typer.Option(
        32,
        min=1,
        help="Source lines of concurrent requests "
        "searched together at most (1: each request alone).",
    ),
    batch_wait_ms: float = typer.Option(
        5.0, min=0, help="How long a request waits for others to batch with (milliseconds)."
    ),
    return_wait_ms: float = typer.Option(
        10.0,
        min=0,
        help="How long a search waits at most for the clients the previous search answered "
        "to send their next request, so that they share one batch (milliseconds; 0: never).",
    ),
    timeout: float = typer.Option(
        60.0,
        min=0.001,
        help="Seconds a request may take, queue time counted; later it is answered 503.",
    ),
    workers: int = typer.Option(
        1,
        min=1,
        help="Server processes, each with its own models "
        "and --threads (see docs/serve.md for choosing both).",
    ),
    precision: str = typer.Option(
        "fp32",
        help="Search precision of every model: fp32 "
        "(batched answers equal solo ones), bf16, int8 (CPU), auto (on a CPU the fastest, "
        "measured once and cached), or checkpoint (each checkpoint's search.precision).",
    ),
    alignments: Path = typer.Option(
        Path("data/alignments"),
        "--alignments",
        help="Directory of reference word alignments (scripts/align_multi30k.py): the page "
        "outlines them on the attention of a test-set line the aligner covered.",
    ),
) -> None:
    r"""Serve the models: a JSON API (OpenAPI at /docs) and a page that puts attention next
    to the fixed vector. Needs the serve extra: pip install -e '.\[serve]'."""
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401

        from nmt.serve.server import ServeOptions
        from nmt.serve.server import serve as run_server
        from nmt.serve.studies import StudyError
    except ImportError as e:  # fastapi, prometheus-client or uvicorn missing
        fail(ImportError(f"nmt serve needs the serve extra (pip install -e '.[serve]'): {e}"))
        return
    from nmt.serve.batcher import Batching
    from nmt.serve.registry import default_specs

    opts = ServeOptions(
        models=model or default_specs(),
        studies=study or [],
        host=host,
        port=port,
        threads=threads,
        queue=queue,
        device=device,
        data_path=data_path,
        batching=Batching(max_batch, batch_wait_ms, timeout, return_wait_ms),
        workers=workers,
        precision=precision,
        alignments=alignments,
    )
    try:
        run_server(opts, log=lambda m: typer.echo(m, err=True))
    except (*USER_ERRORS, StudyError) as e:
        fail(e)
