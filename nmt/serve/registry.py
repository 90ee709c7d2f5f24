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

from nmt.data.digest import file_sha256
from nmt.inference.translate import Decoding
from nmt.inference.translator import Translator
from nmt.model.checkpoint import Loaded, load_checkpoint
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

    def leave(self) -> None:
        """Give back a place taken by :meth:`try_enter`."""
        with self._lock:
            self.active = max(0, self.active - 1)


def parse_model_spec(spec: str) -> tuple[str | None, Path]:
    """``ID=PATH`` -> (ID, PATH); a plain ``PATH`` -> (None, PATH): the id is then the
    checkpoint's attention type.

    Raises:
        ValueError: an id that is not 1-64 letters, digits, ``_``, ``.`` or ``-``.
    """
    name, sep, path = spec.partition("=")
    if not sep:
        return None, Path(spec)
    if not _ID.match(name):
        raise ValueError(f"--model {spec!r}: the id {name!r} must be 1-64 letters, digits, "
                         "'_', '.' or '-' (starting with a letter or digit)")
    return name, Path(path)


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    return file_sha256(path)


def _matches(record: dict[str, Any], digest_key: str, name: str | None, path: Path,
             digest: str) -> bool | None:
    """Whether a stored record scores this checkpoint: True when it records this file's
    sha256 (``digest_key``), False when it records another, None when it records none
    and names a file of this name (an older record, which cannot prove its weights)."""
    recorded = record.get(digest_key)
    if isinstance(recorded, str):
        return recorded == digest
    return None if name is None or Path(name).name == path.name else False


def _stored_scores(path: Path, digest: str) -> tuple[dict[str, Any] | None, float | None]:
    """(test BLEU stored beside ``path``, best validation BLEU of its run) or None each.

    Test BLEU comes from ``nmt select --json`` summaries (``test`` per split, beam search
    with its signature) whose chosen checkpoint is this file, or ``nmt evaluate --json``
    records of this checkpoint, in any ``*.json`` file (under 2 MB) of its folder; the
    validation BLEU from the run's ``summary.json``. A record is this checkpoint's when it
    holds its sha256 ``digest``; one that holds another digest scored other weights
    under the name and is left out; an older record with no digest is matched by file
    name and shown with ``verified: false``."""
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
            ok = _matches(data, "chosen_checkpoint_sha256", data.get("chosen_checkpoint"),
                          path, digest)
            if ok is not False:
                for split, t in data["test"].items():
                    if isinstance(t, dict) and "beam_bleu" in t:
                        found.append({"split": split, "bleu": t["beam_bleu"],
                                      "signature": t.get("signature"), "file": f.name,
                                      "decoding": f"beam {data.get('beam')}, alpha "
                                                  f"{data.get('alpha')}", "verified": ok})
        elif isinstance(data, list):
            for r in data:
                if not (isinstance(r, dict) and "bleu" in r and "checkpoint" in r):
                    continue
                ok = _matches(r, "checkpoint_sha256", str(r["checkpoint"]), path, digest)
                if ok is not False:
                    found.append({"split": r.get("test_set"), "bleu": r["bleu"],
                                  "signature": r.get("signature"), "file": f.name,
                                  "decoding": r.get("decoding"), "verified": ok})
        if f.name == "summary.json" and isinstance(data, dict):
            val = data.get("best_val_bleu")
    if not found:
        return None, val
    found.sort(key=lambda x: not x["verified"])  # stable: verified records first
    for x in found:
        x["verified"] = bool(x["verified"])
    return {**found[0], "all": found}, val


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


def load_entry(model_id: str | None, path: Path, device: torch.device, threads: int,
               queue_size: int = DEFAULT_QUEUE) -> ModelEntry:
    """Load one checkpoint (safely) and describe it.

    Raises:
        nmt.model.checkpoint.CheckpointError: not a usable checkpoint (named).
        nmt.ops.precision.PrecisionError: its search precision cannot run on ``device``.
    """
    loaded = load_checkpoint(path, device)
    cfg = loaded.cfg
    m = cfg.model
    decoding = Decoding.from_config(cfg).on(device)
    translator = Translator(loaded.model, loaded.src_vocab, loaded.tgt_vocab, decoding,
                            threads=threads, max_src_pieces=MAX_PIECES)
    digest = sha256_of(path)
    test_bleu, val_bleu = _stored_scores(path, digest)
    mid = model_id or m.attention
    info = {
        "id": mid, "name": cfg.name, "checkpoint": path.name, "sha256": digest,
        "direction": f"{cfg.data.src_lang}->{cfg.data.tgt_lang}",
        "attention": m.attention, "fixed_vector": m.attention == "none",
        "heads": m.heads if m.attention == "multihead" else None,
        "local_window": m.local_window if m.attention in ("local_m", "local_p") else None,
        "step_order": m.step_order, "parameters": count_parameters(loaded.model),
        "vocab": {"source": len(loaded.src_vocab), "target": len(loaded.tgt_vocab)},
        "decoding": {**dataclasses.asdict(decoding), "describe": decoding.describe()},
        "test_bleu": test_bleu, "val_bleu": val_bleu,
    }
    return ModelEntry(mid, path, loaded, translator, decoding, info, Queue(queue_size))


class Registry:
    """The served models by id, in command-line order.

    Args:
        entries: the loaded models; ids must be unique.
        threads: the torch CPU threads every search runs on.

    Raises:
        ValueError: two models with one id.
    """

    def __init__(self, entries: list[ModelEntry], threads: int):
        self.models: dict[str, ModelEntry] = {}
        for e in entries:
            if e.id in self.models:
                raise ValueError(f"two models have the id {e.id!r}: name them ID=PATH")
            self.models[e.id] = e
        self.threads = threads

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


def load_registry(specs: list[str], device: torch.device, threads: int,
                  queue_size: int = DEFAULT_QUEUE) -> Registry:
    """The registry of ``--model`` specs (``ID=PATH`` or ``PATH``).

    Raises:
        ValueError: no model, a bad id or two models with one id.
        nmt.model.checkpoint.CheckpointError: a checkpoint cannot be loaded.
    """
    if not specs:
        raise ValueError("give at least one --model ID=CHECKPOINT")
    entries = []
    for spec in specs:
        mid, path = parse_model_spec(spec)
        entries.append(load_entry(mid, path, device, threads, queue_size))
    return Registry(entries, threads)
