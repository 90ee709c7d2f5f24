"""benchmarks/speed/search_rounds.sh: what each RUN of a sitting's search rounds passes to
`nmt bench` (precision, --processes, NMT_INT8_ENGINE) and the files it names, with a stub
standing in for the checkout's python."""

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STUB = """#!/usr/bin/env bash
if [ "$1" = - ]; then cat > /dev/null; : > "$2"; exit 0; fi  # the checkpoint's copy
echo "engine=${NMT_INT8_ENGINE:-unset} $*" >> "$CALLS"
"""


def test_each_run_gets_its_precision_processes_and_int8_library(tmp_path):
    here = tmp_path / "here"
    (here / ".venv/bin").mkdir(parents=True)
    stub = here / ".venv/bin/python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    out, calls = tmp_path / "out", tmp_path / "calls.txt"
    out.mkdir()
    script = (
        f". {REPO}/benchmarks/speed/search_rounds.sh\n"
        f"OUT={out} DATA={tmp_path} HERE={here} OLD_TREE= search_rounds 2 "
        "new:fp32 new:int8+onednn new:int8+onednn+processes new:int8+processes"
    )
    r = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "CALLS": str(calls)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 8
    by_json = {line.split("--json ")[1].split()[0].rsplit("/", 1)[1]: line for line in lines}
    expect = {
        "search_fp32": ("fbgemm", "fp32", False),
        "search_int8_onednn": ("onednn", "int8", False),
        "search_int8_onednn_processes": ("onednn", "int8", True),
        "search_int8_processes": ("fbgemm", "int8", True),
    }
    for name, (engine, precision, processes) in expect.items():
        for round_ in (1, 2):
            line = by_json[f"{name}_round{round_}.json"]
            assert line.startswith(f"engine={engine} -m nmt bench"), line
            assert f"--decode-precision {precision} " in line, line
            assert ("--processes" in line) == processes, line
    # round 2 runs in the reverse order
    order = [line.split("--json ")[1].split("_round")[0].rsplit("/", 1)[1] for line in lines]
    assert order[:4] == list(expect) and order[4:] == list(reversed(list(expect)))
