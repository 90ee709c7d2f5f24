"""Decoding: batches searched two at a time in threads of one CPU thread each (the default
of nmt.inference.translator.Translator on a 2-thread run) against one batch at a time on both
threads (as before).
  python benchmarks/speed/ab/dec_ab.py BEAM N ROUNDS benchmarks/speed/ab/workers.py CKPT DATA_DIR

Switch flipped: nmt.inference.translator.decode_workers, the name Translator.translate calls
(until 93dc835 nmt.translate.decode_workers, which translate_lines called)."""
import nmt.inference.translator

_auto = nmt.inference.translator.decode_workers


def _set(fn):
    def f():
        nmt.inference.translator.decode_workers = fn
    return f


VARIANTS = {"2 batches at once, 1 thread each": _set(_auto),
            "1 batch at a time, 2 threads": _set(lambda device, batches, workers=None, threads=None: 1)}
