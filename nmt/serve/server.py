"""Start ``nmt serve``: load the models given on the command line, the studies and the
test sets, build the application (:func:`build`) and run it under uvicorn
(:func:`serve`), bound to 127.0.0.1 unless ``host`` says otherwise.

What can be checked cheaply is checked before the models are loaded (minutes for large
ones): the ``--model`` specs, the ``--study`` reports, and the socket, which
:func:`listen_socket` binds first and uvicorn is then handed.
"""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.config.schema import ComputePrecision
from nmt.ops.device import pick_device
from nmt.ops.precision import SEARCH_PRECISIONS
from nmt.serve.batcher import Batching
from nmt.serve.limits import DEFAULT_QUEUE
from nmt.serve.registry import Registry, check_specs, load_registry
from nmt.serve.studies import Studies, Study, check_unique, definitions, load_study
from nmt.serve.testsets import (
    DEFAULT_BUCKETS,
    DEFAULT_JOIN_KS,
    SetDefinition,
    TestSets,
    served_corpus,
)

# Not SearchConfig's "auto": the server searches in fp32 unless told otherwise, where a
# request batched with others answers what it answers alone (a value of the schema's
# ComputePrecision literal, checked by mypy).
SERVE_PRECISION: ComputePrecision = "fp32"


@dataclass
class ServeOptions:
    """What ``nmt serve`` was asked for.

    Attributes:
        models: ``ID=CHECKPOINT`` (or ``CHECKPOINT``) specs, the allowlist.
        studies: study report folders (``reports/NAME``).
        host, port: where to listen. threads: torch CPU threads (default: torch's count),
            shared out among the models' searches (:class:`nmt.serve.registry.Registry`).
            queue: requests waiting or running per model before 429.
        device: auto | cpu | cuda[:N]. data_path: the corpus of the example test sets
            (default: the first model's ``data.path``).
        batching: ``--max-batch``, ``--batch-wait-ms``, ``--timeout``, ``--return-wait-ms``.
        precision: the search precision of every model (``fp32``, where batched and solo
            answers agree; ``checkpoint`` keeps each checkpoint's ``search.precision``).
        workers: server processes on the one socket, each with its own models.
        alignments: the folder of reference word alignments (scripts/align_multi30k.py)
            the page outlines on the heatmap of a test-set line; None: none.
    """

    models: list[str]
    studies: list[Path] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8000
    threads: int | None = None
    queue: int = DEFAULT_QUEUE
    device: str = "auto"
    data_path: str | None = None
    batching: Batching = field(default_factory=Batching)
    precision: str = SERVE_PRECISION
    workers: int = 1
    alignments: Path | None = Path("data/alignments")


