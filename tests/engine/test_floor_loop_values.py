"""A DMA argument `dst[slot]` where `dst` is a loop target over a literal
tuple of names the function shows to be Refs.

`for hbm, dst, sem in ((a_hbm, alpha, 0), (b_hbm, beta, 1)):` hands the
loop each triple in turn; where another nested function writes
`alpha.at[i]` and `beta.at[i]`, each value `dst` takes is a Ref, so
`dst[slot]` reads it. The refs come unpacked from `*refs` and the names give
nothing away: only the text's evidence says so. JAX, in TPU interpret mode,
refuses the read and runs the `.at` twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

UNSEEN = "from kernel_tools import launch\n"

BODY = '''
def body(*refs):
    (a_hbm, b_hbm, oa_hbm, ob_hbm, alpha, beta, sems) = refs

    def _copies(slot):
        copies = []
        for hbm, dst, sem in ((a_hbm, alpha, 0), (b_hbm, beta, 1)):
            copies.append(pltpu.make_async_copy(hbm, DST, sems.at[sem]))  # SITE
        return copies

    def _write_out(slot):
        pltpu.sync_copy(alpha.at[slot], oa_hbm)
        pltpu.sync_copy(beta.at[slot], ob_hbm)

    copies = _copies(0)
    for c in copies:
        c.start()
    for c in copies:
        c.wait()
    _write_out(0)
'''


def _sites(body: str, header: str = HEADER + UNSEEN):
    analysis, src = run(body, header)
    return [(f.code, f.span.line) for f in analysis.findings], src


def test_a_read_of_a_loop_value_that_is_a_ref():
    got, text = _sites(BODY.replace("DST", "dst[slot]"))
    assert got == [("PAL101", line_of(text, "# SITE"))]


@pytest.mark.parametrize("old, new", [
    ("DST", "dst.at[slot]"),  # the twin
    # nothing else here shows `beta` to be a Ref: not judged
    ("        pltpu.sync_copy(beta.at[slot], ob_hbm)\n", ""),
    # the loop is over a name, not a literal
    ("in ((a_hbm, alpha, 0), (b_hbm, beta, 1))", "in pairs"),
])
def test_silent(old, new):
    body = BODY.replace("DST", "dst[slot]") if old != "DST" else BODY
    assert old in body
    assert _sites(body.replace(old, new))[0] == []


LAUNCH = '''
def launch(kernel, a, b):
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        kernel, out_shape=(jax.ShapeDtypeStruct(a.shape[1:], a.dtype),) * 2,
        in_specs=[any_spec, any_spec], out_specs=(any_spec, any_spec),
        scratch_shapes=[pltpu.VMEM(a.shape, a.dtype), pltpu.VMEM(b.shape, b.dtype),
                        pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams())(a, b)
'''


def _jax(dst: str):
    return run_jax(HEADER + LAUNCH + textwrap.dedent(BODY.replace("DST", dst)) +
                   "\na = jnp.ones((1, 8, 128), jnp.float32)\n"
                   "oa, ob = launch(body, a, 2 * a)\nprint(float(oa.sum() + ob.sum()))\n")


def test_jax_refuses_the_read():
    jax_refuses(_jax("dst[slot]"), "DMA source/destination/semaphore arguments must be Refs.")


def test_jax_runs_the_twin():
    jax_prints(_jax("dst.at[slot]"), "3072.0")
