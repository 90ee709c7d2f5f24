"""``nmt translate`` front ends: an interactive prompt on a terminal, a line filter otherwise.
Always one output line per input line, in order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from nmt.checkpoint import Loaded
from nmt.translate import Translation, strongest_alignment, translate_lines


def _attention_lines(tr: Translation) -> list[str]:
    if tr.attention is None:
        return ["  (no attention: the fixed-vector model reads one context vector)"] if tr.text else []
    return [f"  {tgt:>14} <- {src:<14} {w:.2f}" for tgt, src, w in strongest_alignment(tr)]


def _one_line(text: str) -> str:
    # a translation must never add lines: keep the one-line-in, one-line-out contract
    return " ".join(text.split())


def run_interactive(loaded: Loaded, show_attention: bool, stdin: TextIO = sys.stdin,
                    stdout: TextIO = sys.stdout) -> None:
    """Prompt, translate each line, print; empty lines are skipped; Ctrl-D/Ctrl-C quit."""
    d = loaded.cfg.data
    stdout.write(f"nmt {d.src_lang}->{d.tgt_lang} ({loaded.cfg.model.attention} attention). "
                 "Type a sentence; Ctrl-D to quit.\n")
    while True:
        stdout.write("> ")
        stdout.flush()
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            line = ""
        if not line:
            stdout.write("\n")
            return
        if not line.strip():
            continue
        tr = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, [line],
                             max_ratio=loaded.cfg.train.max_output_ratio)[0]
        if tr.truncated:
            stdout.write("(warning: input cut to the first 400 pieces)\n")
        stdout.write(_one_line(tr.text) + "\n")
        if show_attention:
            stdout.write("\n".join(_attention_lines(tr)) + "\n")


def run_filter(loaded: Loaded, input_path: Path | None, output_path: Path | None,
               show_attention: bool, batch_size: int = 64) -> None:
    """Translate every line of ``input_path`` (or stdin) to ``output_path`` (or stdout).

    With ``show_attention`` the alignments go to stderr so stdout keeps one line per input.
    """
    if input_path is not None:
        with open(input_path, encoding="utf-8", errors="replace", newline=None) as f:
            lines = f.read().splitlines()
    else:
        lines = sys.stdin.read().splitlines()
    results = translate_lines(loaded.model, loaded.src_vocab, loaded.tgt_vocab, lines,
                              batch_size=batch_size, max_ratio=loaded.cfg.train.max_output_ratio)
    n_cut = sum(t.truncated for t in results)
    if n_cut:
        print(f"warning: {n_cut} input line(s) cut to the first 400 pieces", file=sys.stderr)
    out = open(output_path, "w", encoding="utf-8") if output_path else sys.stdout
    try:
        for tr in results:
            out.write(_one_line(tr.text) + "\n")
            if show_attention:
                print("\n".join([tr.source.strip()] + _attention_lines(tr)), file=sys.stderr)
    finally:
        if output_path:
            out.close()