def check_options(opts: ServeOptions) -> list[Study]:
    """What can be checked before any model is loaded; returns the loaded studies.

    Raises:
        ValueError, nmt.model.checkpoint.CheckpointError, nmt.serve.studies.StudyError:
            a bad ``--threads``, ``--device`` or ``--model`` spec, a checkpoint path that is
            no file, a ``--study`` that is missing, not a study or given twice (named).
    """
    if opts.threads is not None and opts.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {opts.threads}")
    if opts.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {opts.workers}")
    if opts.precision not in SEARCH_PRECISIONS + ("checkpoint",):
        raise ValueError(
            f"--precision {opts.precision!r}: give one of {', '.join(SEARCH_PRECISIONS)} "
            "or checkpoint"
        )
    b = opts.batching
    if b.max_batch < 1 or b.wait_ms < 0 or not b.timeout_s > 0 or b.return_wait_ms < 0:
        raise ValueError(
            f"--max-batch must be >= 1 (got {b.max_batch}), --batch-wait-ms "
            f">= 0 (got {b.wait_ms:g}), --timeout > 0 (got {b.timeout_s:g}), "
            f"--return-wait-ms >= 0 (got {b.return_wait_ms:g})"
        )
    pick_device(opts.device, "--device")
    check_specs(opts.models)
    return check_unique([load_study(p) for p in opts.studies])


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port``, for uvicorn to listen on.

    Raises:
        ValueError: one line naming ``--host`` or ``--port``: a name that does not
            resolve, an address not of this machine, a port in use or not allowed.
    """
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as e:
        raise ValueError(
            f"--host {host!r}: not an address, or a name that does not resolve "
            f"({getattr(e, 'strerror', None) or e})"
        ) from None
    sock = socket.socket(family, kind, proto)
    # as uvicorn does: a restarted server may bind while old connections are in TIME_WAIT
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            why = f"--port {port}: {host}:{port} is in use (another server?); pick another --port"
        elif e.errno == errno.EADDRNOTAVAIL:
            why = (
                f"--host {host!r}: not an address of this machine (try 127.0.0.1, or "
                "0.0.0.0 for every interface)"
            )
        elif e.errno == errno.EACCES:
            why = f"--port {port}: not allowed here (ports below 1024 need privileges)"
        else:
            why = f"--host {host!r} --port {port}: cannot listen: {e.strerror or e}"
        raise ValueError(why) from None
    return sock


def build(
    opts: ServeOptions, log: Callable[[str], None] = print, studies: list[Study] | None = None
) -> Any:
    """The FastAPI application for ``opts`` (models loaded now).

    Args:
        studies: the ``--study`` reports when :func:`check_options` read them already.

    Raises:
        ValueError, nmt.model.checkpoint.CheckpointError, nmt.serve.studies.StudyError:
            a bad option, checkpoint or study report (named).
    """
    from nmt.data.stored import alignment_dir
    from nmt.serve.app import create_app
    from nmt.serve.reference import ReferenceAlignments, add_route

    if studies is None:
        studies = check_options(opts)
    device = pick_device(opts.device, "--device")
    threads = opts.threads or torch.get_num_threads()
    precision = None if opts.precision == "checkpoint" else opts.precision
    registry: Registry = load_registry(opts.models, device, threads, opts.queue, precision)
    for e in registry.models.values():
        log(
            f"model {e.id}: {e.path} ({e.info['attention']}, {e.info['direction']}, "
            f"{e.info['parameters']:,} parameters, {e.decoding.describe()})"
        )
    log(_thread_plan(registry, opts.workers, os.cpu_count() or 1))
    served = sorted({e.info["direction"] for e in registry.models.values()})
    for s in studies:
        if s.direction is not None and s.direction not in served:
            log(
                f"warning: study {s.name!r} is {s.direction}, no served model is "
                f"({', '.join(served)}): its buckets are not these models' language pair"
            )
    defs: list[SetDefinition] = [d for s in studies for d in definitions(s)]
    first = next(iter(registry.models.values())).loaded.cfg.data
    defs += [SetDefinition(s, s) for s in first.test_splits]
    if first.test_splits:
        defs.append(
            SetDefinition(f"{first.test_splits[0]}_joined", first.test_splits[0], DEFAULT_JOIN_KS)
        )
    data, note = served_corpus(first, opts.data_path)
    if note:
        log(f"warning: no example sentences on the page (typed sentences still translate): {note}")
    buckets = (studies[0].config.get("buckets") if studies else None) or DEFAULT_BUCKETS
    testsets = TestSets(data, defs, buckets, note)
    app = create_app(registry, Studies(studies, testsets), testsets, opts.batching)
    folder = alignment_dir(opts.alignments)
    if folder is not None and not folder.is_dir():
        log(f"no reference alignments in {folder} (scripts/align_multi30k.py writes them)")
    refs = ReferenceAlignments(testsets, folder, first.src_lang, first.tgt_lang)
    if folder is not None and folder.is_dir():
        for why in refs.problems():
            log(f"warning: no reference alignment on the page for a test split: {why}")
    add_route(app, registry, refs)
    return app


def _thread_plan(registry: Registry, workers: int, cores: int) -> str:
    """The start-up line that says how the threads are used, and a warning where they
    are wasted or more than the cores."""
    r = registry
    plan = (
        f"searches: {r.searches} at once (one per model), {r.search_threads} thread(s) each"
        if r.searches > 1
        else f"searches: one at a time on {r.search_threads} thread(s)"
    )
    notes = []
    if r.searches * r.search_threads < r.threads:
        notes.append(
            f"{r.threads - r.searches * r.search_threads} of --threads {r.threads} left out "
            f"of the searches (a multiple of {r.searches} uses them all)"
        )
    used = r.searches * r.search_threads  # the threads searching at once
    if workers * used > cores:
        notes.append(
            f"--workers {workers} x {used} searching thread(s) = {workers * used} threads on "
            f"{cores} cores: searches will wait for each other (docs/serve.md)"
        )
    return plan + "".join(f"\nwarning: {n}" for n in notes)


def serve(opts: ServeOptions, log: Callable[[str], None] = print) -> None:
    """Build the application and serve it until interrupted, in ``opts.workers``
    processes sharing the one listening socket (each loads its own models).

    The options, the studies and the socket are checked before the models are loaded,
    and "serving on" is said only once the socket is bound and the models are in.

    Raises:
        as :func:`build`; ValueError when ``host``:``port`` cannot be bound.
    """
    studies = check_options(opts)
    sock = listen_socket(opts.host, opts.port)
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    where = f"http://{host}:{opts.port}/ (API at /api, OpenAPI at /docs, metrics at /metrics)"
    try:
        if opts.workers == 1:
            app = build(opts, log, studies)
            log(f"serving on {where}")
            _run(app, sock)
        else:
            run_workers(opts, sock, lambda: build(opts, log, studies), log, where)
    finally:
        sock.close()


def _run(app: Any, sock: socket.socket) -> None:
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    """The parent's SIGTERM handler: leave through ``finally``, which stops the workers
    (Python's default action would end the parent at once and leave them serving)."""
    raise SystemExit(128 + signum)


def run_workers(
    opts: ServeOptions,
    sock: socket.socket,
    make_app: Callable[[], Any],
    log: Callable[[str], None],
    where: str,
) -> None:
    """Fork ``opts.workers`` processes that each build the app and serve ``sock`` (the
    kernel hands each connection to one of them); wait for all, and stop all when one
    fails, on Ctrl-C or when the parent gets SIGTERM (each worker is sent SIGTERM, which
    uvicorn answers by finishing its open requests, and is killed after 10 s).

    Raises:
        ValueError: a worker could not start (its error was logged).
        SystemExit: 143 after a SIGTERM, once the workers are stopped.
    """
    ctx = mp.get_context("fork")  # the bound socket is inherited; nothing was computed yet
    ready = ctx.Queue()

    def child(k: int) -> None:
        # the parent's handler is inherited by fork: a worker stopped while it loads its
        # models just ends (uvicorn installs its own handler once it serves)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            app = make_app()
        except Exception as e:  # any failure: the parent says which worker failed
            ready.put((k, f"{type(e).__name__}: {e}"))
            return
        ready.put((k, None))
        _run(app, sock)

    procs = [ctx.Process(target=child, args=(k,), daemon=False) for k in range(opts.workers)]
    # before the first fork, so that no SIGTERM finds the parent without it (Python takes
    # signals in the main thread only; called from another, SIGTERM is left as it is)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm) if main else None
    try:
        for p in procs:
            p.start()
        for _ in procs:
            k, err = ready.get()
            if err is not None:
                raise ValueError(f"worker {k} could not start: {err}")
        log(f"serving on {where} with {opts.workers} workers")
        for p in procs:
            p.join()
    finally:
        if main:  # a second SIGTERM while the workers stop must not cut this short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            _stop_workers(procs)
        finally:
            if main:
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _stop_workers(procs: list[Any], grace_s: float = 10.0) -> None:
    """SIGTERM every live worker at once, wait up to ``grace_s`` seconds for them all,
    then SIGKILL and reap what is left."""
    started = [p for p in procs if p.pid is not None]
    for p in started:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in started:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in started:
        if p.is_alive():
            p.kill()
            p.join()
