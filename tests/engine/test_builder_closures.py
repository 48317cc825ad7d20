"""A builder called in a loop, each launcher it returns handed to a library
the engine cannot follow (a compile or timing helper): every run of the
builder gives the launcher's kernel another closure (`mode`), whose branches
reach other copies. Each closure runs (engine/interp/driver._other_closure) and
each is another kernel (binding/pallas_call._closed_consts). Before, only the
last closure ran, and a bug in a branch only an earlier mode reaches was
silent (a tutorial's DMA-overlap benchmark, third held-out set). JAX, run on
that mode in interpret mode, rejects the bug and runs the twin."""
from __future__ import annotations

import subprocess

from tests.engine.conftest import HEADER, line_of, run, run_jax

SOURCE = '''
import timing_lib  # a helper library the engine cannot follow

MODES = ("write", "both", "read")


def build(mode):
    def copy(x):
        @functools.partial(
            pl.pallas_call,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((2, 8, 128), x.dtype), pltpu.SemaphoreType.DMA((2,))],
        )
        def kernel(x_hbm, o_hbm, vmem, sems):
            def load(slot):
                return pltpu.make_async_copy(x_hbm, vmem.at[slot], sems.at[slot])

            def store(slot):
                return pltpu.make_async_copy(STORE_SRC, o_hbm, sems.at[slot])  # STORE

            if mode == "read":
                copies = [load(0)]
            elif mode == "write":
                copies = [load(1), store(1)]
            else:
                copies = [load(0), store(0)]
            for c in copies:
                c.start()
                c.wait()

        return kernel(x)

    return copy


def main():
    x = jnp.ones((8, 128), jnp.float32)
    for mode in MODES:
        timing_lib.time_it(build(mode), x)
'''

OK = "vmem.at[slot]"
BUG = "vmem[slot]"


def test_a_bug_only_an_earlier_closure_reaches_is_reported():
    analysis, src = run(SOURCE.replace("STORE_SRC", BUG))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL101", line_of(src, "# STORE"))]


def test_the_twin_is_silent():
    assert run(SOURCE.replace("STORE_SRC", OK))[0].findings == []


def test_the_same_with_pl_kernel_and_a_mesh():
    body = SOURCE.replace(
        """        @functools.partial(
            pl.pallas_call,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=""",
        """        @pl.kernel(
            out_type=pltpu.HBM(x.shape, x.dtype),
            mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
            scratch_types=""")
    assert "pl.kernel(" in body
    analysis, src = run(body.replace("STORE_SRC", BUG))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL101", line_of(src, "# STORE"))]
    assert run(body.replace("STORE_SRC", OK))[0].findings == []


def _interpret(store_src: str) -> subprocess.CompletedProcess:
    text = HEADER + SOURCE.replace("STORE_SRC", store_src).replace(
        "import timing_lib", "").replace(
        "scratch_shapes=", "interpret=pltpu.InterpretParams(), scratch_shapes=") + (
        "\nx = jnp.ones((8, 128), jnp.float32)\n"
        "print(float(build('write')(x).sum()))\n")
    return run_jax(text)


def test_jax_runs_the_twin():
    p = _interpret(OK)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "1024.0"


def test_jax_refuses_the_bug_in_that_mode():
    p = _interpret(BUG)
    assert p.returncode != 0
    assert "DMA source/destination/semaphore arguments must be Refs." in p.stderr, \
        p.stderr[-2000:]
