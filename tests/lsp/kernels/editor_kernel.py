import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(lens_ref, x_ref, o_ref, o_hbm, buf, sems):
    n = lens_ref[0]
    y = x_ref[...] * 2.0
    o_ref[...] = y
    tag = "🚀é"; copy = pltpu.make_async_copy(buf.at[0], o_hbm.at[0], sems.at[0])
    copy.start()
    copy.wait()

    def body(tmp):
        tmp[...] = y
        pltpu.sync_copy(tmp, buf.at[1])

    pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32))


def run(lens, x):
    return pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(1,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, lens: (0, 0))],
            out_specs=[pl.BlockSpec((8, 128), lambda i, lens: (0, 0)),
                       pl.BlockSpec(memory_space=pl.ANY)],
            scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA((2,))],
        ),
    )(lens, x)
