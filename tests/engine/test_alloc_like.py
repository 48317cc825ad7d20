"""`pltpu.VMEM.like(x)` (and the other memory spaces' `.like`): a scratch
buffer of x's shape and dtype, as jax 0.10.2's `MemorySpace.like` makes it.
Before, the buffer was Unknown and the DMAs using it unknown to coverage."""
from __future__ import annotations

import pytest

from pallas_lsp.engine.model import Ref, Space
from tests.engine.conftest import run

KERNEL = '''
x = jnp.zeros((8, 128), jnp.float32)


@pl.kernel(out_type=x, mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
           scratch_types=dict(buf=LIKE, sem=pltpu.SemaphoreType.DMA))
def kernel(x_hbm, o_hbm, *, buf, sem):
    pltpu.async_copy(x_hbm, buf, sem).wait()
    pltpu.sync_copy(buf, o_hbm)


kernel(x)
'''


def _buf(like: str):
    analysis, _ = run(KERNEL.replace("LIKE", like))
    values = [n.value for n in analysis.lazy["names"]() if n.name == "buf"]
    assert values
    return values[0]


@pytest.mark.parametrize("like, space, shape, dtype", [
    ("pltpu.VMEM.like(x)", Space.VMEM, (8, 128), "float32"),
    ("pltpu.SMEM.like(jax.ShapeDtypeStruct((4,), jnp.int32))", Space.SMEM, (4,), "int32"),
    ("pltpu.MemorySpace.VMEM.like(x.astype(jnp.bfloat16))", Space.VMEM, (8, 128), "bfloat16"),
])
def test_like_gives_the_buffer_the_shape_and_dtype(like, space, shape, dtype):
    buf = _buf(like)
    assert isinstance(buf, Ref) and buf.space == space
    assert buf.shape == shape and buf.dtype == dtype


def test_like_of_something_unknown_is_a_buffer_of_unknown_shape():
    buf = _buf("pltpu.VMEM.like(make_it())")
    assert isinstance(buf, Ref) and buf.space == Space.VMEM and buf.shape is None


def test_a_like_buffer_read_into_a_dma_is_reported():
    analysis, _ = run(KERNEL.replace("LIKE", "pltpu.VMEM.like(x)").replace(
        "pltpu.sync_copy(buf, o_hbm)", "v = buf[...]\n    pltpu.sync_copy(v, o_hbm)"))
    assert "PAL101" in [f.code for f in analysis.findings]
