import sys, time, random, dataclasses, tempfile, torch
from nmt.config_load import load_config
from nmt.model import build_model
from nmt.data import Example, make_batches
from nmt.train import Trainer
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
mode = sys.argv[3] if len(sys.argv) > 3 else "time"
cfg = load_config("configs/bench_reference.yaml", list(sys.argv[4:]))
rng = random.Random(0)
ex = []
for i in range(6000):
    s = max(2, int(rng.gauss(15, 5))); t = max(2, int(s * rng.uniform(0.8, 1.1)))
    ex.append(Example([rng.randrange(4, 8000) for _ in range(s)] + [3], [rng.randrange(4, 8000) for _ in range(t)], i))
batches = make_batches(ex, cfg.train.batch_size, cfg.train.max_tokens, shuffle_seed=1)
torch.manual_seed(1)
model = build_model(cfg.model, 8000, 8000)
with tempfile.TemporaryDirectory() as d:
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, out_dir=d, device="cpu"))
    tr = Trainer(cfg, model, None, None, [], [], lambda m: {}, log=lambda m: None)
    model.train()
    for b in batches[:3]: tr.train_step(b)
    if mode == "prof":
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for b in batches[3:3+steps]: tr.train_step(b)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    else:
        t0 = time.perf_counter(); c0 = time.process_time(); tok = 0
        for b in batches[3:3+steps]: tok += tr.train_step(b)
        print(f"{tok/(time.perf_counter()-t0):.0f} target tok/s wall, {tok/(time.process_time()-c0):.0f} per CPU-second over {steps} steps")
