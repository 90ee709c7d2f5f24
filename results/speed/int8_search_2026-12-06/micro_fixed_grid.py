import sys, time, torch, warnings
warnings.simplefilter("ignore")
from nmt.ops.step_matmul import step_addmm
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
for name, (N, K) in {"generator": (8000, 128), "hh": (768, 256)}.items():
    w = torch.randn(N, K) * 0.05; b = torch.randn(N) * 0.1
    s = w.abs().amax(1) / 127
    pk = torch.ops.quantized.linear_prepack(torch.quantize_per_channel(w, s.double(), torch.zeros(N, dtype=torch.long), 0, torch.qint8), b)
    st = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32
    for B in (5, 64, 320):
        x = torch.tanh(torch.randn(B, K) * 2)
        with torch.inference_mode():
            fs = {"fp32": lambda: step_addmm(b, x, w), "dyn": lambda: torch.ops.quantized.linear_dynamic(x, pk, True),
                  "static7": lambda: st(x, 2.0 / 126, 64, pk), "static8": lambda: st(x, 2.0 / 254, 128, pk)}
            ref = fs["fp32"]()
            errs = {k: ((f() - ref).abs().max() / ref.abs().max()).item() for k, f in fs.items()}
            # batch invariance: row 0 alone
            inv = {k: (f() [:1] - (lambda xx: {"fp32": step_addmm(b, xx, w), "dyn": torch.ops.quantized.linear_dynamic(xx, pk, True), "static7": st(xx, 2.0/126, 64, pk), "static8": st(xx, 2.0/254, 128, pk)}[k])(x[:1].contiguous())).abs().max().item() for k, f in fs.items()}
            res = {}
            for rep in range(3):
                for tag, f in fs.items():
                    n = max(20, 8000 // B)
                    t0 = time.perf_counter()
                    for _ in range(n): f()
                    res.setdefault(tag, []).append((time.perf_counter() - t0) / n * 1e6)
        print(name, B, " ".join(f"{k} {min(v):7.1f}us err {errs[k]:.4f} inv {inv[k]:.1e}|" for k, v in res.items()), flush=True)
