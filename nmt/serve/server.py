"""Start ``nmt serve``: load the models given on the command line, the studies and the
test sets, build the application (:func:`build`) and run it under uvicorn
(:func:`serve`), bound to 127.0.0.1 unless ``host`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.ops.device import pick_device
from nmt.serve.limits import DEFAULT_QUEUE
from nmt.serve.registry import Registry, load_registry
from nmt.serve.studies import Studies, definitions, load_study
from nmt.serve.testsets import (
    DEFAULT_BUCKETS,
    DEFAULT_JOIN_KS,
    SetDefinition,
    TestSets,
    served_corpus,
)


@dataclass
class ServeOptions:
    """What ``nmt serve`` was asked for.

    Attributes:
        models: ``ID=CHECKPOINT`` (or ``CHECKPOINT``) specs, the allowlist.
        studies: study report folders (``reports/NAME``).
        host, port: where to listen. threads: torch CPU threads of every search (default:
            torch's count). queue: requests waiting or running per model before 429.
        device: auto | cpu | cuda[:N]. data_path: the corpus of the example test sets
            (default: the first model's ``data.path``).
    """

    models: list[str]
    studies: list[Path] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8000
    threads: int | None = None
    queue: int = DEFAULT_QUEUE
    device: str = "auto"
    data_path: str | None = None


def build(opts: ServeOptions, log: Callable[[str], None] = print) -> Any:
    """The FastAPI application for ``opts`` (models loaded now).

    Raises:
        ValueError, nmt.model.checkpoint.CheckpointError, nmt.serve.studies.StudyError:
            a bad option, checkpoint or study report (named).
    """
    from nmt.serve.app import create_app

    if opts.threads is not None and opts.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {opts.threads}")
    device = pick_device(opts.device, "--device")
    threads = opts.threads or torch.get_num_threads()
    registry: Registry = load_registry(opts.models, device, threads, opts.queue)
    for e in registry.models.values():
        log(f"model {e.id}: {e.path} ({e.info['attention']}, {e.info['direction']}, "
            f"{e.info['parameters']:,} parameters, {e.decoding.describe()})")
    studies = [load_study(p) for p in opts.studies]
    defs: list[SetDefinition] = [d for s in studies for d in definitions(s)]
    first = next(iter(registry.models.values())).loaded.cfg.data
    defs += [SetDefinition(s, s) for s in first.test_splits]
    if first.test_splits:
        defs.append(SetDefinition(f"{first.test_splits[0]}_joined", first.test_splits[0],
                                  DEFAULT_JOIN_KS))
    data, note = served_corpus(first, opts.data_path)
    if note:
        log(f"warning: no example sentences: {note}")
    buckets = (studies[0].config.get("buckets") if studies else None) or DEFAULT_BUCKETS
    testsets = TestSets(data, defs, buckets, note)
    return create_app(registry, Studies(studies, testsets), testsets)


def serve(opts: ServeOptions, log: Callable[[str], None] = print) -> None:
    """Build the application and serve it until interrupted.

    Raises:
        as :func:`build`; OSError when the port cannot be bound (uvicorn exits).
    """
    import uvicorn

    app = build(opts, log)
    log(f"serving on http://{opts.host}:{opts.port}/ (API at /api, OpenAPI at /docs)")
    uvicorn.run(app, host=opts.host, port=opts.port, log_level="warning")
