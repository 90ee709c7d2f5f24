"""From text to batches: reading corpora, SentencePiece vocabularies, joined long-sentence
sets, examples and length-bucketed batches, the on-disk training store."""
