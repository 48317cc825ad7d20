"""Defaults a nested def takes when its statement runs (`def _do(src=src)`).

Kernels pin a loop's values into a `pl.when` body through default arguments
(`def _do_local(src_slice=src_slice, dst_slice=dst_slice)`): Python
evaluates them when the def runs, and `pl.when` calls the body with none.
Before, those parameters were Unknown and every DMA in such a body was too.
A parameter the call gives (positionally or by keyword) still takes the
call's value. JAX, in TPU interpret mode, rejects the bug and runs the twin."""
from __future__ import annotations

import pytest

from tests.engine.conftest import HEADER, line_of, run, run_jax

SOURCE = '''
def kernel(x_hbm, o_hbm, sems):
    def body(t, carry):
        src_slice = x_hbm.at[pl.ds(t, 1)]
        dst_slice = o_hbm.at[pl.ds(t, 1)]
        slot_sem = SEM

        @pl.when(t >= 0)
        def _do(src_slice=src_slice, dst_slice=dst_slice, sem=slot_sem):
            c = pltpu.make_async_copy(src_slice, dst_slice, sem)  # SITE
            c.start()
            c.wait()
        return carry

    lax.fori_loop(0, 8, body, 0)


def copy(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams())(x)
'''

HEAD = HEADER + "from jax import lax\n"
BUG, OK = "sems", "sems.at[t % 2]"


def test_the_whole_array_taken_as_a_default_is_reported():
    analysis, src = run(SOURCE.replace("SEM", BUG), HEAD)
    assert [(f.code, f.span.line) for f in analysis.findings] == [("PAL103", line_of(src, "# SITE"))]


def test_the_twin_is_silent_and_known():
    from pallas_lsp.engine.analyze import analyze
    a = analyze(HEAD + SOURCE.replace("SEM", OK), "k.py", coverage=True)
    assert a.findings == []
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known for s in dma), dma


def test_a_value_the_call_gives_wins_over_the_default():
    # `_do(sems.at[0])`... here by a direct call that passes `sem` itself
    src = SOURCE.replace("SEM", BUG).replace("@pl.when(t >= 0)\n", "").replace(
        "        return carry", "        _do(src_slice, dst_slice, sems.at[0])\n        return carry")
    assert [f.code for f in run(src, HEAD)[0].findings] == []


@pytest.mark.parametrize("sem, ok", [(OK, True), (BUG, False)])
def test_jax(sem, ok):
    p = run_jax(HEAD + SOURCE.replace("SEM", sem) + "\nx = jnp.ones((8, 128), jnp.float32)\n"
                "print(float(copy(x).sum()))\n")
    if ok:
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.strip() == "1024.0"
    else:
        assert p.returncode != 0
        assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, p.stderr[-2000:]
