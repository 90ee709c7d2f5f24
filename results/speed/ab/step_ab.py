"""In-process A/B of training-step variants, interleaved step by step, so that the machine's
drift (a shared, noisy 2-core VM) falls on every variant alike.
  python results/speed/ab/step_ab.py STEPS VARIANTS.py
VARIANTS.py defines VARIANTS = {name: (enter(model), leave(model))}; random batches of the
reference architecture (configs/bench_reference.yaml), 2 threads."""
import sys, time, random, dataclasses, tempfile, importlib.util, torch
ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from nmt.config_load import load_config
from nmt.model import build_model
from nmt.data import Example, make_batches
from nmt.train import Trainer
torch.set_num_threads(2)
steps = int(sys.argv[1])
spec = importlib.util.spec_from_file_location("variants", sys.argv[2]); V = importlib.util.module_from_spec(spec); spec.loader.exec_module(V)
cfg = load_config(str(ROOT / "configs/bench_reference.yaml"), [])
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
    names = list(V.VARIANTS)
    tot = {n: [0.0, 0] for n in names}
    for b in batches[:2]:
        for n in names:
            V.VARIANTS[n][0](model); tr.train_step(b); V.VARIANTS[n][1](model)
    for k, b in enumerate(batches[2:2 + steps]):
        order = names if k % 2 == 0 else names[::-1]
        for n in order:
            V.VARIANTS[n][0](model)
            t0 = time.perf_counter(); tok = tr.train_step(b); dt = time.perf_counter() - t0
            V.VARIANTS[n][1](model)
            tot[n][0] += dt; tot[n][1] += tok
    for n in names:
        print(f"{n}: {tot[n][1]/tot[n][0]:.0f} target tok/s over {steps} steps")
