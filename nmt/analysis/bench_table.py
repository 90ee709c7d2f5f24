"""The table ``nmt bench`` prints: machine, decoding and training rows from a bench result
(the dict :func:`nmt.commands.bench.run_bench` returns, also written as JSON)."""

from __future__ import annotations

from typing import Any


def threads_text(n: int) -> str:
    """``1 thread`` or ``N threads``."""
    return f"{n} thread{'' if n == 1 else 's'}"


def _at_once(dec: dict[str, Any]) -> str:
    """``, 2 at once (1 thread each)`` where batches were decoded in parallel (``, 2
    processes at once (1 thread each)`` with ``--processes``); older reports without the
    fields say nothing."""
    workers = dec.get("workers", 1)
    if workers == 1:
        return ""
    kind = " processes" if dec.get("processes") else ""
    return f", {workers}{kind} at once ({threads_text(dec['threads_per_worker'])} each)"


def _fraction(phase: dict[str, Any]) -> str:
    shown = [
        f"{phase[f'fraction_of_{k}_peak']:.0%} of the {k} peak"
        for k in ("fp32", "bf16")
        if phase.get(f"fraction_of_{k}_peak") is not None
    ]
    return f"{phase['achieved_gflop_s']:,.1f} GFLOP/s = {', '.join(shown)}"


def _train_rows(tr: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for phase, label in (
        (tr["fixed_steps"], f"{tr['fixed_steps']['steps']} steps"),
        (tr["window"], f"{tr['window_seconds_asked']:g} s window"),
    ):
        if phase is None:
            continue
        if label.endswith("window"):
            label += f" ({phase['steps']} step{'' if phase['steps'] == 1 else 's'})"
        rows += [
            (
                f"training, {label}: target / source tokens/s",
                f"{phase['target_tokens_per_s']:,.0f} / {phase['source_tokens_per_s']:,.0f}",
            ),
            (f"training, {label}: achieved", _fraction(phase)),
        ]
    pad = tr["padding_fraction"]
    return rows + [
        ("training precision (matrix multiplies)", tr["precision"]),
        (
            "padding fraction of those batches, source / target",
            f"{pad['source']:.3f} / {pad['target']:.3f}",
        ),
        (
            "FLOPs per target token, one training step (analytic)",
            f"{tr['flops_per_target_token'] / 1e6:.2f} MFLOP (source/target tokens "
            f"{tr['source_per_target_token']:.3f}, {tr['attended_positions_per_target_token']:.1f}"
            " source positions per target token)",
        ),
        ("peak memory, training", f"{tr['peak_memory_mib']:,.0f} MiB"),
    ]


def format_table(result: dict[str, Any]) -> str:
    """The Markdown table ``nmt bench`` prints, with a heading naming model and machine."""
    m, peak = result["machine"], result["matmul_peak_gflop_s"]

    def yes(flag: object) -> str:
        return "yes" if flag else "no"

    lines = [
        f"nmt bench {result['source']} ({result['kind']}: {result['name']}, "
        f"{result['attention']} attention, {result['parameters']:,} parameters)",
        f"machine: {m['device_name']}, {m['logical_cores']} logical cores, AVX-512 "
        f"{yes(m['avx512f'])}, bf16 {yes(m['cpu_bf16'])} (avx512_bf16 "
        f"{yes(m['avx512_bf16'])}, amx_bf16 {yes(m['amx_bf16'])}); torch {m['torch']}, "
        f"{threads_text(m['torch_threads'])}, device {m['device']}",
        "",
        "| measure | value |",
        "| --- | --- |",
    ]
    rows = [
        (
            f"matmul peak, {peak['shape']}, fp32 / bf16",
            f"{peak['fp32']:,.1f} / "
            + ("not measured (no bf16 here)" if peak["bf16"] is None else f"{peak['bf16']:,.1f}")
            + " GFLOP/s",
        )
    ]
    if result["train"] is not None:
        rows += _train_rows(result["train"])
    dec = result["decode"]
    if dec is not None:
        for run in dec.values():
            if isinstance(run, dict):
                rows.append(
                    (
                        f"{run['search']}, {dec['split']}, {dec['sentences']} sentences, "
                        f"batches of {dec['batch_size']}{_at_once(dec)}",
                        f"{run['sentences_per_s']:,.1f} sentences/s{_passes(run)}, "
                        f"BLEU {run['bleu']:.2f}"
                        f" ({run['output_pieces_per_sentence']:.1f} pieces/sentence)",
                    )
                )
        memory = f"{dec['peak_memory_mib']:,.0f} MiB"
        if dec.get("search_processes_peak_mib"):
            each = " / ".join(f"{m:,.0f}" for m in dec["search_processes_peak_mib"])
            memory += f" (this process; each search process {each} MiB)"
        rows.append(("peak memory, decoding", memory))
    lines += [f"| {a} | {b} |" for a, b in rows]
    if dec is not None:
        lines += ["", f"BLEU signature: {dec['greedy']['bleu_signature']}"]
        if not dec["bleu_meaningful"]:
            lines.append(
                "note: a CONFIG is measured with fresh, untrained weights: its BLEU is "
                "about 0 and is only meaningful for a checkpoint; it also decodes to "
                "the length limit, slower than a trained model"
            )
    return "\n".join(lines)


def _passes(run: dict[str, Any]) -> str:
    """How a search's rate was taken: the median of its passes and their range (a JSON from
    before ``--search-passes`` has one pass and no ``pass_seconds``)."""
    passes = run.get("pass_seconds") or []
    if len(passes) < 2:
        return ""
    return f" (median of {len(passes)} passes, {min(passes):.3f}-{max(passes):.3f} s each)"
