"""Decoding: batches searched two at a time in threads of one CPU thread each (the default
of nmt.inference.translate.translate_lines on a 2-thread run) against one batch at a time on both
threads (as before)."""
import nmt.inference.translate

_auto = nmt.inference.translate.decode_workers


def _set(fn):
    def f():
        nmt.inference.translate.decode_workers = fn
    return f


VARIANTS = {"2 batches at once, 1 thread each": _set(_auto),
            "1 batch at a time, 2 threads": _set(lambda device, batches, workers=None: 1)}
