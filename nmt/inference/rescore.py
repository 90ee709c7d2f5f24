"""The log-probabilities of given hypotheses, recomputed in fp32: what makes a bf16 search
batch-invariant.

A search under bf16 autocast picks its hypotheses with bf16 matrix products, whose
rounding depends on the other rows of the batch (the kernels block and reduce
differently for other row counts and source lengths): the same sentence decoded alone
and in a batch got n-best scores up to 1e-2 nats apart. fp32 products differ by about
1e-7 relative, so the scores recomputed here, by teacher-forcing each finished hypothesis
(its pieces and EOS) through ``model.encode`` / ``model.step`` with autocast off, agree
within 1e-5 nats whatever the batch, and the hypotheses are ranked by them.
"""

from __future__ import annotations

import torch

from nmt.data.vocab import BOS, EOS
from nmt.ops.int8 import int8_products


def autocast_on(device: torch.device) -> bool:
    """Whether autocast (bf16/fp16 matrix products) is active for ``device``'s type here.
    (An int8 search's products do not depend on the batch: nmt/ops/int8.py.)"""
    return torch.is_autocast_enabled(device.type)


@torch.inference_mode()
def fp32_log_probs(
    model, src: torch.Tensor, src_len: torch.Tensor, sentence: list[int], tokens: list[list[int]]
) -> tuple[list[float], list[torch.Tensor | None]]:
    """Teacher-forced fp32 log-probabilities of N hypotheses, each followed by EOS.

    Args:
        model: has ``encode(src, src_len) -> (mem, state)`` and ``step(prev (N,), state,
            mem) -> (log_probs (N, V), state, attention (N, S) or None)``; mem and state
            have ``index_select(idx)``.
        src: (B, S) source ids. src_len: (B,) lengths.
        sentence: (N,) the batch row of each hypothesis. tokens: N lists of target ids
            without BOS/EOS.

    Returns:
        (N totals ``log P(tokens, EOS | source)`` in nats, summed step by step in fp64;
        N attention tensors (len(tokens) + 1, src_len) on the CPU, or None for a model
        without attention).
    """
    dev = src.device
    if not tokens:
        return [], []
    lengths = torch.tensor([len(t) + 1 for t in tokens], device=dev)  # (N,) with EOS
    T = int(lengths.max())
    target = torch.full((len(tokens), T), EOS, dtype=torch.long, device=dev)  # (N, T)
    for i, seq in enumerate(tokens):
        if seq:
            target[i, : len(seq)] = torch.tensor(seq, dtype=torch.long, device=dev)
    rows = torch.tensor(sentence, dtype=torch.long, device=dev)
    with torch.autocast(dev.type, enabled=False), int8_products(False):
        mem, state = model.encode(src, src_len)
        mem, state = mem.index_select(rows), state.index_select(rows)
        prev = torch.full((len(tokens),), BOS, dtype=torch.long, device=dev)
        total = torch.zeros(len(tokens), dtype=torch.float64, device=dev)  # as the searches
        attn_all: torch.Tensor | None = None  # (N, T, S)
        for t in range(T):
            logp, state, attn = model.step(prev, state, mem)  # (N, V), (N, S) or None
            step_lp = logp.double().gather(1, target[:, t : t + 1]).squeeze(1)  # (N,)
            total += torch.where(t < lengths, step_lp, torch.zeros_like(step_lp))
            if attn is not None:
                if attn_all is None:
                    attn_all = attn.new_zeros(len(tokens), T, attn.size(1))
                attn_all[:, t] = attn
            prev = target[:, t]
    src_lens = src_len.tolist()
    cpu_attn = None if attn_all is None else attn_all.float().cpu()
    attentions = [
        None if cpu_attn is None else cpu_attn[i, : len(seq) + 1, : src_lens[sentence[i]]].clone()
        for i, seq in enumerate(tokens)
    ]
    return total.tolist(), attentions
