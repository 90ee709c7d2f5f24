"""The models ``nmt serve`` was given on its command line (the allowlist: nothing else is
ever loaded, and nothing can be uploaded), what the API says about each, and the bounded
queue in front of each.

Checkpoints are read by the safe loader (:func:`nmt.model.checkpoint.load_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nmt.config.schema import LOCAL_KINDS
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator, decode_workers, threads_per_worker
from nmt.model import folder
from nmt.model.checkpoint import CheckpointError, Loaded, load_checkpoint
from nmt.model.folder import (
    WEIGHTS,
    is_folder,
    is_hub_spec,
    resolve_model_path,
    shipped_models,
    unknown_name_hint,
)
from nmt.model.seq2seq import count_parameters
from nmt.serve.limits import DEFAULT_QUEUE, MAX_PIECES, busy

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Queue:
    """A bounded count of the requests waiting for or running on one model.

    Args:
        size: at most this many at once (>= 1); one more is refused (429).
    """

    def __init__(self, size: int = DEFAULT_QUEUE):
        if size < 1:
            raise ValueError(f"queue size must be >= 1, got {size}")
        self.size, self.active = size, 0
        self._lock = threading.Lock()

    def try_enter(self) -> bool:
        """Take a place; False (nothing taken) when all ``size`` places are taken."""
        with self._lock:
            if self.active >= self.size:
                return False
            self.active += 1
            return True

    def depth(self) -> int:
        """Requests waiting or running now."""
        return self.active

    def leave(self) -> None:
        """Give back a place taken by :meth:`try_enter`."""
        with self._lock:
            self.active = max(0, self.active - 1)


def parse_model_spec(spec: str) -> tuple[str | None, Path]:
    """``ID=PATH`` -> (ID, PATH); a plain ``PATH`` -> (None, PATH): the id is then the
    checkpoint's attention type.

    Raises:
        ValueError: an id that is not 1-64 letters, digits, ``_``, ``.`` or ``-``, or an
            empty path.
    """
    name, sep, path = spec.partition("=")
    if not sep:
        return None, Path(spec)
    if not _ID.match(name):
        raise ValueError(
            f"--model {spec!r}: the id {name!r} must be 1-64 letters, digits, "
            "'_', '.' or '-' (starting with a letter or digit)"
        )
    if not path.strip():  # Path("") is ".", which would be reported as a directory
        raise ValueError(f"--model {spec!r}: empty path after '='; give ID=CHECKPOINT")
    return name, Path(path)


def default_specs() -> list[str]:
    """The ``--model`` specs of ``nmt serve`` without one: each model folder shipped in the
    project's ``models/`` (served under its attention type), none when none is shipped."""
    return [str(folder.SHIPPED_DIR / name) for name in shipped_models()]  # read at call time


def check_specs(specs: list[str]) -> list[tuple[str | None, Path]]:
    """The parsed ``--model`` specs, checked before any model is loaded: at least one,
    well-formed, no id given twice, each path an existing file.

    Raises:
        ValueError: the first malformed spec or repeated id, named.
        CheckpointError: a path that is not a file, named.
    """
    if not specs:
        raise ValueError(
            "give at least one --model ID=CHECKPOINT (no model folder is "
            f"shipped in {folder.SHIPPED_DIR} to serve by default)"
        )
    parsed = [parse_model_spec(s) for s in specs]
    seen: set[str] = set()
    for (mid, path), spec in zip(parsed, specs, strict=True):
        if mid is not None:
            if mid in seen:
                raise ValueError(
                    f"--model {spec!r}: the id {mid!r} is given twice; give each model its own id"
                )
            seen.add(mid)
        where = path if is_hub_spec(path) else resolve_model_path(path)
        if not (where.is_file() or is_folder(where) or is_hub_spec(where)):
            why = (
                "is a directory (no manifest.json: not a model folder)"
                if path.is_dir()
                else "does not exist" + unknown_name_hint(str(path))
            )
            raise CheckpointError(
                f"--model {spec!r}: {path} {why}; give a checkpoint "
                "file (e.g. runs/NAME/best.pt) or a model folder"
            )
    return parsed


def _scored(record: dict[str, Any], key: str, sha: str, name_matches: bool) -> str | None:
    """How a stored score relates to the served file: ``verified`` (its recorded sha256 is
    the file's), ``stale`` (a sha256 of another file), ``unverified`` (no sha256 recorded,
    the file name matches: JSON written before nmt recorded the hash), else None."""
    stored = record.get(key)
    if isinstance(stored, str):
        return "verified" if stored == sha else "stale"
    return "unverified" if name_matches else None


