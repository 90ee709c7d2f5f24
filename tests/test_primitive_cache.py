"""The caps nmt puts on the bf16 kernel caches: set on import where unset, never overriding."""

import os
import subprocess
import sys

import pytest

from nmt.ops.primitive_cache import (
    DEFAULT_CAPACITY,
    VARIABLES,
    cap_primitive_caches,
    primitive_cache_capacities,
)


def test_unset_or_empty_variables_get_the_default_and_set_ones_are_kept():
    env = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024", "LRU_CACHE_CAPACITY": ""}
    cap_primitive_caches(env)
    assert env == {
        "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024",
        "LRU_CACHE_CAPACITY": str(DEFAULT_CAPACITY),
    }
    env = {}
    cap_primitive_caches(env)
    assert env == {v: str(DEFAULT_CAPACITY) for v in VARIABLES}
    assert primitive_cache_capacities({}) == {v: "" for v in VARIABLES}


@pytest.mark.parametrize("preset", [None, "7"])
def test_importing_nmt_sets_the_caps_before_torch_is_imported(preset):
    """Both libraries read the variable at their first bf16 product: the caps must be in
    the environment from the moment nmt is imported, before torch is (python -m nmt and the
    console command import nmt first)."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    if preset is not None:
        env["LRU_CACHE_CAPACITY"] = preset
    code = (
        "import os, sys, nmt\n"
        "assert 'torch' not in sys.modules\n"
        f"print([os.environ.get(v) for v in {VARIABLES!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    want = [str(DEFAULT_CAPACITY), preset or str(DEFAULT_CAPACITY)]
    assert out.stdout.strip() == repr(want)
