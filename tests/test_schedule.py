"""Learning-rate schedules."""

import math

import torch

from nmt.config.schema import TrainConfig
from nmt.training.schedule import Schedule


def _opt(lr=1e-3):
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_constant_never_changes():
    opt = _opt()
    s = Schedule(opt, TrainConfig())
    for _ in range(10):
        s.after_step()
        s.after_validation(1.0)
    assert opt.param_groups[0]["lr"] == 1e-3


def test_plateau_halves_after_patience_validations_without_gain():
    opt = _opt()
    s = Schedule(opt, TrainConfig(lr_schedule="plateau", lr_decay=0.5, lr_patience=2, min_lr=2e-4))
    lrs = []
    for bleu in [10, 20, 20, 20, 19, 18, 17, 16, 15]:
        s.after_validation(bleu)
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[:3] == [1e-3, 1e-3, 1e-3]
    assert lrs[3] == 5e-4  # two validations without a gain
    assert min(lrs) == 2e-4  # floored at min_lr


def test_warmup_then_inverse_sqrt_decay_and_resume():
    opt = _opt()
    cfg = TrainConfig(lr_schedule="warmup_decay", warmup_steps=4, min_lr=0.0)
    s = Schedule(opt, cfg)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(15):
        opt.step()
        s.after_step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[:4] == [2.5e-4, 5e-4, 7.5e-4, 1e-3]
    assert math.isclose(lrs[15], 1e-3 * math.sqrt(4 / 16))
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:], strict=False))
    opt2 = _opt()
    s2 = Schedule(opt2, cfg)
    opt2.load_state_dict(opt.state_dict())  # a resumed run restores both, as train.py does
    s2.load_state_dict(s.state_dict())
    opt2.step()
    s2.after_step()
    opt.step()
    s.after_step()
    assert math.isclose(opt2.param_groups[0]["lr"], opt.param_groups[0]["lr"])
