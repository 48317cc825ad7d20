import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def test_block_not_tiled():
    x = jnp.arange(16 * 256, dtype=jnp.float32).reshape(16, 256)
    f = pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 4),
                       in_specs=[pl.BlockSpec((8, 64), lambda i, j: (i, j))],
                       out_specs=pl.BlockSpec((8, 64), lambda i, j: (i, j)))
    np.testing.assert_array_equal(f(x), x)


def _sort(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...], axis=-1)


def test_sort_in_kernel():
    x = jax.random.normal(jax.random.key(0), (8, 128), jnp.float32)
    f = pl.pallas_call(_sort, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(f(x), jnp.sort(x, axis=-1))


def test_big_blocks():
    x = jnp.ones((4096, 2048), jnp.float32)
    f = pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                       in_specs=[pl.BlockSpec((2048, 2048), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((2048, 2048), lambda i: (i, 0)))
    np.testing.assert_array_equal(f(x), x)
