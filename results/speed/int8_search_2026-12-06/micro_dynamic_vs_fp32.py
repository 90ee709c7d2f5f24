import sys, time, torch, warnings
warnings.simplefilter("ignore")
from nmt.ops.step_matmul import step_addmm
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
for name, (N, K) in {"generator": (8000, 128), "hh": (768, 256)}.items():
    w = torch.randn(N, K) * 0.05; b = torch.randn(N) * 0.1
    s = w.abs().amax(1) / 127
    wi8 = torch.round(w / s[:, None]).to(torch.int8)
    pk = torch.ops.quantized.linear_prepack(torch.quantize_per_channel(w, s, torch.zeros(N, dtype=torch.long), 0, torch.qint8), b)
    for B in (5, 40, 160):
        x = torch.randn(B, K)
        with torch.inference_mode():
            fs = {"fp32": lambda: step_addmm(b, x, w), "dyn": lambda: torch.ops.quantized.linear_dynamic(x, pk, True),
                  "dynF": lambda: torch.ops.quantized.linear_dynamic(x, pk, False),
                  "wo": lambda: torch._weight_int8pack_mm(x, wi8, s) + b}
            ref = fs["fp32"]()
            errs = {k: ((f() - ref).abs().max() / ref.abs().max()).item() for k, f in fs.items()}
            res = {}
            for rep in range(3):
                for tag, f in fs.items():
                    n = max(20, 10000 // B)
                    t0 = time.perf_counter()
                    for _ in range(n): f()
                    res.setdefault(tag, []).append((time.perf_counter() - t0) / n * 1e6)
        print(name, B, " ".join(f"{k} {min(v):7.1f}us err {errs[k]:.4f} |" for k, v in res.items()))
