"""A launcher's parameter annotated with a NamedTuple of the file.

Serving kernels take their scalar tables as one NamedTuple
(`metadata: Metadata`) and hand it on as `num_scalar_prefetch=len(metadata)`
and `*metadata`. With no caller in view, the engine knows nothing of the
value, but the annotation says how many fields it has: the kernel's
prefetch parameters, and so every parameter after them, are bound. JAX, in
TPU interpret mode, refuses the whole semaphore array and runs the twin."""
from __future__ import annotations

import textwrap

from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

SOURCE = '''
from typing import NamedTuple


class Meta(NamedTuple):
    starts: jax.Array
    lens: jax.Array


def _kernel(starts, lens, x_hbm, o_hbm, buf, sems, *extra):
    pltpu.make_async_copy(x_hbm, buf, SEM).start()  # SITE
    pltpu.make_async_copy(x_hbm, buf, sems.at[0]).wait()
    pltpu.sync_copy(buf, o_hbm)


def run(x, meta: Meta, more=0):
    return pl.pallas_call(
        _kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=len(meta), grid=(1,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
            + [pltpu.VMEM((8, 128), jnp.float32)] * more),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        interpret=pltpu.InterpretParams())(*meta, x)
'''


def _source(sem: str) -> str:
    return SOURCE.replace("SEM", sem)


def test_the_kernel_is_bound_through_the_annotation():
    analysis, src = run(_source("sems"))
    assert [(f.code, f.span.line) for f in analysis.findings] == [("PAL103", line_of(src, "# SITE"))]
    assert "shape (2,)" in analysis.findings[0].detail


def test_the_twin_is_silent():
    assert run(_source("sems.at[0]"))[0].findings == []


def test_an_annotation_of_another_kind_says_nothing():
    # A plain class is not a tuple: its length, and so the kernel's
    # parameters, are not known (only the name `sems` speaks).
    src = _source("sems").replace("class Meta(NamedTuple):", "class Meta:")
    analysis, _ = run(src)
    assert all("shape (2,)" not in f.detail for f in analysis.findings)


def _jax(sem: str):
    return run_jax(HEADER + textwrap.dedent(_source(sem)) +
                   "\nx = jnp.ones((8, 128), jnp.float32)\n"
                   "m = Meta(jnp.zeros((1,), jnp.int32), jnp.ones((1,), jnp.int32))\n"
                   "print(float(run(x, m).sum()))\n")


def test_jax_refuses_the_whole_array():
    p = _jax("sems")
    jax_refuses(p, "Cannot signal on a non-()-shaped semaphore: (2,)")


def test_jax_runs_the_twin():
    p = _jax("sems.at[0]")
    jax_prints(p, "1024.0")
