"""A double-buffered HBM -> VMEM -> HBM copy kernel with three classic bugs.

Run `pallas-lsp check examples/` to see them; `python examples/double_buffer_bugs.py`
(with jax installed) shows what JAX itself says: only the first one, at the
`.start()` line.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, BLOCK = 32, 8


def kernel(x_hbm, o_hbm, buf, sems):
    nblocks = ROWS // BLOCK

    def fetch(i, slot):
        # Bug 1: `sems` is both semaphores; one copy signals one of them.
        return pltpu.make_async_copy(x_hbm.at[pl.ds(i * BLOCK, BLOCK)], buf.at[slot], sems)

    fetch(0, 0).start()

    def body(i, carry):
        slot = i % 2

        @pl.when(i + 1 < nblocks)
        def _():
            fetch(i + 1, 1 - slot).start()

        fetch(i, slot).wait()
        # Bug 2: `buf[slot]` reads the block; the DMA needs the Ref `buf.at[slot]`.
        pltpu.sync_copy(buf[slot], o_hbm.at[pl.ds(i * BLOCK, BLOCK)])
        return carry

    jax.lax.fori_loop(0, nblocks, body, 0)
    # Bug 3: a local copy has no send side to wait for.
    done = pltpu.make_async_copy(buf.at[0], o_hbm.at[pl.ds(0, BLOCK)], sems.at[0])
    done.start()
    done.wait_send()


def copy(x):
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((2, BLOCK, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams(),
    )(x)


if __name__ == "__main__":
    print(copy(jnp.arange(ROWS * 128, dtype=jnp.float32).reshape(ROWS, 128)))
