"""Training step, reference architecture: deferred weight gradients on (the step weights'
gradients as one product each after the loop, nmt/ops/weight_grads.py) against off
(autograd's per-step products and adds).
  PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/defer_switch.py

Switch flipped: the decoder's ``defer_weight_grads`` attribute (the Decoder argument of that
name, default True), set on the model under test. Until ba82f16 it was the module global
nmt.decoder.DEFER_WEIGHT_GRADS, which the runs below set."""


def _set(on: bool):
    def enter(model):
        model.decoder.defer_weight_grads = on

    def leave(model):
        model.decoder.defer_weight_grads = True
    return enter, leave


VARIANTS = {"deferred (defer_weight_grads=True)": _set(True),
            "per step (defer_weight_grads=False)": _set(False)}
# 2026-12-01 14:43-14:45, 2-core AMD EPYC (AVX-512, avx512_bf16), 2 threads, nothing else
# running, nmt 8469d57 + nmt/ops/weight_grads.py (target tokens/s):
# PRECISION=fp32 python benchmarks/speed/ab/step_ab.py 30 benchmarks/speed/ab/defer_switch.py
# deferred: 2479, per step: 2424 (+2.3%)
# PRECISION=bf16 python benchmarks/speed/ab/step_ab.py 40 benchmarks/speed/ab/defer_switch.py
# deferred: 3944, per step: 3882 (+1.6%)
# Kept. (The prototype, ab/deferred_wgrad_bf16.py, also deferred the query projection W:
# +3.0% and +1-2%.)
# Again after the fresh-user check's fixes (detached pairs, cleared at the end of each
# backward pass), nmt 7a755c3, 15:39-15:42, same machine, nothing else running:
# fp32, 30 steps: deferred 2408, per step 2395 (+0.5%); 40 steps: 2427, 2394 (+1.4%)
# bf16, 40 steps: deferred 3884, per step 3853 (+0.8%)
# So +0.5% to +2.3% in fp32 and +0.8% to +1.6% in bf16: small, never negative.
