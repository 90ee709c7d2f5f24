"""Search: the row limit for the flipped GEMM orientation (nmt.model.decoder.FLIP_ROWS)."""
import nmt.model.decoder

def _set(n):
    def f():
        nmt.model.decoder.FLIP_ROWS = n
    return f

VARIANTS = {"FLIP_ROWS=160": _set(160), "FLIP_ROWS=400": _set(400), "FLIP_ROWS=0": _set(0)}
