"""The encoder-decoder: alignment scorers, encoder, decoder, loss, the model factory, FLOP
counts, the checkpoint file, checkpoint averaging and the run directory's layout."""

from nmt.model.seq2seq import Seq2Seq, build_model, count_parameters

__all__ = ["Seq2Seq", "build_model", "count_parameters"]
