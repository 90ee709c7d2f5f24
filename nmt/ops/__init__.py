"""Low-level pieces the model and search run on: training/search precision, device choice,
block-maxima top-k, deferred weight gradients of a recurrent loop."""
