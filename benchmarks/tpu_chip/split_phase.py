"""Split-phase DMA across two pallas_calls on a real TPU: does the runtime
give a start-only kernel and a wait-only kernel with the same scratch the
same DMA semaphore? (pallas-lsp leaves such a pair out of PAL302/PAL303.)

    python benchmarks/tpu_chip/split_phase.py {pair,pair_noalias,pair_other_slot,start_only,wait_only}

pair: kernel A starts an HBM->HBM copy and returns, kernel B (same scratch
shapes, A's output aliased) only waits; prints OK when the result is the
input. pair_noalias: B without the alias (its own output is left unwritten):
OK when A's output, which B is handed, is the input after B returns.
pair_other_slot: B's scratch holds two DMA semaphores and it waits on the
second, which A never signalled (expected to hang). start_only: A alone.
wait_only: B alone on a fresh semaphore (expected to hang). Run the hanging
ones under `timeout`. Needs a TPU; prints what happened."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SCRATCH = [pltpu.SemaphoreType.DMA]
ANY = pl.BlockSpec(memory_space=pl.ANY)


def start_body(x_hbm, o_hbm, sem):
    pltpu.make_async_copy(x_hbm, o_hbm, sem).start()


def done_body(x_hbm, d_hbm, o_hbm, sem):
    del o_hbm  # aliased to d_hbm
    pltpu.make_async_copy(x_hbm, d_hbm, sem).wait()


def start(x):
    return pl.pallas_call(start_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[ANY], out_specs=ANY, scratch_shapes=SCRATCH,
                          compiler_params=pltpu.CompilerParams(has_side_effects=True))(x)


def done(x, d):
    return pl.pallas_call(done_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[ANY, ANY], out_specs=ANY, scratch_shapes=SCRATCH,
                          input_output_aliases={1: 0},
                          compiler_params=pltpu.CompilerParams(has_side_effects=True))(x, d)


def done_noalias_body(x_hbm, d_hbm, o_hbm, sem):
    del o_hbm  # left unwritten
    pltpu.make_async_copy(x_hbm, d_hbm, sem).wait()


def done_noalias(x, d):
    return pl.pallas_call(done_noalias_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[ANY, ANY], out_specs=ANY, scratch_shapes=SCRATCH,
                          compiler_params=pltpu.CompilerParams(has_side_effects=True))(x, d)


def done_other_slot_body(x_hbm, d_hbm, o_hbm, sem0, sem1):
    del o_hbm, sem0  # aliased to d_hbm; sem0 is where A's copy signals
    pltpu.make_async_copy(x_hbm, d_hbm, sem1).wait()


def done_other_slot(x, d):
    return pl.pallas_call(done_other_slot_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[ANY, ANY], out_specs=ANY,
                          scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA],
                          input_output_aliases={1: 0},
                          compiler_params=pltpu.CompilerParams(has_side_effects=True))(x, d)


def _pair_noalias(v):
    s = start(v)
    o = done_noalias(v, s)
    return s, o


def main(case: str) -> None:
    x = jnp.arange(1024 * 128, dtype=jnp.float32).reshape(1024, 128)
    try:
        if case == "pair":
            out = jax.jit(lambda v: done(v, start(v)))(x)
        elif case == "pair_noalias":
            out, _ = jax.jit(_pair_noalias)(x)
        elif case == "pair_other_slot":
            out = jax.jit(lambda v: done_other_slot(v, start(v)))(x)
        elif case == "start_only":
            out = jax.jit(start)(x)
        else:
            out = jax.jit(lambda v: done(v, jnp.zeros_like(v)))(x)
        out = np.asarray(jax.block_until_ready(out))
        print(case, "OK" if np.array_equal(out, np.asarray(x)) else "WRONG RESULT",
              jax.devices()[0].device_kind, flush=True)
    except Exception as e:  # noqa: BLE001 - the error is the result
        print(case, "FAILED", type(e).__name__, str(e)[:500], flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
