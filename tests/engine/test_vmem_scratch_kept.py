"""Scratch the compiler surely keeps counts in PAL404's floor
(engine/rules/_scratch_kept.py); computed scratch lists are sized. The rule
each case leans on was measured deviceless (libtpu 0.0.42, v5e and v6e,
f32 (256, 512) scratch over a 4-step grid): a buffer read first, or carried
from a `pl.when` write, or a DMA's source or target is kept; one written in
full before it is read, never read, or carried on a one-step grid is dropped.
The compile-proven pair is tests/compile/fixtures/pal404_scoped_vmem.py
(`bug_vmem_scratch_list` / `ok_vmem_scratch_list`)."""
from __future__ import annotations

import textwrap

import pytest

from pallas_lsp.engine.analyze import analyze
from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.rules._tpu import tpu_launches, launch_vmem
from pallas_lsp.engine.source import parse

HEAD = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

K = 7
"""

# A kernel with three named sums; 1024-row f32 blocks and sums are 4 MiB each.
CARRIED = """
def kernel(x_ref, o_ref, a_ref, b_ref, c_ref, *more):
    @pl.when(pl.program_id(0) == 0)
    def _():
        a_ref[...] = jnp.zeros_like(a_ref)
        b_ref[...] = jnp.zeros_like(b_ref)
        c_ref[...] = jnp.zeros_like(c_ref)
        for m in more:
            m[...] = jnp.zeros_like(m)

    a_ref[...] += x_ref[...]
    b_ref[...] += x_ref[...] * 2
    c_ref[...] += x_ref[...] * 3
    o_ref[...] = a_ref[...] + b_ref[...] + c_ref[...]
"""


def _call(scratch: str, rows: int = 1024, steps: int = 8) -> str:
    return f"""
def run(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(({rows * steps}, 1024), jnp.float32),
        grid=({steps},),
        in_specs=[pl.BlockSpec(({rows}, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec(({rows}, 1024), lambda i: (i, 0)),
        scratch_shapes={scratch})(x)

def go():
    return run(jnp.ones(({rows * steps}, 1024), jnp.float32))
"""


def _codes(src: str) -> list[str]:
    return [f.code for f in analyze(textwrap.dedent(src), "t.py").findings
            if f.code.startswith("PAL4")]


def _parts(src: str):
    it = Interpreter(parse(textwrap.dedent(src)), "t.py")
    it.run()
    (launch,) = tpu_launches(it.events)
    return launch_vmem(launch, it.events).estimate


COMPUTED = {
    "comprehension": "[pltpu.VMEM((1024, 1024), jnp.float32) for _ in range(K)]",
    "repeated list": "[*[pltpu.VMEM((1024, 1024), jnp.float32)] * K]",
    "plain repeat": "[pltpu.VMEM((1024, 1024), jnp.float32)] * K",
}


@pytest.mark.parametrize("scratch", list(COMPUTED.values()), ids=list(COMPUTED))
def test_a_computed_list_of_carried_sums_is_over(scratch):
    # 16 MiB of blocks and three kept sums (12 MiB) are 28 MiB; the four sums the
    # kernel only zeroes are dropped by the compiler, so the floor is 28 MiB: over v5e,
    # not v6e. With 2048-row blocks: 32 + 24 MiB, over both.
    est = _parts(HEAD + CARRIED + _call(scratch))
    kept = [p for p in est.parts if p.kind == "scratch" and p.floor]
    assert [p.name for p in kept] == ["scratch[0]", "scratch[1]", "scratch[2]"]  # (*more: no names)
    assert est.floor == 28 * 2**20 and est.total == 44 * 2**20
    assert _codes(HEAD + CARRIED + _call(scratch)) == []
    assert _codes(HEAD + CARRIED + _call(scratch, rows=2048, steps=4)) == ["PAL404"]


def test_a_list_from_a_helper_and_a_callers_k():
    src = HEAD + CARRIED + """
def sums(rows, k):
    return [pltpu.VMEM((rows, 1024), jnp.float32) for _ in range(k)]

def run(x, rows, k):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        grid=(x.shape[0] // rows,),
        in_specs=[pl.BlockSpec((rows, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, 1024), lambda i: (i, 0)),
        scratch_shapes=sums(rows, k))(x)

def big():
    return run(jnp.ones((8192, 1024), jnp.float32), 2048, 5)

def small():
    return run(jnp.ones((8192, 1024), jnp.float32), 256, 5)
"""
    assert _codes(src) == ["PAL404"]
    assert _codes(src.replace("2048, 5)", "256, 5)")) == []


def test_one_step_drops_the_carried_sums():
    # Measured: on a grid of one step the `pl.when` write always runs first.
    est = _parts(HEAD + CARRIED + _call(COMPUTED["comprehension"], rows=2048, steps=1))
    assert [p for p in est.parts if p.kind == "scratch" and p.floor] == []


@pytest.mark.parametrize("body, kept", [
    # written in full before it is read: dropped (not counted in the floor)
    ("a_ref[...] = x_ref[...] * 2\n    o_ref[...] = a_ref[...]", False),
    # read first (its value from the step before): kept
    ("o_ref[...] = a_ref[...] + x_ref[...]\n    a_ref[...] = x_ref[...]", True),
    # written under pl.when, then read in the same pl.when: proves nothing
    ("@pl.when(pl.program_id(0) == 0)\n    def _():\n        a_ref[...] = x_ref[...]\n"
     "        o_ref[...] = a_ref[...]", False),
    # a write through a Ref the engine cannot name (a loop over the list) may be any
    ("for r in (a_ref, b_ref):\n        r[...] = x_ref[...]\n    o_ref[...] = a_ref[...]", False),
    # handed to a helper the engine cannot follow: proves nothing
    ("fill(a_ref)\n    o_ref[...] = a_ref[...]", False),
])
def test_what_proves_a_buffer_kept(body, kept):
    src = HEAD + f"""
from mylib import fill

def kernel(x_ref, o_ref, a_ref, b_ref):
    {body}
""" + _call("[pltpu.VMEM((1024, 1024), jnp.float32)] * 2")
    est = _parts(src)
    assert bool(est.parts[2].floor) is kept, est.parts[2]


def test_a_dma_target_is_kept_on_one_step():
    src = HEAD + """
def kernel(x_hbm, o_ref, buf, sem):
    cp = pltpu.make_async_copy(x_hbm, buf, sem.at[0])
    cp.start()
    cp.wait()
    o_ref[...] = buf[...]

def run(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((1024, 1024), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((1024, 1024), lambda: (0, 0)),
        scratch_shapes=[pltpu.VMEM((1024, 1024), jnp.float32), pltpu.SemaphoreType.DMA((1,))])(x)

def go():
    return run(jnp.ones((1024, 1024), jnp.float32))
"""
    est = _parts(src)
    (buf,) = [p for p in est.parts if p.kind == "scratch"]
    assert buf.floor == 4 * 2**20 and "DMA" in buf.why


def test_a_module_of_deeply_nested_expressions_is_walked_without_recursion():
    """The `pl.when` map walks the whole module: a generated constant nesting
    990 levels deep raised RecursionError from `pallas-lsp vmem` before."""
    deep = "BIG = " + "+".join(["1"] * 990) + "\n"
    src = HEAD + deep + CARRIED + _call("[pltpu.VMEM((1024, 1024), jnp.float32)] * 3")
    kept = [p for p in _parts(src).parts if p.kind == "scratch" and p.kept]
    assert len(kept) == 3
