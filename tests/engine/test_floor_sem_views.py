"""A started DMA handed `row`, where `row = sems.at[slot]` and the file
indexes `sems` with more axes elsewhere (`sems.at[slot, c]`).

`sems` has at least two axes, the view names one, so `row` is still an array
of semaphores (a slice would keep its axis too). Launched through a helper the
engine cannot see, only the text says so. JAX, in TPU interpret mode, refuses
the signal on the view and runs the `row.at[c]` twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

UNSEEN = "from kernel_tools import launch\n"

BODY = '''
def body(x_hbm, o_hbm, buf, sems):
    slot = 0
    row = sems.at[slot]
    for c in range(2):
        pltpu.make_async_copy(x_hbm.at[c], buf.at[c], SEM).start()  # SITE
    for c in range(2):
        pltpu.make_async_copy(x_hbm.at[c], buf.at[c], sems.at[slot, c]).wait()
    pltpu.sync_copy(buf, o_hbm)
'''


def _sites(body: str, header: str = HEADER + UNSEEN):
    analysis, src = run(body, header)
    return [(f.code, f.span.line) for f in analysis.findings], src, analysis


def test_a_view_of_an_array_indexed_with_more_axes_is_an_array():
    got, text, analysis = _sites(BODY.replace("SEM", "row"))
    assert got == [("PAL103", line_of(text, "# SITE"))]
    assert "still an array of semaphores" in analysis.findings[0].detail


@pytest.mark.parametrize("sem, wait", [
    ("row.at[c]", "sems.at[slot, c]"),  # the twin
    ("row", "sems.at[c]"),  # nothing shows `sems` has a second axis
    ("row", "sems.at[pl.ds(0, 2)]"),  # one axis named (a slice): not more than the view's
])
def test_silent(sem, wait):
    body = BODY.replace("SEM", sem).replace("sems.at[slot, c]).wait()", f"{wait}).wait()")
    assert _sites(body)[0] == []


LAUNCH = '''
def launch(kernel, x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((1, 2))],
        interpret=pltpu.InterpretParams())(x)
'''


def _jax(sem: str):
    return run_jax(HEADER + LAUNCH + textwrap.dedent(BODY.replace("SEM", sem)) +
                   "\nx = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)\n"
                   "print(bool((launch(body, x) == x).all()))\n")


def test_jax_refuses_the_view():
    jax_refuses(_jax("row"), "Cannot signal on a non-()-shaped semaphore: (2,)")


def test_jax_runs_the_twin():
    jax_prints(_jax("row.at[c]"), "True")


def test_through_a_temporary():
    body = BODY.replace("SEM", "tmp").replace("    for c in range(2):\n        pltpu.make_async_copy(x_hbm.at[c], buf.at[c], tmp)",
                                              "    tmp = row\n    for c in range(2):\n        pltpu.make_async_copy(x_hbm.at[c], buf.at[c], tmp)", 1)
    assert "tmp = row" in body
    got, text, _ = _sites(body)
    assert got == [("PAL103", line_of(text, "# SITE"))]
