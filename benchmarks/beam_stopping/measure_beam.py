"""Beam search before/after the NMT-15 stopping rule, on test_2016_flickr: BLEU and speed.

Before = nmt/inference/search.py of commit BEFORE (stop at K finished); after = the working tree.
Decodes alternately old/new for ROUNDS rounds (timings), same checkpoint, same threads.
Usage: python measure_beam.py CKPT BEFORE_COMMIT OUT.json
"""
import importlib.util, json, subprocess, sys, time
from pathlib import Path

import torch

import nmt.inference.search as new_search
import nmt.inference.translate as tr
from nmt.model.checkpoint import load_checkpoint
from nmt.data.corpus import read_split
from nmt.evaluation.metrics import score

ckpt, before, out = sys.argv[1], sys.argv[2], sys.argv[3]
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
old_src = subprocess.run(["git", "show", f"{before}:nmt/inference/search.py"], capture_output=True,
                         text=True, check=True).stdout
Path("/tmp/old_search_nmt.py").write_text(old_src)
spec = importlib.util.spec_from_file_location("old_search_nmt", "/tmp/old_search_nmt.py")
old_search = importlib.util.module_from_spec(spec)
sys.modules["old_search_nmt"] = old_search
spec.loader.exec_module(old_search)
loaded = load_checkpoint(ckpt)
pairs = read_split(loaded.cfg.data, "test_2016_flickr")
src, ref = [p.src for p in pairs], [p.tgt for p in pairs]
results = {"checkpoint": ckpt, "before_commit": before, "threads": torch.get_num_threads(),
           "sentences": len(src), "runs": []}
for lp, alpha, rounds in (("gnmt", 0.6, 2), ("average", 0.6, 1)):
    dec = tr.Decoding(beam_size=5, length_penalty=lp, alpha=alpha,
                      max_ratio=loaded.cfg.train.max_output_ratio)
    for rnd in range(rounds):
        for name, mod in (("before", old_search), ("after", new_search)):
            tr.beam_search = mod.beam_search
            t0 = time.perf_counter()
            with torch.inference_mode():
                hyps = [t.text for t in tr.translate_lines(loaded.model, loaded.src_vocab,
                        loaded.tgt_vocab, src, batch_size=64, decoding=dec)]
            dt = time.perf_counter() - t0
            s = score(hyps, ref, src, ((1, None),))
            rec = {"length_penalty": lp, "alpha": alpha, "round": rnd + 1, "search": name,
                   "bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2),
                   "len_ratio": round(s.len_ratio, 4), "seconds": round(dt, 1),
                   "sentences_per_s": round(len(src) / dt, 1), "signature": s.signature}
            results["runs"].append(rec)
            print(json.dumps(rec), flush=True)
Path(out).write_text(json.dumps(results, indent=1))
