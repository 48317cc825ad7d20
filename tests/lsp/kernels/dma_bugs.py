import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def copy_kernel(x_ref, o_hbm, scratch, sem):
    scratch[...] = x_ref[...] + 1.0
    copy = pltpu.make_async_copy(scratch[...], o_hbm, sem)
    copy.start()
    copy.wait()


def double_buffer_kernel(x_hbm, o_hbm, buf, sems):
    copy = pltpu.make_async_copy(x_hbm, buf, sems)
    copy.start()
    copy.wait()
    pltpu.sync_copy(buf, o_hbm)


def run(x):
    a = pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)
    b = pl.pallas_call(
        double_buffer_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
    )(x)
    return a, b
