"""The encoder-decoder: alignment scorers, encoder, decoder, loss, the model factory, FLOP
counts and the checkpoint file."""
