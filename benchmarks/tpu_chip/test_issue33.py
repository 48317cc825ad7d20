"""Issue 33's classes, run on a real TPU by run_issue33.sh (and compiled
deviceless by tests/runs/test_chip_messages.py). Each kernel is launched in
this file, so the engine knows its Refs' shapes and its semaphores. A line
ending in `# chip: PALnnn` is where a run on a chip must report that code;
tests/runs/test_chip_replay.py checks the recorded reports against them."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

X16 = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)


def _wait_without_start(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.wait()  # chip: PAL303


def test_hang_wait_without_start():
    f = pl.pallas_call(_wait_without_start, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.SemaphoreType.DMA])
    np.asarray(f(X16))


def _window_past_the_end(x_ref, o_ref, sem):
    copy = pltpu.make_async_copy(x_ref.at[pl.ds(8, 16)], o_ref, sem)  # chip: PAL306
    copy.start()
    copy.wait()


def test_window_out_of_bounds():
    f = pl.pallas_call(_window_past_the_end, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec((16, 128), lambda: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.SemaphoreType.DMA])
    np.testing.assert_array_equal(f(X16), X16[8:])


def _shape_mismatch(x_ref, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_ref.at[pl.ds(0, 8)], buf, sem)
    copy.start()  # chip: PAL305
    copy.wait()
    o_ref[...] = buf[pl.ds(0, 8), :]


def test_dma_shape_mismatch():
    f = pl.pallas_call(_shape_mismatch, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec((16, 128), lambda: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32),
                                       pltpu.SemaphoreType.DMA])
    np.testing.assert_array_equal(f(X16), X16[:8])


def _direct_hbm_load(x_hbm, o_ref):
    o_ref[...] = x_hbm[...] * 2.0  # chip: PAL204


def test_direct_hbm_load():
    f = pl.pallas_call(_direct_hbm_load, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)])
    np.testing.assert_array_equal(f(X16), X16 * 2.0)


def _dma_add(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.start(add=True)  # chip: PAL111
    copy.wait()


def test_dma_add():
    f = pl.pallas_call(_dma_add, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.SemaphoreType.DMA])
    np.asarray(f(X16))
