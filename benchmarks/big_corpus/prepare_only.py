"""Prepare the arrow training store of a config and nothing else (to measure its peak
memory apart from training): the same cache `nmt train` would prepare, in
{out_dir}/data/, which a following `nmt train` with the same config then reuses.

    python benchmarks/big_corpus/prepare_only.py CONFIG [key=value ...]
"""

import sys

from nmt.config.load import load_config
from nmt.data.store import open_or_prepare
from nmt.data.training_data import sample_vocab_trainer


def main() -> None:
    cfg = load_config(sys.argv[1], sys.argv[2:])
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731 (a one-line script helper)
    opened = open_or_prepare(
        cfg,
        cfg.out_dir() / "data",
        vocabs=None,
        make_vocabs=sample_vocab_trainer(cfg, log),
        log=log,
    )
    src_tok, tgt_tok = opened.train_set.token_counts()
    log(
        f"store: {len(opened.train_set):,} pairs, {src_tok:,} source and {tgt_tok:,} target "
        f"pieces; reused: {opened.reused}"
    )


if __name__ == "__main__":
    main()
