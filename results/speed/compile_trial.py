import time, torch, sys
from nmt.config import ModelConfig
from nmt.model import build_model
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = ModelConfig(emb_dim=256, enc_hidden=256, dec_hidden=512, attention="additive", step_order="luong", attn_dim=512, output_dim=512, dropout=0.2)
m = build_model(cfg, 8000, 8000)
B, S, T = 128, 16, 15
src = torch.randint(4, 8000, (B, S)); src_len = torch.full((B,), S)
tgt = torch.randint(4, 8000, (B, T))
def run(model, n=4):
    c0 = time.process_time()
    for _ in range(n):
        loss = model(src, src_len, tgt, tgt)
        loss.backward()
    return (time.process_time() - c0) / n
m.train()
print("eager train step CPU-s:", run(m, 1), run(m))
if sys.argv[1] == "compile":
    t0 = time.time()
    m.decoder._step = torch.compile(m.decoder._step, dynamic=True)
    run(m, 1)
    print("compile time", time.time() - t0)
    print("compiled train step CPU-s:", run(m), run(m))
