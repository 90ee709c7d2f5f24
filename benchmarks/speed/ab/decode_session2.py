"""Search: the flipped GEMM orientation for steps of <= 160 rows and the sigmoid-form
tanh, against both off (226fa03's search path).
  python benchmarks/speed/ab/dec_ab.py BEAM N ROUNDS benchmarks/speed/ab/decode_session2.py CKPT DATA_DIR

Switches flipped: nmt.ops.step_matmul.default_flip_rows (replaced by a constant; until
ba82f16 the module global nmt.decoder.FLIP_ROWS) and nmt.model.attention.tanh_, the
additive scorer's tanh (replaced by torch.tanh for "off"; until ba82f16 the module global
nmt.attention.FAST_TANH=False did that)."""
import torch

import nmt.model.attention as A
import nmt.ops.step_matmul as S

_sigmoid_tanh = A.tanh_  # 2 sigmoid(2x) - 1 in fp32, torch.tanh for other dtypes


def _set(flip_rows, tanh_new):
    def f():
        S.default_flip_rows = lambda: flip_rows
        A.tanh_ = _sigmoid_tanh if tanh_new else torch.tanh
    return f


VARIANTS = {"this session": _set(160, True), "flip only": _set(160, False),
            "neither (226fa03)": _set(0, False)}
