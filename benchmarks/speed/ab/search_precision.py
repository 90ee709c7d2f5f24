"""In-process A/B of the search precision (search.precision fp32 against bf16), passes
alternating over the first N sentences of a split (batches of 64, 2 threads, the CPU's
default decode workers), then BLEU of each and how many hypotheses are identical.
  python benchmarks/speed/ab/search_precision.py BEAM N ROUNDS CHECKPOINT DATA_DIR [SPLIT]"""

import dataclasses
import statistics
import sys
import time

import torch

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
import sacrebleu

from nmt.data.corpus import read_split
from nmt.data.stored import stored_corpus
from nmt.inference.translate import Decoding
from nmt.inference.translator import translate_lines
from nmt.model.checkpoint import load_checkpoint

torch.set_num_threads(2)
beam, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
split = sys.argv[6] if len(sys.argv) > 6 else "test_2016_flickr"
ld = load_checkpoint(sys.argv[4], "cpu")
data = stored_corpus(ld.cfg.data, sys.argv[5])
pairs = read_split(data, split, limit=n)
src, ref = [p.src for p in pairs], [p.tgt for p in pairs]
base = Decoding.from_config(ld.cfg, beam_size=beam)
decs = {p: dataclasses.replace(base, precision=p) for p in ("fp32", "bf16")}
args = (ld.model, ld.src_vocab, ld.tgt_vocab)
for d in decs.values():
    translate_lines(*args, src[:16], batch_size=64, decoding=d)
times = {k: [] for k in decs}
outs = {}
for r in range(rounds):
    for k in list(decs) if r % 2 == 0 else list(decs)[::-1]:
        t = time.perf_counter()
        out = translate_lines(*args, src, batch_size=64, decoding=decs[k])
        times[k].append(time.perf_counter() - t)
        outs[k] = [o.text for o in out]
for k in decs:
    bleu = sacrebleu.corpus_bleu(outs[k], [ref])
    print(
        f"{split} beam {beam} {k}: median {n / statistics.median(times[k]):.1f} sent/s "
        f"(runs: {', '.join(f'{n / t:.0f}' for t in times[k])})  BLEU {bleu.score:.2f}"
    )
same = sum(a == b for a, b in zip(outs["fp32"], outs["bf16"], strict=True))
print(f"identical hypotheses: {same}/{n}")
