"""Search: the flipped GEMM orientation for steps of <= FLIP_ROWS rows and the sigmoid-form
tanh, against both off (226fa03's search path)."""
import nmt.model.attention, nmt.model.decoder

def _set(flip_rows, tanh_new):
    def f():
        nmt.model.decoder.FLIP_ROWS = flip_rows
        nmt.model.attention.FAST_TANH = tanh_new
    return f

VARIANTS = {"this session": _set(160, True), "flip only": _set(160, False),
            "neither (226fa03)": _set(0, False)}
