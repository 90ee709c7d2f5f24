"""In-process A/B of decoding variants, alternating whole passes over the first N sentences
of test_2016_flickr (batches of 64, 2 threads), with the order flipped every round.
  python benchmarks/speed/ab/dec_ab.py BEAM N ROUNDS VARIANTS.py CHECKPOINT DATA_DIR
VARIANTS.py defines VARIANTS = {name: enter()}; DATA_DIR: the corpus directory (data.path),
e.g. ../shared/data/multi30k. The search precision is the checkpoint's search.precision
(auto: bf16 on a CPU with native bf16). Prints sentences/s per variant and whether the
outputs are identical."""

import importlib.util
import statistics
import sys
import time

import torch

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from nmt.data.corpus import read_split
from nmt.data.stored import stored_corpus
from nmt.inference.translate import Decoding
from nmt.inference.translator import translate_lines
from nmt.model.checkpoint import load_checkpoint

torch.set_num_threads(2)
beam, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
spec = importlib.util.spec_from_file_location("variants", sys.argv[4])
V = importlib.util.module_from_spec(spec)
spec.loader.exec_module(V)
ld = load_checkpoint(sys.argv[5], "cpu")
data = stored_corpus(ld.cfg.data, sys.argv[6])
src = [p.src for p in read_split(data, "test_2016_flickr", limit=n)]
dec = Decoding.from_config(ld.cfg, beam_size=beam)
args = (ld.model, ld.src_vocab, ld.tgt_vocab)
translate_lines(*args, src[:16], batch_size=64, decoding=dec)
times = {k: [] for k in V.VARIANTS}
outs = {}
for r in range(rounds):
    names = list(V.VARIANTS) if r % 2 == 0 else list(V.VARIANTS)[::-1]
    for k in names:
        V.VARIANTS[k]()
        t = time.perf_counter()
        out = translate_lines(*args, src, batch_size=64, decoding=dec)
        times[k].append(time.perf_counter() - t)
        outs[k] = [o.text for o in out]
for k in V.VARIANTS:
    print(
        f"beam {beam} {k}: median {n / statistics.median(times[k]):.1f} sent/s  (runs: {', '.join(f'{n / t:.0f}' for t in times[k])})"
    )
ks = list(outs)
print("identical output:", all(outs[k] == outs[ks[0]] for k in ks))
