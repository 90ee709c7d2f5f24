"""One composition root per verb: train, evaluate, translate, study, heads, bench, select."""
