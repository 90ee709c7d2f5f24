"""Search with a generator without bias (model.output_bias: false): its logits through
step_addmm (the flipped GEMM orientation for few rows, now) against plain F.linear (what
Seq2Seq.step_logits did for a bias-less generator before 2026-12-01-c)."""
import nmt.model as M

_now = M.Seq2Seq.step_logits


def _linear(self, pre_output):
    return self.generator(pre_output)


def _set(f):
    def g():
        M.Seq2Seq.step_logits = f
    return g


VARIANTS = {"step_addmm, flipped (now)": _set(_now), "F.linear (before)": _set(_linear)}
