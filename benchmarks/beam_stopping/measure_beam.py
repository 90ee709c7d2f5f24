"""Beam search before/after the NMT-15 stopping rule, on test_2016_flickr: BLEU and speed.

Before = nmt/search.py of commit BEFORE (stop at K finished), loaded from git with its
imports renamed to today's layout (benchmarks/old_code.py); after = today's
nmt.inference.search. Decodes alternately old/new for ROUNDS rounds (timings), same
checkpoint, same threads. Switch flipped: nmt.inference.translator.beam_search, the name
the Translator's search calls.

    python benchmarks/beam_stopping/measure_beam.py CKPT BEFORE_COMMIT OUT.json [THREADS]

The recorded run (results/beam_stopping/) wrote OUT.json there:
    python benchmarks/beam_stopping/measure_beam.py runs/deen_long_additive/best.pt \\
        8765b605873b34df966af4fb28997d0872dfc1d7 results/beam_stopping/deen_long_additive_test2016.json 1
"""

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
from old_code import module_at

import nmt.inference.search as new_search
import nmt.inference.translator as tr
from nmt.data.corpus import read_split
from nmt.evaluation.metrics import score
from nmt.inference.translate import Decoding
from nmt.model.checkpoint import load_checkpoint


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if argv[:1] in (["-h"], ["--help"]) else 2)
    ckpt, before, out = argv[0], argv[1], argv[2]
    torch.set_num_threads(int(argv[3]) if len(argv) > 3 else 1)
    # the path at that commit: before issue 26 the search lived in nmt/search.py
    old_search = module_at(before, "nmt/search.py", "old_search_nmt")
    loaded = load_checkpoint(ckpt)
    pairs = read_split(loaded.cfg.data, "test_2016_flickr")
    src, ref = [p.src for p in pairs], [p.tgt for p in pairs]
    results = {
        "checkpoint": ckpt,
        "before_commit": before,
        "threads": torch.get_num_threads(),
        "sentences": len(src),
        "runs": [],
    }
    for lp, alpha, rounds in (("gnmt", 0.6, 2), ("average", 0.6, 1)):
        # fp32 matrix products, as when this was recorded (search.precision did not exist)
        dec = Decoding(
            beam_size=5,
            length_penalty=lp,
            alpha=alpha,
            max_ratio=loaded.cfg.train.max_output_ratio,
            precision="fp32",
        )
        for rnd in range(rounds):
            for name, mod in (("before", old_search), ("after", new_search)):
                tr.beam_search = mod.beam_search
                t0 = time.perf_counter()
                with torch.inference_mode():
                    hyps = [
                        t.text
                        for t in tr.translate_lines(
                            loaded.model,
                            loaded.src_vocab,
                            loaded.tgt_vocab,
                            src,
                            batch_size=64,
                            decoding=dec,
                        )
                    ]
                dt = time.perf_counter() - t0
                s = score(hyps, ref, src, ((1, None),))
                rec = {
                    "length_penalty": lp,
                    "alpha": alpha,
                    "round": rnd + 1,
                    "search": name,
                    "bleu": round(s.bleu, 2),
                    "chrf": round(s.chrf, 2),
                    "len_ratio": round(s.len_ratio, 4),
                    "seconds": round(dt, 1),
                    "sentences_per_s": round(len(src) / dt, 1),
                    "signature": s.signature,
                }
                results["runs"].append(rec)
                print(json.dumps(rec), flush=True)
    tr.beam_search = new_search.beam_search
    Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
