"""Scoring without torch: sacreBLEU BLEU and chrF, BLEU by length bucket, bootstrap
intervals, plots."""
