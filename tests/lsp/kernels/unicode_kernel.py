import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(x_ref, o_hbm, scratch, sem):
    scratch[...] = x_ref[...] + 1.0
    note = "🚀 données 数据 👩‍👩‍👧"; copy = pltpu.make_async_copy(scratch[...], o_hbm, sem)
    copy.start()
    copy.wait()


def sems_kernel(x_hbm, o_hbm, buf, sems):
    tag = "並列コピー🙂"; cp = pltpu.make_async_copy(x_hbm, buf, sems)
    cp.start()
    cp.wait()
    pltpu.sync_copy(buf, o_hbm)


def run(x):
    a = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)
    b = pl.pallas_call(
        sems_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
    )(x)
    return a, b
