"""Refs in pytrees whose structure the engine does not know (values.RefTree):
`jax.tree.map(pltpu.SMEM.like, prefetch)` over a parameter, a local function
mapped over it that makes a Ref of any value (`x if isinstance(x, jax.Ref)
else jax.new_ref(x)`), and the DMAs between the two (a jax test suite's fused
matmul, second held-out set). Handed to a copy whole they are Refs; an item
of them is not known, so indexing one is no load (no false alarm). And
`if isinstance(x, jax.Ref):` makes `x` a Ref in its body. JAX runs each twin
and rejects the bug."""
from __future__ import annotations

import subprocess

from pallas_lsp.engine import analyze
from tests.engine.conftest import HEADER, line_of, run, run_jax

TREES = '''

def launch(values, prefetch):
    def ref(x):
        if isinstance(x, jax.Ref):
            return x
        return jax.new_ref(x)

    value_refs, prefetch_refs = jax.tree.map(ref, (values, prefetch))

    @pl.core_map(pltpu.create_tensorcore_mesh("core", num_cores=1), INTERPRET)
    def _():
        def body(prefetch_smem):
            COPIES

        pl.run_scoped(body, jax.tree.map(pltpu.SMEM.like, prefetch))

    return jax.tree.map(lambda r: r[...], prefetch_refs)


out = jax.jit(launch)((jnp.ones((8, 128)),),
                      (jnp.arange(4, dtype=jnp.int32), jnp.arange(2, dtype=jnp.int32)))
print(int(out[0].sum()), int(out[1].sum()))
'''
WHOLE = ("pltpu.sync_copy(prefetch_refs, prefetch_smem)\n"
         "            pltpu.sync_copy(prefetch_smem, prefetch_refs)")
ITEMS = ("pltpu.sync_copy(prefetch_refs[1], prefetch_smem[1])\n"
         "            pltpu.sync_copy(prefetch_smem[1], prefetch_refs[1])")

NARROW = '''
import helpers  # a module the engine cannot read


def copy_in(x, buf, sem):
    if isinstance(x, jax.Ref):
        pltpu.async_copy(SRC, buf, sem).wait()  # COPY
    else:
        buf[...] = x


x = jnp.ones((8, 128), jnp.float32)


@pl.kernel(out_type=x, mesh=pltpu.create_tensorcore_mesh("core", num_cores=1), INTERPRET
           scratch_types=(pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA))
def kernel(x_hbm, o_hbm, buf, sem):
    copy_in(helpers.pick(x_hbm), buf, sem)
    pltpu.sync_copy(buf, o_hbm)


print(float(kernel(x).sum()))
'''


def _engine(text: str):
    return run(text.replace("INTERPRET", ""))


def _jax(text: str) -> subprocess.CompletedProcess:
    text = HEADER + text.replace("INTERPRET", "interpret=pltpu.InterpretParams(),") \
        .replace("import helpers  # a module the engine cannot read", "") \
        .replace("helpers.pick(x_hbm)", "x_hbm")
    return run_jax(text)


def test_copies_between_trees_of_unknown_structure_are_known_and_silent():
    analysis, src = _engine(TREES.replace("COPIES", WHOLE))
    assert analysis.findings == []
    cov = analyze(src, "snippet.py", coverage=True)
    assert [s.known for s in cov.coverage.sites if s.kind == "dma"] == [True, True]


def test_an_item_of_such_a_tree_is_not_a_read():
    # (prefetch_refs[1] is a Ref in the real tree: a load here would be a false alarm)
    assert _engine(TREES.replace("COPIES", ITEMS))[0].findings == []


def test_jax_runs_both():
    for copies in (WHOLE, ITEMS):
        p = _jax(TREES.replace("COPIES", copies))
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.split() == ["6", "1"]


def test_an_isinstance_ref_check_makes_the_name_a_ref():
    # (the read is PAL101 by its syntax alone too; the copy's source is now a known Ref)
    analysis, src = _engine(NARROW.replace("SRC", "x[...]"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL101", line_of(src, "# COPY"))]
    analysis, src = _engine(NARROW.replace("SRC", "x"))
    assert analysis.findings == []
    cov = analyze(src, "snippet.py", coverage=True)
    assert [s.known for s in cov.coverage.sites if s.kind == "dma"] == [True, True]


def test_jax_rejects_the_read_and_runs_the_twin():
    ok = _jax(NARROW.replace("SRC", "x"))
    assert ok.returncode == 0 and ok.stdout.strip() == "1024.0", ok.stderr[-2000:]
    bad = _jax(NARROW.replace("SRC", "x[...]"))
    assert bad.returncode != 0
    assert "DMA source/destination/semaphore arguments must be Refs." in bad.stderr
