"""An analysis leaves no reference cycles behind: a server re-analyses on
every keystroke, and cyclic garbage the size of a kernel file's AST costs the
collector a quarter of the analysis time (and stalls the editor)."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pallas_lsp.engine import analyze

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("editor", [True, False])
def test_dropping_an_analysis_frees_it_by_reference_counting(path, editor):
    text = path.read_text(encoding="utf-8")
    gc.collect()
    gc.disable()
    try:
        analysis = analyze(text, str(path), findings_only=not editor)
        if editor:
            analysis.settle()  # hover names, API calls: what the server builds
            assert analysis.names
        del analysis
        assert gc.collect() == 0
    finally:
        gc.enable()


# Constructs whose handling once left a cycle: `jax.tree.map` (its walker
# called itself through a closure), `match` (the same), a loop whose body
# reads the previous iteration's values.
CONSTRUCTS = '''
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(x_hbm, o_ref, buf, sems, *, mode):
    copies = [pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sems.at[i]) for i in range(2)]
    jax.tree.map(lambda c: c.start(), copies)
    match mode:
        case "copy":
            jax.tree.map(lambda c: c.wait(), copies)
        case _:
            pass
    acc = buf[0]
    for i in range(3):
        acc = acc + buf[1]
    o_ref[...] = acc


def run(x, mode="copy"):
    return pl.pallas_call(
        functools.partial(kernel, mode=mode),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
        scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
    )(x)
'''


def test_constructs_that_once_made_cycles_leave_none():
    gc.collect()
    gc.disable()
    try:
        analysis = analyze(CONSTRUCTS, "constructs.py")
        analysis.settle()
        assert any(n.name == "copies" for n in analysis.names)
        del analysis
        assert gc.collect() == 0
    finally:
        gc.enable()
