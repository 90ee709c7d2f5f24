import ctypes, sys, tempfile, torch
sys.path.insert(0, "/work/main/benchmarks/speed")
from synthetic import synthetic_trainer
torch.set_num_threads(2)
je = ctypes.CDLL("libjemalloc.so.2")
prec, out = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as d:
    tr, model, batches = synthetic_trainer(d, [f"train.precision={prec}"])
    for b in batches[:20]:
        tr.train_step(b)
    fn = ctypes.c_char_p(out.encode())
    print("dump rc", je.mallctl(b"prof.dump", None, None, ctypes.byref(fn), ctypes.sizeof(fn)))
