"""Caps on the two caches that keep bf16/fp16 CPU matrix-product kernels alive.

On a CPU, torch runs bf16/fp16 matrix products through oneDNN (fp32 ones through MKL). Each
distinct shape gets a primitive (JIT-compiled code and its descriptors), and two caches keep
it: oneDNN's primitive cache (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) and ideep's computation
cache in front of it (``LRU_CACHE_CAPACITY``), each 1,024 entries by default. A training
run meets hundreds of shapes a minute (most keyed by a batch's sentence count, 45-222 at
``max_tokens`` 2,000), so both fill up, and bf16 training held twice fp32's resident
memory. With both at :data:`DEFAULT_CAPACITY` bf16's peak resident memory fell 43% and the
training rate over a 60 s window did not fall (results/speed/2026-12-07-zen5-caches/), though
the shapes are then built again, about 26 builds a step against 14, 4% of a step on that
Zen 5 (results/speed/2026-12-07-zen5-builds/; a build cost 6-11x more on an AMX Xeon, where
the size is still to be chosen). Capping only oneDNN's cache, as tried before, leaves ideep's
holding the same primitives.

Both libraries read their variable once, at the process's first bf16/fp16 product, so a
training process sets the caps before it (:class:`nmt.training.loop.Trainer`, and ``nmt
bench`` when it measures training), only where the variable is unset or empty: a value in
the environment wins. The training process's own searches (validation, the final test) run
with them too. Search processes keep the libraries' default: a bf16 search (or int8 through
oneDNN) meets several hundred shapes too, and the caps cost it up to 18% there. Every ``nmt``
command checks the two variables first (:func:`check_primitive_caches`, from
:func:`nmt.cli.main`): ideep crashes the process on some values.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

DEFAULT_CAPACITY = 128
# with train.batch_trim (nmt/data/bucketing.py) a run meets few shapes: 482 in 160 steps, 662
# in 700 (2.2 epochs), built 3.1 and 1.6 times a step with 512 entries, against 26.7 untrimmed
# with 128; 512 held bf16's peak memory at 1.24x fp32's in one run, 1,024 at 1.29-1.32x
# (results/speed/2026-12-08-zen5-trim/)
TRIMMED_CAPACITY = 512
VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
# the smallest value each library takes: oneDNN reads 0 as "no cache"; ideep crashes the
# process (a segmentation fault) on 0, and on anything that is not a number, which it reads as 0
MINIMUM = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": 0, "LRU_CACHE_CAPACITY": 1}


def check_primitive_caches(environ: MutableMapping[str, str] = os.environ) -> None:
    """Refuse values of :data:`VARIABLES` the libraries would crash on or misread, before
    they read them; a variable set but empty is removed (unset, as shells write it: ideep
    would read it as 0).

    Raises:
        ValueError: a value that is not a whole number, or below the variable's
            :data:`MINIMUM`; the message names the variable and the value.
    """
    for name in VARIABLES:
        value = environ.get(name)
        if value is None:
            continue
        if not value.strip():
            del environ[name]
            continue
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < MINIMUM[name]:
            raise ValueError(
                f"{name}={value!r}: must be a whole number of at least {MINIMUM[name]} "
                f"(the kernel cache's entries; unset, nmt's training uses {DEFAULT_CAPACITY})"
            )


def cap_primitive_caches(
    environ: MutableMapping[str, str] = os.environ, *, trimmed: bool = False
) -> None:
    """Set each of :data:`VARIABLES` to :data:`DEFAULT_CAPACITY` (``trimmed``:
    :data:`TRIMMED_CAPACITY`) where ``environ`` has it unset or empty, after
    :func:`check_primitive_caches`. Effective only before the process's first bf16/fp16 CPU
    matrix product. ``trimmed``: the run's batches are trimmed (``train.batch_trim``), so its
    shapes are few and all of them fit.

    Raises:
        ValueError: from :func:`check_primitive_caches`.
    """
    check_primitive_caches(environ)
    capacity = TRIMMED_CAPACITY if trimmed else DEFAULT_CAPACITY
    for name in VARIABLES:
        if name not in environ:
            environ[name] = str(capacity)


def primitive_cache_capacities(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """What this process's environment says for each of :data:`VARIABLES` ("" if unset),
    for benchmark records: entries, as strings. Raises nothing."""
    return {name: environ.get(name, "") for name in VARIABLES}
