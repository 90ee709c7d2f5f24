"""Decoding: greedy and beam search, and the Translator that turns source strings into
hypotheses."""
