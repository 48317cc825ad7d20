"""`pltpu.sync_copy` of pytrees: jax 0.10.2 maps a copy over the leaves of
two pytrees of Refs (`sync_copy((a, b), (c, d))`). Each leaf pair is a DMA the
rules judge and coverage counts; a read among the leaves is JAX's "DMA
source/destination/semaphore arguments must be Refs." (checked by running the
kernel in interpret mode below)."""
from __future__ import annotations

import subprocess

import pytest

from tests.engine.conftest import HEADER, run, run_jax

KERNEL = '''
x = jnp.zeros((8, 128), jnp.float32)


@pl.kernel(out_type=x, mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
           scratch_types=dict(a=pltpu.VMEM.like(x), b=pltpu.VMEM.like(x)))
def kernel(x_hbm, o_hbm, *, a, b):
    COPY
    b[...] = a[...] + b[...]
    pltpu.sync_copy(b, o_hbm)


out = kernel(x)
'''

OK = "pltpu.sync_copy((x_hbm, x_hbm), (a, b))"
BUGS = [
    "pltpu.sync_copy((x_hbm, x_hbm[...]), (a, b))",
    "v = x_hbm[...]\n    pltpu.sync_copy([x_hbm, v], [a, b])",
    "v = x_hbm[...]\n    pltpu.sync_copy({'p': x_hbm, 'q': (v,)}, {'p': a, 'q': (b,)})",
]


def _codes(copy: str) -> list[str]:
    return [f.code for f in run(KERNEL.replace("COPY", copy))[0].findings]


@pytest.mark.parametrize("copy", BUGS)
def test_a_read_among_the_leaves_is_reported(copy):
    assert _codes(copy) == ["PAL101"]


def test_the_twin_is_silent_and_every_leaf_copy_is_known():
    analysis, _ = run(KERNEL.replace("COPY", OK))
    assert analysis.findings == []
    from pallas_lsp.engine import analyze
    cov = analyze(HEADER + KERNEL.replace("COPY", OK), "snippet.py", coverage=True)
    assert [s.known for s in cov.coverage.sites if s.kind == "dma"] == [True, True]


def test_structures_that_differ_are_left_alone():
    # (Unknown to the engine, not a mistake it can name.)
    assert _codes("pltpu.sync_copy((x_hbm, x_hbm), (a,))") == []


def _interpret(copy: str) -> subprocess.CompletedProcess:
    text = (HEADER + KERNEL.replace("COPY", copy)).replace("@pl.kernel(", "@pl.kernel(interpret=pltpu.InterpretParams(), ")
    return run_jax(text)


def test_jax_runs_the_twin():
    p = _interpret(OK)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("copy", BUGS)
def test_jax_refuses_each_bug(copy):
    p = _interpret(copy)
    assert p.returncode != 0
    assert "DMA source/destination/semaphore arguments must be Refs." in p.stderr, p.stderr[-2000:]
