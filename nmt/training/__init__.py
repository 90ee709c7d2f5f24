"""The training loop (teacher forcing, validation, early stopping, resume, DDP) and
learning-rate schedules. Knows nothing of search or evaluation."""
