"""The Pallas API is recognised whatever the import style."""
import pytest

from conftest import codes

BODY = """
def kernel(x_ref, o_hbm, buf, sem):
    copy = {call}
    copy.start()
    copy.wait()

pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
"""

STYLES = {
    "module alias": ("from jax.experimental.pallas import tpu as pltpu\n",
                     "pltpu.make_async_copy(buf[...], o_hbm, sem)"),
    "dotted import as": ("import jax.experimental.pallas.tpu as tpu\n",
                         "tpu.make_async_copy(buf[...], o_hbm, sem)"),
    "function alias": ("from jax.experimental.pallas.tpu import make_async_copy as mac\n",
                       "mac(buf[...], o_hbm, sem)"),
    "fully qualified": ("import jax.experimental.pallas.tpu\n",
                        "jax.experimental.pallas.tpu.make_async_copy(buf[...], o_hbm, sem)"),
    "internal module": ("from jax._src.pallas.mosaic import primitives as tpu_primitives\n",
                        "tpu_primitives.make_async_copy(buf[...], o_hbm, sem)"),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_import_styles(style):
    extra, call = STYLES[style]
    header = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
              "from jax.experimental.pallas import tpu as pltpu\n" + extra)
    assert codes(BODY.format(call=call), header) == ["PAL101"]


def test_same_name_from_another_library_is_ignored():
    header = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
              "from jax.experimental.pallas import tpu as pltpu\n"
              "from mylib import make_async_copy\n")
    assert codes(BODY.format(call="make_async_copy(buf[...], o_hbm, sem)"), header) == []
