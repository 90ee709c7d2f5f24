"""benchmarks/speed/primitive_builds.py: builds counted from a ONEDNN_VERBOSE=profile_create
log, grouped by shape family, and a log without oneDNN lines refused."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks/speed/primitive_builds.py"

HEAD = "onednn_verbose,v1,primitive,{kind},cpu,matmul,brg_matmul:avx512_core_bf16,undef,"
LINE = HEAD + "src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0,attr-scratchpad:user,,{shape},{ms}"


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def test_builds_are_counted_by_family_and_per_step(tmp_path):
    log = tmp_path / "run.log"
    lines = [
        "onednn_verbose,v1,info,oneDNN v3.12.0",
        LINE.format(kind="create:cache_miss", shape="105x512:512x1536", ms="0.5"),
        LINE.format(kind="create:cache_miss", shape="90x512:512x1536", ms="0.25"),
        LINE.format(kind="create:cache_miss", shape="90x512:512x1536", ms="0.25"),
        LINE.format(kind="create:cache_hit", shape="90x512:512x1536", ms="0.01"),
        LINE.format(kind="create:cache_miss", shape="1984x512:512x8000", ms="3"),
        "some other line",
    ]
    log.write_text("\n".join(lines) + "\n")
    r = _run(log, "--steps", "2")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "4 primitives built in 4 ms, 3 distinct shapes; 1 found in oneDNN's cache"
    assert out[1] == "per training step (2): 2.0 builds, 2.0 ms"
    rows = {line.split()[0]: line.split()[1:] for line in out[4:]}
    # the batch's row count is written V, the model's dimensions kept
    assert rows["Vx512:512x1536"] == ["3", "1.0", "2"]
    assert rows["Vx512:512x8000"] == ["1", "3.0", "1"]


def test_a_log_without_onednn_lines_or_no_file_is_one_line_and_exit_2(tmp_path):
    plain = tmp_path / "fp32.log"
    plain.write_text("training, 60 steps\n")
    for path, words in ((plain, "ONEDNN_VERBOSE"), (tmp_path / "none.log", "No such file")):
        r = _run(path)
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.splitlines()) == 1 and words in r.stderr and path.name in r.stderr


def test_impossible_step_and_family_counts_are_refused(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LINE.format(kind="create:cache_miss", shape="90x512:512x1536", ms="0.5") + "\n")
    for option, value in (("--steps", "0"), ("--steps", "-3"), ("--top", "-1")):
        r = _run(log, option, value)
        assert r.returncode == 2 and r.stdout == "" and f"{option} {value}" in r.stderr
    assert _run(log, "--top", "0").returncode == 0


def test_a_build_line_without_its_milliseconds_is_named_by_number(tmp_path):
    log = tmp_path / "cut.log"
    good = LINE.format(kind="create:cache_miss", shape="90x512:512x1536", ms="0.5")
    log.write_text(good + "\n" + good.rsplit(",", 1)[0] + "\n")  # cut before the last field
    r = _run(log)
    assert r.returncode == 2 and "line 2" in r.stderr and len(r.stderr.splitlines()) == 1
