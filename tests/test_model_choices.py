"""Model choices for small data (issue 28, item 4): a residual N-layer encoder
(``model.enc_residual``), tied target embeddings and output layer (``model.tie_embeddings``)
and Nematus's conditional GRU decoder (``model.step_order: cgru``). Each is off by default,
leaving the default model as it was; each changes the model as its formula says, has the
right gradients (float64 finite differences, and the deferred weight-gradient path against
plain autograd), trains, searches and round-trips through a checkpoint."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace
from typing import Any, get_args

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from nmt.config.load import from_dict
from nmt.config.schema import ATTENTION_TYPES, ConfigError, ModelConfig, StepOrder
from nmt.data.batches import collate, encode_pairs
from nmt.data.corpus import Pair
from nmt.inference.search import beam_search, greedy
from nmt.model.average import average_checkpoints
from nmt.model.cgru import CGRUDecoder
from nmt.model.checkpoint import load_checkpoint, make_payload, save_atomic
from nmt.model.decoder import Decoder
from nmt.model.encoder import Encoder, EncoderOutput
from nmt.model.flops import forward_macs
from nmt.model.seq2seq import build_model, count_parameters

from conftest import TOY_PAIRS, tiny_model

# tiny_model's sizes, for configs written out in full
SIZES: dict[str, Any] = dict(emb_dim=16, enc_hidden=16, dec_hidden=32, attn_dim=16, output_dim=16)
CHOICES: dict[str, dict[str, Any]] = {
    "enc_residual": dict(enc_layers=2, enc_residual=True),
    "tie_embeddings": dict(tie_embeddings=True),
    "cgru": dict(step_order="cgru"),
    "all": dict(
        enc_layers=3, enc_residual=True, tie_embeddings=True, step_order="cgru", dec_layers=2
    ),
}


def _batch(src_vocab, tgt_vocab):
    return collate(encode_pairs([Pair(s, t, "") for s, t in TOY_PAIRS], src_vocab, tgt_vocab))


# --- defaults: nothing changes ------------------------------------------------------------

DEFAULT_KEYS = [
    "encoder.embed.weight",
    "encoder.rnn.weight_ih_l0",
    "encoder.rnn.weight_hh_l0",
    "encoder.rnn.bias_ih_l0",
    "encoder.rnn.bias_hh_l0",
    "encoder.rnn.weight_ih_l0_reverse",
    "encoder.rnn.weight_hh_l0_reverse",
    "encoder.rnn.bias_ih_l0_reverse",
    "encoder.rnn.bias_hh_l0_reverse",
    "decoder.embed.weight",
    "decoder.scorer.W.weight",
    "decoder.scorer.U.weight",
    "decoder.scorer.U.bias",
    "decoder.scorer.v.weight",
    "decoder.init.weight",
    "decoder.init.bias",
    "decoder.cells.0.weight_ih",
    "decoder.cells.0.weight_hh",
    "decoder.cells.0.bias_ih",
    "decoder.cells.0.bias_hh",
    "decoder.pre_output.weight",
    "decoder.pre_output.bias",
    "generator.weight",
    "generator.bias",
]


def test_new_keys_are_off_by_default_and_leave_the_default_model_as_it_was(toy_vocabs):
    cfg = ModelConfig()
    assert (cfg.enc_residual, cfg.tie_embeddings, cfg.step_order) == (False, False, "bahdanau")
    default = tiny_model(*toy_vocabs)
    off = tiny_model(*toy_vocabs, enc_residual=False, tie_embeddings=False, step_order="bahdanau")
    assert list(default.state_dict()) == DEFAULT_KEYS  # the names before these options
    assert type(default.decoder) is Decoder and default.encoder.layers is None
    for (k, a), b in zip(default.state_dict().items(), off.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


# --- model.enc_residual ---------------------------------------------------------------------


def test_residual_needs_two_encoder_layers_naming_the_option():
    with pytest.raises(
        ConfigError,
        match=r"^model.enc_residual: needs model.enc_layers >= 2, "
        r"got 1$",
    ):
        from_dict({"model": {"enc_residual": True}})
    assert from_dict({"model": {"enc_residual": True, "enc_layers": 2}}).model.enc_residual
    with pytest.raises(ValueError, match="model.enc_residual"):
        Encoder(10, 4, 4, 1, 0.0, residual=True)


def test_residual_encoder_has_the_stacked_encoders_parameters_and_initial_values(toy_vocabs):
    stacked = tiny_model(*toy_vocabs, enc_layers=3)
    residual = tiny_model(*toy_vocabs, enc_layers=3, enc_residual=True)
    assert count_parameters(residual) == count_parameters(stacked)
    ref = stacked.state_dict()
    for key, value in residual.state_dict().items():
        if key.startswith("encoder.layers."):  # encoder.layers.1.weight_ih_l0_reverse
            _, _, layer, name = key.split(".")
            key = f"encoder.rnn.{name.replace('_l0', f'_l{layer}')}"
        assert torch.equal(ref.pop(key), value), key
    assert not ref


def test_residual_encoder_adds_each_upper_layers_input_to_its_output(toy_vocabs):
    model = tiny_model(*toy_vocabs, enc_layers=3, enc_residual=True).eval()
    enc = model.encoder
    batch = _batch(*toy_vocabs)
    with torch.no_grad():
        out = enc(batch.src, batch.src_len)
        for b, n in enumerate(batch.src_len.tolist()):
            x, _ = enc.layers[0](enc.embed(batch.src[b : b + 1, :n]))  # (1, n, 2H)
            for rnn in enc.layers[1:]:
                y, h_n = rnn(x)
                x = y + x  # x_{l+1} = BiGRU_l(x_l) + x_l
            torch.testing.assert_close(out.memory[b, :n], x[0])
            assert (out.memory[b, n:] == 0).all()
            torch.testing.assert_close(out.final[b], torch.cat([h_n[0, 0], h_n[1, 0]]))
        stacked = tiny_model(*toy_vocabs, enc_layers=3).eval()  # the same weights
        plain = stacked.encoder(batch.src, batch.src_len)
    assert not torch.allclose(plain.memory, out.memory, atol=1e-3)


# --- model.tie_embeddings -------------------------------------------------------------------


def test_tying_mismatched_sizes_is_refused_naming_both_keys():
    with pytest.raises(
        ConfigError,
        match=r"^model.tie_embeddings: needs model.output_dim "
        r"\(24\) == model.emb_dim \(16\)$",
    ):
        from_dict({"model": {"tie_embeddings": True, "output_dim": 24, "emb_dim": 16}})


def _untied_copy(model):
    """A copy whose generator has its own parameter, equal to the shared one now."""
    untied = copy.deepcopy(model)
    untied.generator.weight = nn.Parameter(untied.decoder.embed.weight.detach().clone())
    return untied


@pytest.mark.parametrize("order", get_args(StepOrder))
@pytest.mark.parametrize("defer", [False, True])
def test_tied_weights_gradient_is_the_sum_of_both_uses(toy_vocabs, order, defer):
    model = tiny_model(*toy_vocabs, tie_embeddings=True, step_order=order).train()
    assert model.generator.weight is model.decoder.embed.weight
    untied = _untied_copy(model)
    batch = _batch(*toy_vocabs)
    for m in (model, untied):
        m.decoder.defer_weight_grads = defer
        m(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
    shared = model.decoder.embed.weight.grad
    both = untied.decoder.embed.weight.grad + untied.generator.weight.grad
    torch.testing.assert_close(shared, both, rtol=1e-5, atol=1e-6)
    # both uses contribute: neither alone is the gradient
    assert not torch.allclose(shared, untied.generator.weight.grad, atol=1e-4)
    assert not torch.allclose(shared, untied.decoder.embed.weight.grad, atol=1e-4)


@pytest.mark.parametrize("defer", [False, True])
def test_tied_weight_gradient_matches_float64_finite_differences(defer):
    """torch.func.functional_call substitutes the one shared tensor for both names, so the
    finite differences move the embedding and the output layer together."""
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(
            emb_dim=3,
            enc_hidden=2,
            dec_hidden=4,
            attn_dim=3,
            output_dim=3,
            dropout=0.0,
            tie_embeddings=True,
            step_order="cgru",
        ),
        8,
        7,
    ).double()
    model.decoder.defer_weight_grads = defer
    src, src_len = torch.tensor([[4, 5, 6], [7, 4, 0]]), torch.tensor([3, 2])
    tgt_in, tgt_out = torch.tensor([[1, 4, 5], [1, 6, 0]]), torch.tensor([[4, 5, 2], [6, 2, 0]])

    def loss(w):
        logits, _ = _with_params(
            model, ["decoder.embed.weight"], [w], lambda: model.logits(src, src_len, tgt_in)
        )
        return F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0, reduction="sum"
        )

    w = model.decoder.embed.weight.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(w), w)
    assert (g[3:] != 0).all()  # w really is what the model reads (not trivially zero)
    assert torch.autograd.gradcheck(loss, (w,), eps=1e-6, atol=1e-6, rtol=1e-4)


def _save(tmp_path, name, model, toy_vocabs, run_id=None, **choice):
    cfg = from_dict({"model": {**SIZES, "dropout": 0.0, **choice}})
    path = tmp_path / f"{name}.pt"
    save_atomic(make_payload(cfg, model, *toy_vocabs, run_id=run_id), path)
    return path


def test_tied_checkpoints_load_and_average_still_tied(toy_vocabs, tmp_path):
    paths = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = build_model(
            ModelConfig(**SIZES, dropout=0.0, tie_embeddings=True),
            len(toy_vocabs[0]),
            len(toy_vocabs[1]),
        )
        # two checkpoints of one run (nmt average refuses checkpoints of different runs)
        paths.append(
            _save(tmp_path, f"m{seed}", model, toy_vocabs, run_id="run-1", tie_embeddings=True)
        )
        payload = torch.load(paths[-1], weights_only=True)
        # both names are in the file, as one tensor
        assert (
            payload["model"]["generator.weight"].data_ptr()
            == payload["model"]["decoder.embed.weight"].data_ptr()
        )
        loaded = load_checkpoint(paths[-1]).model
        assert loaded.generator.weight is loaded.decoder.embed.weight
        assert torch.equal(loaded.generator.weight, model.generator.weight)
    averaged = average_checkpoints(paths)
    save_atomic(averaged, tmp_path / "avg.pt")
    model = load_checkpoint(tmp_path / "avg.pt").model
    assert model.generator.weight is model.decoder.embed.weight
    mean = (
        sum(
            torch.load(p, weights_only=True)["model"]["decoder.embed.weight"].double()
            for p in paths
        )
        / 2
    )
    assert torch.equal(model.generator.weight, mean.float())


# --- model.step_order: cgru -----------------------------------------------------------------


def test_a_decoder_class_refuses_the_other_classes_step_order():
    args = (20, 4, 8, 1, 8, "additive")
    with pytest.raises(
        ValueError,
        match=r"^model.step_order: Decoder computes bahdanau or "
        r"luong, not 'cgru'$",
    ):
        Decoder(*args, "cgru", 4, 4, 0.0)
    with pytest.raises(ValueError, match="model.step_order: CGRUDecoder computes cgru"):
        CGRUDecoder(*args, "bahdanau", 4, 4, 0.0)


def test_cgru_step_is_nematus_conditional_gru(toy_vocabs):
    """One step against the equations written with torch's own GRU cells: s' = GRU_1(E y,
    s), c = ATT(C, s'), s_new = GRU_2(c, s'), t = tanh(W_o [s_new; c; E y] + b_o)."""
    model = tiny_model(*toy_vocabs, step_order="cgru").eval()
    dec = model.decoder
    assert isinstance(dec, CGRUDecoder) and dec.scorer is not None
    batch = _batch(*toy_vocabs)
    with torch.no_grad():
        mem, state = model.encode(batch.src, batch.src_len)
        prev = batch.tgt_in[:, 1]
        out = dec.step(prev, state, mem)
        y = dec.embed(prev)
        s_mid = dec.cells[0](y, state.hidden[0])
        context, weights, _ = dec.scorer.read(s_mid, mem.keys, mem.memory, mem.mask, 0)
        s_new = dec.cond(context, s_mid)
        t = torch.tanh(dec.pre_output(torch.cat([s_new, context, y], -1)))
    torch.testing.assert_close(out.pre_output, t)
    torch.testing.assert_close(out.state.hidden[0], s_new)
    torch.testing.assert_close(out.attention, weights)
    assert out.state.feed is None and out.state.t == 1


def test_cgru_has_one_recurrent_matrix_more_than_bahdanau(toy_vocabs):
    D = 32
    for extra in ({}, {"dec_layers": 2}, {"attention": "none"}):
        cgru = tiny_model(*toy_vocabs, step_order="cgru", **extra)
        bahdanau = tiny_model(*toy_vocabs, **extra)
        # GRU_1 3D (E + D) + 6D, GRU_2 3D (M + D) + 6D against one cell's 3D (E + M + D) + 6D
        assert count_parameters(cgru) - count_parameters(bahdanau) == 3 * D * D + 2 * 3 * D
        assert dict(cgru.named_parameters())["decoder.cells.0.weight_ih"].shape == (3 * D, 16)
        assert dict(cgru.named_parameters())["decoder.cond.weight_ih"].shape == (3 * D, 32)


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_cgru_shapes_and_attention_for_every_attention(toy_vocabs, attention):
    model = tiny_model(
        *toy_vocabs,
        attention=attention,
        step_order="cgru",
        dec_layers=2 if attention == "additive" else 1,
        heads=2,
        dec_hidden=32,
    ).eval()
    batch = _batch(*toy_vocabs)
    B, T = batch.tgt_in.shape
    S = batch.src.size(1)
    with torch.no_grad():
        logits, weights = model.logits(batch.src, batch.src_len, batch.tgt_in)
    assert logits.shape == (B, T, len(toy_vocabs[1]))
    if attention == "none":
        assert weights is None
        return
    assert weights.shape == (B, T, S)
    assert (weights[(batch.src == 0)[:, None, :].expand(B, T, S)] == 0).all()
    if attention != "local_p":  # local_p's Gaussian makes its rows sum to less than 1
        torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))


@pytest.mark.parametrize("attention", ATTENTION_TYPES)
def test_cgru_deferred_weight_gradients_equal_autograds(toy_vocabs, attention):
    model = tiny_model(
        *toy_vocabs,
        attention=attention,
        step_order="cgru",
        heads=2,
        dec_layers=2 if attention == "additive" else 1,
    ).train()
    batch = _batch(*toy_vocabs)
    grads = {}
    for defer in (False, True):
        model.decoder.defer_weight_grads = defer
        model.zero_grad()
        model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
        grads[defer] = {
            n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None
        }
    assert set(grads[True]) == set(grads[False])
    for name, g in grads[False].items():

        def message(m: str, name: str = name) -> str:
            return f"{name}: {m}"

        torch.testing.assert_close(grads[True][name], g, rtol=1e-5, atol=1e-6, msg=message)
    for name in (
        "decoder.cells.0.weight_hh",
        "decoder.cond.weight_hh",
        "decoder.cond.weight_ih",
        "decoder.pre_output.weight",
    ):
        assert grads[True][name].abs().sum() > 0, name  # the deferred ones, all four


@pytest.mark.parametrize(
    "attention,defer",
    [
        ("additive", False),
        ("additive", True),
        ("general", True),
        ("multihead", True),
        ("local_p", True),
        ("none", True),
    ],
)
def test_cgru_gradients_match_float64_finite_differences(attention, defer):
    """Every decoder parameter and the encoder memory, in float64 (the attention keeps
    float64: ops.precision.at_least_fp32). The whole Jacobian for additive attention;
    for the others a random projection of it (gradcheck's fast mode), to keep the test
    quick."""
    torch.manual_seed(0)
    dec = CGRUDecoder(9, 3, 4, 1, 4, attention, "cgru", 3, 3, 0.0, heads=2, window=1).double()
    dec.defer_weight_grads = defer
    names = [n for n, _ in dec.named_parameters()]
    memory = torch.randn(2, 3, 4, dtype=torch.float64)
    final = torch.randn(2, 4, dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    memory[1, 2] = 0
    tgt_in = torch.tensor([[1, 5, 6], [1, 7, 8]])  # no PAD: its embedding row gets no gradient

    def pre_outputs(memory, final, *params):
        def run():
            mem, state = dec.start(EncoderOutput(memory, final, mask))
            return dec.unroll(tgt_in, state, mem)[0]  # (B, T, O)

        return _with_params(dec, names, params, run)

    inputs = (
        memory.requires_grad_(),
        final.requires_grad_(),
        *[p.detach().clone().requires_grad_() for p in dec.parameters()],
    )
    grads = torch.autograd.grad(pre_outputs(*inputs).sum(), inputs, allow_unused=True)
    # every input is read, so the check is not trivially zero (none reads no memory)
    read = grads[1:] if attention == "none" else grads
    assert all(g is not None and g.abs().sum() > 0 for g in read)
    assert torch.autograd.gradcheck(
        pre_outputs, inputs, eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=attention != "additive"
    )


def _with_params(module, names, params, fn):
    """``fn()`` with ``module``'s parameters ``names`` replaced by ``params``; a tied
    parameter's other names follow (functional_call's tie_weights)."""

    class Call(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self):
            return fn()

    return functional_call(Call(), {f"m.{n}": p for n, p in zip(names, params, strict=True)}, ())


# --- every choice ---------------------------------------------------------------------------


@pytest.mark.parametrize("choice", list(CHOICES))
def test_each_choice_trains_on_a_toy_batch(toy_vocabs, choice):
    model = tiny_model(*toy_vocabs, **CHOICES[choice]).train()
    batch = _batch(*toy_vocabs)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        loss = model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out) / batch.n_tokens
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("choice", list(CHOICES))
def test_each_choice_round_trips_through_a_checkpoint(toy_vocabs, tmp_path, choice):
    model = tiny_model(*toy_vocabs, **CHOICES[choice]).eval()
    loaded = load_checkpoint(_save(tmp_path, "m", model, toy_vocabs, **CHOICES[choice])).model
    assert type(loaded.decoder) is type(model.decoder)
    batch = _batch(*toy_vocabs)
    with torch.no_grad():
        a, wa = model.logits(batch.src, batch.src_len, batch.tgt_in)
        b, wb = loaded.logits(batch.src, batch.src_len, batch.tgt_in)
    assert wa is not None and wb is not None
    assert torch.equal(a, b) and torch.equal(wa, wb)
    assert [h.tokens for h in greedy(model, batch.src, batch.src_len)] == [
        h.tokens for h in greedy(loaded, batch.src, batch.src_len)
    ]


@pytest.mark.parametrize("choice", list(CHOICES))
def test_flops_count_every_weight_matrix_once_per_token(choice):
    """As tests/test_bench.py's check, for the new choices: the per-token MACs equal the
    weight-matrix entries of the built model (embeddings, the initial state and additive
    attention's v left out by design); a tied generator is still one O x V product."""
    fields: dict[str, Any] = {
        **dict(emb_dim=8, enc_hidden=16, dec_hidden=24, attn_dim=12, output_dim=10),
        **CHOICES[choice],
        **({"output_dim": 8} if "tie_embeddings" in CHOICES[choice] else {}),
    }
    cfg = ModelConfig(**fields)
    model = build_model(cfg, 50, 60)
    per_sentence = ("embed.weight", "decoder.init.", "decoder.fixed.")
    matrices = sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.dim() == 2
        and not any(s in name for s in per_sentence)
        and not name.endswith("scorer.v.weight")
    )
    if cfg.tie_embeddings:  # named once, as decoder.embed.weight, but used as the generator
        matrices += model.generator.weight.numel()
    macs = forward_macs(cfg, tgt_vocab_size=60)
    assert sum(macs.per_source_token.values()) + sum(macs.per_target_token.values()) == matrices
    if cfg.step_order == "cgru":
        D, E, M = 24, cfg.emb_dim, 32
        above = 3 * D * 2 * D * (cfg.dec_layers - 1)
        assert macs.per_target_token["decoder_gru"] == 3 * D * (E + D) + 3 * D * (M + D) + above


