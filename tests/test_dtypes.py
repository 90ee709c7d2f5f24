"""Dtypes are kept (shared/cases NMT-41): a float64 model computes in float64 through every
attention, the search and the loss, which makes ``torch.autograd.gradcheck`` possible;
only bf16/fp16 are taken to fp32 (masked softmax, the recurrent state, the loss)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import gradcheck
from torch.func import functional_call

from nmt.config.schema import ModelConfig
from nmt.inference.search import beam_search, greedy
from nmt.model.attention import Attention, masked_softmax
from nmt.model.attention_factory import build_attention
from nmt.model.loss import summed_cross_entropy
from nmt.model.seq2seq import build_model

KINDS = ["additive", "dot", "general", "scaled_dot", "local_m", "local_p", "multihead"]
B, S, D = 2, 5, 6  # D: decoder state and memory size alike (dot scores need them equal)


class _Read(nn.Module):
    """One attention read as a module, so that functional_call can swap its parameters."""

    def __init__(self, att: Attention, t: int):
        super().__init__()
        self.att, self.t = att, t

    def forward(self, query, memory, mask):
        context, weights, _heads = self.att.read(
            query, self.att.precompute(memory), memory, mask, self.t
        )
        return context, weights


def _build(kind: str) -> Attention:
    torch.manual_seed(0)
    att = build_attention(kind, D, D, 4, local_score="general", window=1, heads=2)
    assert isinstance(att, nn.Module)
    return att.double()


@pytest.mark.parametrize("kind", KINDS)
def test_nmt41_every_attention_runs_in_float64_and_passes_gradcheck(kind):
    read = _Read(_build(kind), t=1)
    torch.manual_seed(1)
    query = torch.randn(B, D, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(B, S, D, dtype=torch.float64, requires_grad=True)
    mask = torch.arange(S)[None, :] < torch.tensor([S, 3])[:, None]  # one padded sentence
    context, weights = read(query, memory, mask)
    assert context.dtype == weights.dtype == torch.float64
    names = [n for n, _ in read.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in read.named_parameters()]

    def f(q, m, *ps):
        return functional_call(read, dict(zip(names, ps, strict=True)), (q, m, mask))

    assert gradcheck(f, (query, memory, *params), eps=1e-6, atol=1e-6, fast_mode=True)


@pytest.mark.parametrize("kind", [*KINDS, "none"])
def test_nmt41_a_float64_model_keeps_float64_through_decoder_and_loss(kind):
    cfg = ModelConfig(
        emb_dim=4,
        enc_hidden=3,
        dec_hidden=6,
        attn_dim=4,
        output_dim=4,
        dropout=0.0,
        attention=kind,
        heads=2,
        local_window=1,
    )
    torch.manual_seed(0)
    model = build_model(cfg, 9, 9).double().eval()
    src, lens = torch.tensor([[4, 5, 6, 3], [7, 3, 0, 0]]), torch.tensor([4, 2])
    tgt_in, tgt_out = torch.tensor([[2, 6, 7], [2, 5, 0]]), torch.tensor([[6, 7, 3], [5, 3, 0]])
    loss = model(src, lens, tgt_in, tgt_out)
    assert loss.dtype == torch.float64
    logits, attn = model.logits(src, lens, tgt_in)
    assert logits.dtype == torch.float64 and (attn is None or attn.dtype == torch.float64)
    # the whole model's gradient (the fixed-vector model's too: its decoder has parameters)
    names = [
        "generator.weight",
        *[n for n, _ in model.decoder.named_parameters(prefix="decoder") if "attention" in n][:4],
    ]
    base = dict(model.named_parameters())
    params = [base[n].detach().clone().requires_grad_() for n in names]

    def f(*ps):
        return functional_call(
            model, dict(zip(names, ps, strict=True)), (src, lens, tgt_in, tgt_out)
        )

    assert gradcheck(f, tuple(params), eps=1e-6, atol=1e-6, fast_mode=True)


def test_the_loss_keeps_float64_and_equals_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(7, 11, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([4, 5, 0, 6, 10, 3, 0])  # PAD (0) rows add nothing
    loss = summed_cross_entropy(logits, target, 0.1)
    ref = F.cross_entropy(logits, target, ignore_index=0, label_smoothing=0.1, reduction="sum")
    assert loss.dtype == torch.float64
    assert loss.item() == pytest.approx(ref.item(), rel=1e-13)
    assert gradcheck(lambda x: summed_cross_entropy(x, target, 0.1), (logits,), fast_mode=True)


def test_search_in_float64_scores_with_float64_log_probabilities():
    cfg = ModelConfig(
        emb_dim=8,
        enc_hidden=4,
        dec_hidden=8,
        attn_dim=8,
        output_dim=8,
        dropout=0.0,
        attention="additive",
    )
    torch.manual_seed(0)
    model = build_model(cfg, 12, 12).double().eval()
    src, lens = torch.tensor([[4, 5, 6, 3]]), torch.tensor([4])
    for hyp in [greedy(model, src, lens)[0], beam_search(model, src, lens, beam_size=3)[0][0]]:
        pieces = hyp.tokens + ([3] if hyp.complete else [])
        tgt_in = torch.tensor([[2, *pieces[:-1]]])
        with torch.no_grad():
            logp = F.log_softmax(model.logits(src, lens, tgt_in)[0], dim=-1)[0]
        exact = logp.gather(1, torch.tensor(pieces)[:, None]).sum().item()
        assert logp.dtype == torch.float64
        # an fp32 step anywhere would be off by ~1e-7
        assert hyp.log_prob == pytest.approx(exact, abs=1e-12)


def test_only_half_precision_scores_are_upcast():
    mask = torch.tensor([[True, True, False]])
    for dtype, want in [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
    ]:
        w = masked_softmax(torch.tensor([[1.0, 2.0, 3.0]], dtype=dtype), mask)
        assert w.dtype == want and w[0, 2] == 0


def test_case_nmt41_script_imports_and_runs_in_float64():
    """shared/cases/NMT-41's check_double.py as written: the package-level names it imports
    (nmt.config.ModelConfig, nmt.model.build_model) and a float64 forward per attention."""
    from nmt.config import ModelConfig
    from nmt.model import build_model

    for kind in ("additive", "dot", "general", "scaled_dot", "none"):
        cfg = ModelConfig(
            emb_dim=8,
            enc_hidden=4,
            dec_hidden=8,
            attn_dim=8,
            output_dim=8,
            dropout=0.0,
            attention=kind,
        )
        model = build_model(cfg, 20, 20).double().eval()
        out = model(
            torch.tensor([[3, 4, 5, 2]]),
            torch.tensor([4]),
            torch.tensor([[1, 6, 7]]),
            torch.tensor([[6, 7, 2]]),
        )
        assert out.dtype == torch.float64, kind
