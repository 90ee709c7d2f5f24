"""Caps on the two caches that keep bf16/fp16 CPU matrix-product kernels alive.

On a CPU, torch runs bf16/fp16 matrix products through oneDNN (fp32 ones through MKL). Each
distinct shape gets a primitive (JIT-compiled code and its descriptors), and two caches keep
it: oneDNN's primitive cache (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) and ideep's computation
cache in front of it (``LRU_CACHE_CAPACITY``), each 1,024 entries by default. A training
run meets hundreds of shapes a minute (the encoder's packed rows, one per real source token,
change with every batch), so both fill up, and bf16 training held twice fp32's resident
memory. With both at :data:`DEFAULT_CAPACITY` bf16's peak resident memory fell 43% and the
training rate over a 60 s window did not fall (results/speed/2026-12-07-zen5-caches/). Capping
only oneDNN's cache, as tried before, leaves ideep's holding the same primitives.

Both libraries read their variable once, at the process's first bf16/fp16 product, so a
training process sets the caps before it (:class:`nmt.training.loop.Trainer`, and ``nmt
bench`` when it measures training), only where the variable is unset or empty: a value in
the environment wins. Search processes keep the libraries' default: a bf16 search (or int8
through oneDNN) meets several hundred shapes too, and the caps cost it up to 18% there.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

DEFAULT_CAPACITY = 128
VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def cap_primitive_caches(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set each of :data:`VARIABLES` to :data:`DEFAULT_CAPACITY` where ``environ`` has it
    unset or empty. Effective only before the process's first bf16/fp16 CPU matrix product.
    Raises nothing."""
    for name in VARIABLES:
        if not environ.get(name):
            environ[name] = str(DEFAULT_CAPACITY)


def primitive_cache_capacities(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """What this process's environment says for each of :data:`VARIABLES` ("" if unset),
    for benchmark records."""
    return {name: environ.get(name, "") for name in VARIABLES}
