"""The encoder-decoder: alignment scorers, encoder, decoder, loss, the model factory, FLOP
counts, the checkpoint file, checkpoint averaging and the run directory's layout."""
