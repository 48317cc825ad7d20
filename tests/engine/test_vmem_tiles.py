"""engine/vmem.py's padding and minimums, each figure the scoped VMEM that
libtpu 0.0.42 reported for the kernel (deviceless, v5e and v6e alike; the
kernels are benchmarks/vmem_vs_compiler.py's cases of the same name, and
tests/compile/test_vmem_model.py compiles them again)."""
from __future__ import annotations

import pytest

from pallas_lsp.engine import vmem


@pytest.mark.parametrize("rows, itemsize, want", [
    (1, 4, 1), (2, 4, 2), (3, 4, 4), (5, 4, 8),  # f32: XLA tiles T(1,128), T(2,128), T(4,128)
    (1, 2, 2), (3, 2, 4), (8, 2, 8), (12, 2, 16),  # bf16: two rows a sublane, 8-row multiples
    (1, 1, 4), (2, 1, 4), (5, 1, 8), (33, 1, 40),  # int8: four rows a sublane
])
def test_tile_rows(rows, itemsize, want):
    assert vmem.tile_rows(rows, itemsize) == want


def _block(shape, dtype, count):
    return vmem.estimate([vmem.Need("b", "block", shape, dtype, count)]).total


def test_a_squeezed_dim_keeps_its_row():
    # "squeezed rows bf16 (4,None,128)": four one-row bf16 tiles of two rows, 2 KiB a
    # buffer (a (4, 128) bf16 buffer would be 1 KiB); in and out, double-buffered: 8 KiB.
    assert vmem.padded_bytes((4, None, 128), 2) == 2048
    assert vmem.padded_bytes((4, 128), 2) == 1024
    assert 2 * _block((4, None, 128), "bfloat16", 2) == 8192
    # "squeezed rows f32 (None,1,None,128)": 512 bytes a buffer, so 1 KiB for two
    assert 2 * _block((None, 1, None, 128), "float32", 2) == 2048


def test_one_row_f32_is_not_padded_to_two():
    # "whole f32 (1,1024)": 4 KiB each for the input and the output
    assert 2 * _block((1, 1024), "float32", 1) == 8192
    # "one row f32 (4,1,256)"
    assert 2 * _block((4, 1, 256), "float32", 2) == 16384


def test_a_blocks_buffers_take_one_kib_at_least():
    # "Buffered(1) f32 (1,1,128)": the single 512-byte input buffer reserves 1 KiB, the
    # double-buffered output 1 KiB: 2,048 (not 1,536)
    assert _block((1, 1, 128), "float32", 1) == 1024
    assert _block((1, 1, 128), "float32", 2) == 1024
    # "1-D f32 (128,) x4"
    assert 2 * _block((128,), "float32", 2) == 2048


def test_scratch_has_no_minimum():
    # "one-row scratch carried, no minimum": blocks 2,048 plus the scratch's 512
    needs = [vmem.Need("in", "block", (1, 1, 128), "float32", 2),
             vmem.Need("out", "block", (1, 1, 128), "float32", 2),
             vmem.Need("acc", "scratch", (1, 1, 128), "float32", 1)]
    assert vmem.estimate(needs).total == 2560


def test_the_engine_keeps_a_squeezed_dim_for_vmem():
    import textwrap

    from pallas_lsp.engine.interp import Interpreter
    from pallas_lsp.engine.rules import _tpu
    from pallas_lsp.engine.source import parse

    src = textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl

        def copy(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        def test_it():
            x = jnp.zeros((16, 1, 128), jnp.bfloat16)
            return pl.pallas_call(
                copy, out_shape=jax.ShapeDtypeStruct((16, 1, 128), jnp.bfloat16), grid=(4,),
                in_specs=[pl.BlockSpec((4, None, 128), lambda i: (i, 0, 0))],
                out_specs=pl.BlockSpec((4, pl.Squeezed(), 128), lambda i: (i, 0, 0)))(x)
        """)
    it = Interpreter(parse(src), "snippet.py")
    it.run()
    (lv,) = [lv for lv in _tpu.vmem_rows(it.events) if lv.launch.operands is not None]
    # "squeezed rows bf16 (4,None,128)": 8,192 as the compiler counts it (4,096 were the
    # squeezed dim dropped); the kernel's Refs are still (4, 128)
    assert [p.shape for p in lv.estimate.parts] == [(4, 1, 128), (4, 1, 128)]
    assert sum(p.bytes_each * p.count for p in lv.estimate.parts) == 8192
    # ...with row-major layouts pinned. Left free (as a real call's are: a v5e chip said so),
    # XLA lays bf16[16,1,128] out as (16, 128) tiles in VMEM itself and the kernel reports 0
    assert lv.estimate.total == 0 and lv.estimate.exact
    assert all("XLA lays the array out in VMEM" in p.why for p in lv.estimate.parts)
