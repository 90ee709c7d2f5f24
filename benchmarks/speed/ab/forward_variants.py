"""For the training A/B variant files (step_ab.py): VARIANTS entries that swap
Seq2Seq.forward for the time of a step and put the package's own back after it."""
import nmt.model.seq2seq as M

NOW = M.Seq2Seq.forward


def variants(named: dict) -> dict:
    """{name: forward function} -> {name: (enter(model), leave(model))}."""
    def use(fwd):
        def enter(model):
            M.Seq2Seq.forward = fwd
        return enter

    def leave(model):
        M.Seq2Seq.forward = NOW

    return {name: (use(fwd), leave) for name, fwd in named.items()}