def _select_scores(
    data: dict[str, Any], *, file: Path, path: Path, sha: str
) -> list[dict[str, Any]]:
    """The test scores of one ``nmt select --json`` summary ``data`` (read from ``file``)
    when its chosen checkpoint is ``path`` (sha256 ``sha``; see :func:`_scored`), one dict
    per split with a beam BLEU: split, bleu, signature, file (name), status, decoding.
    [] when it chose another checkpoint."""
    chosen = data.get("chosen_checkpoint")
    status = _scored(
        data,
        "chosen_checkpoint_sha256",
        sha,
        chosen is None or Path(str(chosen)).name == path.name,
    )
    if not status:
        return []
    return [
        {
            "split": split,
            "bleu": t["beam_bleu"],
            "signature": t.get("signature"),
            "file": file.name,
            "status": status,
            "decoding": t.get("search") or f"beam {data.get('beam')}, alpha {data.get('alpha')}",
        }
        for split, t in data["test"].items()
        if isinstance(t, dict) and "beam_bleu" in t
    ]


def _evaluate_scores(data: list[Any], *, file: Path, path: Path, sha: str) -> list[dict[str, Any]]:
    """The test scores of the ``nmt evaluate --json`` records ``data`` (read from ``file``)
    that scored ``path`` (sha256 ``sha``; see :func:`_scored`), in their order, as
    :func:`_select_scores` gives them; records that are not scores are skipped."""
    found: list[dict[str, Any]] = []
    for r in data:
        if not (isinstance(r, dict) and "bleu" in r and "checkpoint" in r):
            continue
        status = _scored(r, "checkpoint_sha256", sha, Path(str(r["checkpoint"])).name == path.name)
        if status:
            found.append(
                {
                    "split": r.get("test_set"),
                    "bleu": r["bleu"],
                    "signature": r.get("signature"),
                    "file": file.name,
                    "status": status,
                    "decoding": r.get("search"),
                }
            )
    return found


def _stored_scores(
    path: Path, sha: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, float | None]:
    """(test BLEU stored beside ``path``, why a stored one is stale, best validation BLEU
    of its run), None each when there is none.

    Test BLEU comes from ``nmt select --json`` summaries (``test`` per split, beam search
    with its signature) whose chosen checkpoint is this file, or ``nmt evaluate --json``
    records of this checkpoint, in any ``*.json`` file (under 2 MB) of its folder. A
    score is this file's when the JSON's ``chosen_checkpoint_sha256`` or
    ``checkpoint_sha256`` is ``sha``; a JSON without one (older nmt) whose checkpoint
    name matches is shown with ``status`` ``unverified``. A score of another sha256
    (``best.pt`` replaced since) is left out; when nothing else is found the second item
    names its file and says why. The validation BLEU is the run's ``summary.json``'s."""
    found: list[dict[str, Any]] = []
    val = None
    for f in sorted(path.parent.glob("*.json")):
        try:
            if f.stat().st_size > 2_000_000:
                continue
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("test"), dict):
            found += _select_scores(data, file=f, path=path, sha=sha)
        elif isinstance(data, list):
            found += _evaluate_scores(data, file=f, path=path, sha=sha)
        if f.name == "summary.json" and isinstance(data, dict):
            val = data.get("best_val_bleu")
    rank = {"verified": 0, "unverified": 1}
    shown = sorted((x for x in found if x["status"] in rank), key=lambda x: rank[x["status"]])
    if shown:
        return {**shown[0], "all": shown}, None, val
    if found:
        return (
            None,
            {
                "file": found[0]["file"],
                "reason": (
                    f"{found[0]['file']} scored a checkpoint with another sha256: {path.name} was "
                    "replaced since; score it again (nmt evaluate --json, nmt select --json)"
                ),
            },
            val,
        )
    return None, None, val


@dataclass
class ModelEntry:
    """One served model.

    Attributes:
        id: its name in the API. path: the checkpoint. loaded: config, model, vocabularies.
        translator: encodes sources (cut at ``MAX_PIECES``). decoding: the checkpoint's
            search settings with its precision resolved for the device.
        info: what ``GET /api/models`` says about it. queue: its bounded queue.
    """

    id: str
    path: Path
    loaded: Loaded
    translator: Translator
    decoding: Decoding
    info: dict[str, Any]
    queue: Queue = field(default_factory=Queue)

    @property
    def fixed_vector(self) -> bool:
        """Whether the model reads one fixed context vector (attention ``none``)."""
        return self.loaded.cfg.model.attention == "none"


