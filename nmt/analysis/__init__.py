"""Measurements of trained models that several verbs compose: what attention heads look at
and how they agree with reference word alignments, choosing a checkpoint and length penalty
on validation, and the speed of training and decoding (``nmt heads``, ``nmt select``,
``nmt bench``)."""
