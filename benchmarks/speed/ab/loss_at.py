"""nmt/model/loss.py as it was at a commit (default 226fa03, before the chunked loss), loaded as a
module from `git show`, so an A/B can run the old loss beside the current one."""
import importlib.util, os, pathlib, subprocess, sys, tempfile

def old_loss(commit: str = os.environ.get("OLD_COMMIT", "226fa03")):
    root = pathlib.Path(__file__).resolve().parents[3]
    src = subprocess.run(["git", "-C", str(root), "show", f"{commit}:nmt/model/loss.py"],
                         check=True, capture_output=True, text=True).stdout
    path = pathlib.Path(tempfile.mkdtemp()) / "old_loss.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_loss", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