def load_entry(
    model_id: str | None,
    path: Path,
    device: torch.device,
    threads: int,
    queue_size: int = DEFAULT_QUEUE,
    precision: str | None = None,
) -> ModelEntry:
    """Load one checkpoint (safely) and describe it; ``precision`` (fp32, bf16, ...)
    replaces its ``search.precision`` unless None.

    Raises:
        nmt.model.checkpoint.CheckpointError: not a usable checkpoint (named).
        nmt.ops.precision.PrecisionError: its search precision cannot run on ``device``.
    """
    loaded = load_checkpoint(path, device, with_digest=True)  # the digest of the bytes loaded
    cfg = loaded.cfg
    m = cfg.model
    translator = Translator.from_loaded(
        loaded,
        precision=precision,
        # the option the value came from: nmt serve --precision, or the checkpoint's config
        precision_option="search.precision" if precision is None else "--precision",
        threads=threads,
        workers=1,  # a served batch is searched on all the threads: auto measures that
        max_src_pieces=MAX_PIECES,
    )
    decoding = translator.decoding  # a beam over the vocabulary is capped to it
    sha = str(loaded.sha256)
    where = resolve_model_path(path)  # a model folder's scores are in its results.json
    test_bleu, stale, val_bleu = _stored_scores(where / WEIGHTS if is_folder(where) else path, sha)
    mid = model_id or m.attention
    info = {
        "id": mid,
        "name": cfg.name,
        "checkpoint": path.name,
        "sha256": sha,
        "direction": f"{cfg.data.src_lang}->{cfg.data.tgt_lang}",
        "attention": m.attention,
        "fixed_vector": m.attention == "none",
        "heads": m.heads if m.attention == "multihead" else None,
        "local_window": m.local_window if m.attention in LOCAL_KINDS else None,
        "step_order": m.step_order,
        "parameters": count_parameters(loaded.model),
        "vocab": {"source": len(loaded.src_vocab), "target": len(loaded.tgt_vocab)},
        "decoding": {**dataclasses.asdict(decoding), "describe": decoding.describe()},
        "test_bleu": test_bleu,
        "test_bleu_stale": stale,
        "val_bleu": val_bleu,
    }
    return ModelEntry(mid, path, loaded, translator, decoding, info, Queue(queue_size))


class Registry:
    """The served models by id, in command-line order.

    Args:
        entries: the loaded models; ids must be unique.
        threads: the torch CPU threads of the server (``--threads``). On a CPU with
            several models they are shared out: :attr:`searches` searches (one per model,
            at most one per thread) run at once on :attr:`search_threads` threads each,
            since each core runs its own search's small matrices faster than two cores run
            one search's together (as :class:`~nmt.inference.translator.Translator`'s
            ``workers``). The page's reference-alignment view reads on the same share.

    Raises:
        ValueError: two models with one id.
    """

    def __init__(self, entries: list[ModelEntry], threads: int):
        self.models: dict[str, ModelEntry] = {}
        for e in entries:
            if e.id in self.models:
                raise ValueError(
                    f"two models have the id {e.id!r} (a plain --model PATH "
                    "takes its attention type as id): name them ID=PATH"
                )
            self.models[e.id] = e
        self.threads = threads
        # the Translator's own policy: one search per model and thread at most on a CPU
        devices = {e.translator.device.type for e in entries}
        device = torch.device("cpu" if devices <= {"cpu"} else "cuda")
        self.searches = decode_workers(device, len(self.models), None, threads)
        self.search_threads = threads_per_worker(self.searches, threads)

    def default_pair(self) -> list[str]:
        """The page's default columns: the first attention model next to the first
        fixed-vector model, else the first two models."""
        attn = [i for i, e in self.models.items() if not e.fixed_vector]
        fixed = [i for i, e in self.models.items() if e.fixed_vector]
        pair = attn[:1] + fixed[:1]
        return pair if len(pair) == 2 else list(self.models)[:2]

    def enter(self, ids: list[str]) -> list[ModelEntry]:
        """Take a queue place on each model of ``ids``, all or none.

        Raises:
            ApiError: 429 when one of the queues is full (nothing is then taken).
        """
        taken: list[ModelEntry] = []
        for i in ids:
            e = self.models[i]
            if not e.queue.try_enter():
                for t in taken:
                    t.queue.leave()
                raise busy(i, e.queue.size)
            taken.append(e)
        return taken


def load_registry(
    specs: list[str],
    device: torch.device,
    threads: int,
    queue_size: int = DEFAULT_QUEUE,
    precision: str | None = None,
) -> Registry:
    """The registry of ``--model`` specs (``ID=PATH`` or ``PATH``), searching in
    ``precision`` (None: each checkpoint's).

    Raises:
        ValueError: no model, a bad id or two models with one id.
        nmt.model.checkpoint.CheckpointError: a checkpoint cannot be loaded.
    """
    entries = [
        load_entry(mid, path, device, threads, queue_size, precision)
        for mid, path in check_specs(specs)
    ]
    return Registry(entries, threads)
