"""How many rows a block of each dtype needs, compiled deviceless for v5e and
v6e (what PAL401 and the compile hint say): 16-bit blocks compile with 8
rows like 32-bit ones; 8-bit blocks need 32 (Mosaic's E2002 below that)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pallas_lsp.runs.compile_mapping import HINTS

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "vmem_vs_compiler.py"


def _bench():
    spec = importlib.util.spec_from_file_location("vmem_vs_compiler", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
@pytest.mark.parametrize("dtype, rows, compiles", [
    ("bfloat16", 8, True), ("int16", 8, True), ("float32", 8, True),
    ("int8", 8, False), ("int8", 16, False), ("int8", 32, True), ("uint8", 16, False),
])
def test_block_rows_per_dtype(dtype, rows, compiles):
    import jax.numpy as jnp

    bench = _bench()
    fn, args = bench.window((128, 256), (rows, 128), lambda i: (i, 0), (128 // rows,),
                           jnp.dtype(dtype))
    (params, avals), = bench.launches(fn, args)
    for gen in ("v5e", "v6e"):
        used, _ = bench.compiled_vmem(params, avals, gen)
        assert isinstance(used, int) is compiles, (gen, used)


def test_the_hint_asks_8_rows_of_16_bit_blocks():
    hint = HINTS["block"]
    assert "16 and 128" not in hint
    assert "32 and 128 for 8-bit" in hint
