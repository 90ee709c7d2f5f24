"""nmt/loss.py as it was at a commit (default 226fa03, before the chunked loss; OLD_COMMIT
overrides it), loaded as a module from `git show` (benchmarks/old_code.py, which renames its
imports to today's layout), so an A/B can run the old loss beside the current one."""
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # benchmarks/
from old_code import module_at


def old_loss(commit: str = os.environ.get("OLD_COMMIT", "226fa03")):
    # the path at that commit: before issue 26 the loss lived in nmt/loss.py
    return module_at(commit, "nmt/loss.py")