def test_cgru_beam_of_one_is_greedy_and_batched_beam_is_each_sentence_alone(toy_vocabs):
    from test_search import _trained

    model, batch = _trained(toy_vocabs, "additive", "cgru"), _batch(*toy_vocabs)
    g = greedy(model, batch.src, batch.src_len)
    for gh, (bh,) in zip(
        g,
        beam_search(model, batch.src, batch.src_len, beam_size=1, length_penalty="none"),
        strict=True,
    ):
        assert bh.tokens == gh.tokens
        assert bh.log_prob == pytest.approx(gh.log_prob, abs=1e-5)
        torch.testing.assert_close(bh.attention, gh.attention, atol=1e-6, rtol=0)
    batched = beam_search(model, batch.src, batch.src_len, beam_size=3, n_best=3)
    for i, n in enumerate(batch.src_len.tolist()):
        alone = beam_search(
            model, batch.src[i : i + 1, :n], batch.src_len[i : i + 1], beam_size=3, n_best=3
        )[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        for h in batched[i]:
            assert h.attention is not None
            assert h.attention.size(1) == n  # (steps, real source pieces)


def test_cgru_translate_attention_prints_alignments(toy_vocabs, tmp_path, capsys):
    """``nmt translate --attention`` (its filter) with a conditional GRU model."""
    from test_search import _trained

    from nmt.commands.translate import run_filter
    from nmt.inference.translate import Decoding
    from nmt.inference.translator import Translator

    model = _trained(toy_vocabs, "additive", "cgru")
    cfg = SimpleNamespace(
        model=SimpleNamespace(attention="additive"),
        data=SimpleNamespace(src_lang="de", tgt_lang="en"),
    )
    loaded = SimpleNamespace(model=model, src_vocab=toy_vocabs[0], tgt_vocab=toy_vocabs[1], cfg=cfg)
    src, out = tmp_path / "in.de", tmp_path / "out.en"
    src.write_text("".join(s + "\n" for s, _ in TOY_PAIRS[:2]), encoding="utf-8")
    translator = Translator.from_loaded(loaded, decoding=Decoding(beam_size=3), batch_size=2)
    run_filter(translator, input_path=src, output_path=out, show_attention=True)
    err = capsys.readouterr().err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    assert "<-" in err and TOY_PAIRS[0][0] in err


def test_cgru_bf16_training_casts_its_weights_once_per_batch(toy_vocabs):
    from test_precision import _CastCounter

    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v, step_order="cgru")
    D = model.decoder.hidden
    src, src_len = torch.randint(4, len(src_v), (3, 5)), torch.tensor([5, 4, 3])
    counts = []
    for T in (3, 9):
        tgt = torch.randint(4, len(tgt_v), (3, T + 1))
        mode = _CastCounter(min_numel=D * D)
        with mode, torch.autocast("cpu", dtype=torch.bfloat16):
            model(src, src_len, tgt[:, :-1], tgt[:, 1:]).backward()
        counts.append(mode.casts)
    assert counts[0] == counts[1] > 0


def test_tied_model_starts_near_the_uniform_loss():
    """The shared matrix is initialised for the output layer (N(0, 1/O)): the initial
    cross-entropy is near log V, as an untied model's, not several nats above it (N(0, 1)
    embeddings as logits weights give logits of variance about O)."""
    vocab = 1000
    sizes: dict[str, Any] = dict(
        emb_dim=128, enc_hidden=64, dec_hidden=128, attn_dim=64, output_dim=128
    )
    src = torch.randint(4, vocab, (8, 12))
    tgt = torch.randint(4, vocab, (8, 11))
    losses = {}
    for tied in (False, True):
        torch.manual_seed(0)
        model = build_model(ModelConfig(**sizes, dropout=0.0, tie_embeddings=tied), vocab, vocab)
        with torch.no_grad():
            logits, _ = model.logits(src, torch.full((8,), 12), tgt[:, :-1])
            losses[tied] = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten()).item()
        if tied:
            assert not model.decoder.embed.weight[0].any()  # the padding row
    assert abs(losses[True] - math.log(vocab)) < 0.5, losses
    assert abs(losses[True] - losses[False]) < 0.5, losses
