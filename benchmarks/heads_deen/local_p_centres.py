"""The window centres p_t that a local_p model predicts while it translates one sentence
greedily (docs/attention_heads.md, "What changed with convergence").

Run from the repository root after `nmt study configs/study_deen_long.yaml` (the 913-step
model, the default) or with a converged one's checkpoint as the argument:
    .venv/bin/python benchmarks/heads_deen/local_p_centres.py > results/heads_deen/local_p_centres.txt
    .venv/bin/python benchmarks/heads_deen/local_p_centres.py runs/deen_conv_local_p/best.pt
"""

import sys

import torch

from nmt.data.batches import Example, collate
from nmt.data.vocab import EOS
from nmt.inference.search import greedy
from nmt.model.checkpoint import load_checkpoint

SENTENCE = "Eine Frau mit einem roten Hut sitzt am Ufer des Flusses und liest ein Buch."
CHECKPOINT = sys.argv[1] if len(sys.argv) > 1 else "runs/deen_long_local_p/best.pt"
loaded = load_checkpoint(CHECKPOINT, torch.device("cpu"))
model = loaded.model.eval()
ids = loaded.src_vocab.encode(SENTENCE) + [EOS]
batch = collate([Example(ids, [], 0)])
attention = model.decoder.scorer
centres = []
predict = attention.centre


def recording_centre(query, mask, t):
    p = predict(query, mask, t)
    centres.append(float(p[0]))
    return p


attention.centre = recording_centre
hyp = greedy(model, batch.src, batch.src_len)[0]
print(f"source: {SENTENCE}")
print(f"source pieces S = {len(ids)} (with </s>), window D = {attention.window}")
print(f"hypothesis: {loaded.tgt_vocab.decode(hyp.tokens)}")
for t, (piece, p) in enumerate(
    zip([loaded.tgt_vocab.id_to_piece(x) for x in hyp.tokens] + ["</s>"], centres, strict=False)
):
    diagonal = t * (len(ids) - 1) / max(len(hyp.tokens), 1)
    print(f"t={t:2d} {piece:>12s}  p_t = {p:5.1f}   diagonal {diagonal:5.1f}")
