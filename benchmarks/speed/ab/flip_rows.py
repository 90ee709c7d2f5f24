"""Search: the row limit for the flipped GEMM orientation (nmt.ops.step_matmul.step_addmm).
  python benchmarks/speed/ab/dec_ab.py BEAM N ROUNDS benchmarks/speed/ab/flip_rows.py CKPT DATA_DIR

Switch flipped: nmt.ops.step_matmul.default_flip_rows, the limit step_addmm uses when its
caller passes no flip_rows (every search step does), replaced by a constant. Until ba82f16
it was the module global nmt.decoder.FLIP_ROWS (160, or 0 on AVX-512 CPUs)."""
import nmt.ops.step_matmul as S


def _set(n):
    def f():
        S.default_flip_rows = lambda: n
    return f


VARIANTS = {"FLIP_ROWS=160": _set(160), "FLIP_ROWS=400": _set(400), "FLIP_ROWS=0": _set(0)}
