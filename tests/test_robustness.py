"""Arbitrary input never breaks the reader or the translator; NaN losses never overwrite
a good checkpoint."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config.load import from_dict
from nmt.data.batches import encode_pairs
from nmt.data.corpus import Pair, read_dir_split
from nmt.inference.translator import translate_lines
from nmt.training.loop import train
from nmt.training.state import TrainingError

from conftest import TOY_PAIRS, tiny_model, write_split

# any text without line breaks (those would make it several lines)
LINE = st.text(
    st.characters(
        blacklist_categories=["Cs"],
        blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    ),
    max_size=60,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(LINE, min_size=1, max_size=8))
def test_reader_keeps_one_pair_per_line_for_any_unicode(tmp_path_factory, lines):
    d = tmp_path_factory.mktemp("u")
    write_split(d, "train", "de", lines)
    write_split(d, "train", "en", list(reversed(lines)))
    pairs = read_dir_split(d, "train", "de", "en")
    assert len(pairs) == len(lines)
    for p in pairs:
        assert "\n" not in p.src and not any(ord(c) < 32 for c in p.src)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(LINE, min_size=1, max_size=6))
def test_translator_gives_one_single_line_output_per_input(toy_vocabs, lines):
    src_v, tgt_v = toy_vocabs
    model = tiny_model(src_v, tgt_v).eval()
    out = translate_lines(model, src_v, tgt_v, lines)
    assert len(out) == len(lines)
    for line, tr in zip(lines, out, strict=True):
        assert tr.source == line
        if not line.strip():
            assert tr.text == ""


def _toy_training(tmp_path, toy_vocabs, **train_overrides):
    cfg = from_dict(
        {
            "model": {
                "emb_dim": 16,
                "enc_hidden": 16,
                "dec_hidden": 32,
                "attn_dim": 16,
                "output_dim": 16,
            },
            "train": {
                "out_dir": str(tmp_path / "run"),
                "max_epochs": 3,
                "batch_size": 2,
                "progress": False,
                "precision": "fp32",
                **train_overrides,
            },
        }
    )
    examples = encode_pairs([Pair(s, t, "") for s, t in TOY_PAIRS], *toy_vocabs)
    model = tiny_model(*toy_vocabs)
    calls = {"n": 0}
    forward = model.forward

    def poisoned(*args, **kwargs):
        calls["n"] += model.training  # count training batches, not validation
        loss = forward(*args, **kwargs)
        return loss * float("nan") if model.training and calls["n"] == 5 else loss

    model.forward = poisoned
    logs: list[str] = []
    state = train(
        cfg,
        model,
        *toy_vocabs,
        train_set=examples,
        valid_examples=examples[:2],
        validate=lambda m: {"bleu": 1.0},
        log=logs.append,
    )
    return state, logs


@pytest.mark.slow
def test_nan_loss_stops_with_step_and_keeps_last_good_checkpoint(tmp_path, toy_vocabs):
    from nmt.model.checkpoint import read_payload

    with pytest.raises(TrainingError, match=r"loss is nan at step 5 \(epoch 2, batch 2\)"):
        _toy_training(tmp_path, toy_vocabs)
    payload = read_payload(tmp_path / "run" / "last.pt")
    assert payload["train_state"]["counters"]["step"] == 3  # end of epoch 1
    assert all(torch.isfinite(v).all() for v in payload["model"].values() if v.is_floating_point())


@pytest.mark.slow
def test_nan_loss_can_skip_the_batch(tmp_path, toy_vocabs):
    state, logs = _toy_training(tmp_path, toy_vocabs, on_nonfinite_loss="skip")
    assert state.skipped_batches == 1 and state.epoch == 3
    assert any("skipped batch 2 of epoch 2" in m for m in logs)
