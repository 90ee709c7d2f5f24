"""A model folder as a version-1 ``.pt`` checkpoint, for code older than model folders.

    .venv/bin/python benchmarks/serve/folder_to_checkpoint.py models/deen-additive OUT.pt

The load test (docs/serve.md, "Load test (batching)") compares today's ``nmt serve`` with
git e6d2505, the server before cross-request batching. That commit reads only checkpoint
files (``nmt export`` and model folders came later), so the shipped pair is converted:
this checkout's loader reads the folder (every file checked against the manifest's
SHA-256, fp16/bf16 weights widened to fp32) and the payload it builds is saved as the
checkpoint layout both versions read (format ``nmt-checkpoint``, version 1, no training
state). The fp32 tensors are the very ones this checkout computes with when it serves the
folder, so both servers translate with equal weights; the config and SentencePiece models
are copied unchanged. ``--check-old DIR`` then loads OUT with the old checkout's own code
(a subprocess with DIR first on ``PYTHONPATH``) and reports whether it rebuilt the model.

Raises (as a one-line message, exit status 1): the folder is not a readable model folder,
OUT cannot be written, or the old checkout refuses OUT.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from nmt.model.checkpoint import CheckpointError, read_payload, save_atomic

# run by the old checkout's Python in --check-old: only the names its loader had then
OLD_CHECK = (
    "import sys; from nmt.model.checkpoint import load_checkpoint; "
    "m = load_checkpoint(sys.argv[1]); "
    "print(m.cfg.model.attention, sum(p.numel() for p in m.model.parameters()))"
)


def convert(folder: Path, out: Path) -> None:
    """Write ``folder``'s model as the checkpoint ``out`` (no training state).

    Raises:
        CheckpointError: ``folder`` is not a readable model folder, or ``out`` cannot be
            written (the message names the path).
    """
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a model folder (a directory with manifest.json)")
    payload = read_payload(folder)
    save_atomic(payload, out)


def check_old(out: Path, checkout: Path) -> str:
    """What ``checkout``'s own loader makes of ``out``: ``"ATTENTION PARAMETERS"``.

    Raises:
        CheckpointError: the old code failed to load it (its last error line quoted).
    """
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    got = subprocess.run(
        [sys.executable, "-c", OLD_CHECK, str(out.resolve())],
        cwd=checkout,  # the old tree first on sys.path, before this checkout's install
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if got.returncode != 0:
        last = (got.stderr.strip().splitlines() or ["no message"])[-1]
        raise CheckpointError(f"{out}: the checkout {checkout} cannot load it: {last}")
    return got.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a model folder, e.g. models/deen-additive")
    ap.add_argument("out", type=Path, help="the checkpoint to write, e.g. /tmp/additive.pt")
    ap.add_argument("--check-old", type=Path, metavar="DIR", help="an old checkout to load OUT")
    a = ap.parse_args()
    try:
        convert(a.folder, a.out)
        print(f"{a.folder} -> {a.out}")
        if a.check_old:
            print(f"{a.check_old} loads {a.out}: {check_old(a.out, a.check_old.resolve())}")
    except CheckpointError as e:
        sys.exit(f"folder_to_checkpoint: {e}")


if __name__ == "__main__":
    main()
