"""The table and the issue-50 checks of a load test's runs (benchmarks/serve/load_real.sh).

    .venv/bin/python benchmarks/serve/load_summary.py DIR [--old old]

Reads every run ``DIR/*.json`` that benchmarks/serve/load_test.py wrote (with its
``.requests.jsonl`` beside it) and prints, as Markdown: the machine and load, one table
row per run and concurrency, and the checks of issue 50's "Done when" that a load test
can answer, run against run in the order they ran (old round k against new round k; every
label other than ``--old`` is a new server):

- at concurrency 8, new sentences/s >= 3x old, and new p95 <= old p95;
- at concurrency 16, no status other than 200 and 429 in new;
- every answer of every run equals its solo answer (the run's own concurrency 1);
- the old and the new server's solo answers are the same (same weights and search:
  the comparison is of one translation, not of two).

Writes the same as JSON to ``DIR/summary.json`` (``checks``: name -> passed or not).
Exits 0 whatever the checks say; 1 when DIR holds no run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def load_runs(directory: Path) -> list[dict[str, Any]]:
    """The runs in ``directory`` by start time, each with ``solo``: line -> best answer at
    concurrency 1 (from its requests file; empty when that file is missing)."""
    runs = []
    for path in sorted(directory.glob("*.json")):
        if path.name == "summary.json":
            continue
        run = json.loads(path.read_text())
        if "rows" not in run:
            continue
        run["file"] = path.name
        raw = path.with_suffix(".requests.jsonl")
        solo: dict[int, Any] = {}
        if raw.is_file():
            for text in raw.read_text().splitlines():
                r = json.loads(text)
                if r["concurrency"] == 1 and r["answer"] is not None:
                    solo[r["line"]] = r["answer"]
        run["solo"] = solo
        runs.append(run)
    return sorted(runs, key=lambda r: r["started"])


def fmt(x: float | None, digits: int = 0) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def table(runs: list[dict[str, Any]]) -> list[str]:
    out = [
        "| run | concurrency | answered (of N) | other codes | sentences/s | p50 ms | p95 ms "
        "| p99 ms | server CPU ms/request | lines per search | same as solo "
        "| load avg start-end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        for r in run["rows"]:
            codes = ", ".join(f"{k}: {v}" for k, v in r["codes"].items()) or "none"
            solo = "(solo)" if r["concurrency"] == 1 else f"{r['same_as_solo']} of {r['compared']}"
            load = f"{r['load_average_start'][0]:.2f}-{r['load_average_end'][0]:.2f}"
            # the new server's batches per model (its /metrics); none for the old one
            per = ", ".join(
                f"{m} {b['mean_lines']}" for m, b in sorted(r.get("batches", {}).items())
            )
            out.append(
                f"| {run['file'].removesuffix('.json')} | {r['concurrency']} "
                f"| {r['ok']} of {r['requests']} | {codes} | {r['sentences_per_s']:.2f} "
                f"| {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | {fmt(r['p99_ms'])} "
                f"| {fmt(r.get('server_cpu_ms_per_request'), 1)} | {per} | {solo} | {load} |"
            )
    return out


def at(run: dict[str, Any], concurrency: int) -> dict[str, Any] | None:
    return next((r for r in run["rows"] if r["concurrency"] == concurrency), None)


def checks(runs: list[dict[str, Any]], old: str) -> tuple[list[str], dict[str, bool | None]]:
    """The lines saying each check, and name -> passed (None: not measured). Every label
    other than ``old`` is a new server, compared round by round with the old one."""
    olds = [r for r in runs if r["label"] == old]
    labels = sorted({r["label"] for r in runs} - {old})
    lines: list[str] = []
    result: dict[str, bool | None] = {}
    for label in labels:
        news = [r for r in runs if r["label"] == label]
        for k, (o, n) in enumerate(zip(olds, news, strict=False), 1):
            o8, n8 = at(o, 8), at(n, 8)
            name = f"{n['file']} vs {o['file']}: c=8 3x, p95 no worse"
            if o8 is None or n8 is None or not o8["sentences_per_s"]:
                result[name] = None
                lines.append(f"- {name}: concurrency 8 not measured in both runs")
                continue
            ratio = n8["sentences_per_s"] / o8["sentences_per_s"]
            cut = any(x["codes"].get("not_sent") for x in (o8, n8))
            ok = ratio >= 3 and n8["p95_ms"] <= o8["p95_ms"]
            why = " and ".join(
                w
                for w, bad in (
                    (f"throughput {ratio:.2f}x < 3x", ratio < 3),
                    ("p95 worse", n8["p95_ms"] > o8["p95_ms"]),
                )
                if bad
            )
            result[name] = ok
            lines.append(
                f"- round {k}, concurrency 8, {label} vs {old}: {n8['sentences_per_s']:.2f} / "
                f"{o8['sentences_per_s']:.2f} sentences/s = **{ratio:.2f}x** (needs 3x); p95 "
                f"{n8['p95_ms']:,.0f} ms vs {o8['p95_ms']:,.0f} ms"
                f"{' (a level was cut by --max-seconds)' if cut else ''}: "
                f"{'PASS' if ok else 'FAIL (' + why + ')'}"
            )
        for n in news:
            n16 = at(n, 16)
            name = f"{n['file']}: c=16 only 200/429"
            if n16 is None:
                result[name] = None
                continue
            result[name] = n16["errors"] == 0
            lines.append(
                f"- {n['file']}, concurrency 16: {n16['errors']} errors, codes "
                f"{n16['codes'] or 'none'}: {'PASS' if n16['errors'] == 0 else 'FAIL'}"
            )
    for run in runs:
        bad = [r for r in run["rows"] if r.get("same_as_solo") != r.get("compared")]
        result[f"{run['file']}: every answer = solo"] = not bad
        if bad:
            lines.append(
                f"- {run['file']}: answers differing from solo at concurrency "
                + ", ".join(str(r["concurrency"]) for r in bad)
                + ": FAIL"
            )
    lines.append(
        "- every answer equals its run's solo answer: "
        + ("PASS" if all(v for k, v in result.items() if k.endswith("= solo")) else "FAIL")
    )
    for o in olds:
        for n in (r for r in runs if r["label"] != old):
            common = set(o["solo"]) & set(n["solo"])
            same = sum(o["solo"][i] == n["solo"][i] for i in common)
            result[f"{o['file']} vs {n['file']}: same solo answers"] = same == len(common) > 0
            lines.append(
                f"- solo answers {o['file']} vs {n['file']}: {same} of {len(common)} the same"
            )
    return lines, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--old", default="old", help="the label of the old server's runs")
    a = ap.parse_args()
    runs = load_runs(a.dir)
    if not runs:
        sys.exit(f"load_summary: no load_test.py run (*.json with rows) in {a.dir}")
    first, last = runs[0], runs[-1]
    head = [
        f"Load test {first['started']} to {last['ended']}: {first['cpu']}, "
        f"{first['cores']} cores, server threads {first['server_threads']}, beam "
        f"{first['beam']}, {first['requests']} requests per level (at most "
        f"{first['max_seconds']:.0f} s).",
        "Load average (1, 5, 15 min) at the first run's start "
        f"{first['load_average_start']}, at the last run's end {last['load_average_end']}.",
        "",
    ]
    # the test itself keeps at most the cores busy plus one (the client beside a
    # server on every core): a higher load at a run's end means other processes ran
    # too, and every wall-clock number includes their share
    busiest = max(r["load_average_end"][0] for r in runs)
    if busiest > first["cores"] + 1:
        head[-1:-1] = [
            f"**Warning:** a 1-minute load average of {busiest:.2f} on {first['cores']} "
            "cores at a run's end: other processes ran beside the test, so sentences/s "
            "and latencies include waiting for a CPU (server CPU ms/request much less)."
        ]
    for run in runs:
        served = "; ".join(
            f"{m['id']}: {(m.get('decoding') or {}).get('describe')}, sha256 {str(m['sha256'])[:12]}"
            for m in run.get("served", [])
        )
        head.append(
            f"- {run['file']}: {run['label']} = {run['checkout']}"
            f"{' ' + run['commit'] if run.get('commit') else ''}, models "
            f"{', '.join(run['models'])}, serve args "
            f"{' '.join(run['serve_args']) or '(none)'}; {served}"
        )
    lines, result = checks(runs, a.old)
    text = "\n".join([*head, "", *table(runs), "", "Checks (issue 50, Done when):", *lines])
    print(text)
    (a.dir / "summary.json").write_text(
        json.dumps({"checks": result, "runs": [r["file"] for r in runs]}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
