"""Scratch built as a pytree, flattened for the launch and rebuilt in the
kernel: `leaves, tree = jax.tree.flatten(scratch)`, `scratch_shapes=leaves`,
`s = tree.unflatten(refs)` (SparseCore code does this while `pl.kernel`
takes no scratch trees). The treedef is the tree itself (`values.TreeDef`),
and `unflatten` puts the kernel's Refs back in jax's leaf order. Before, the
rebuilt scratch was Unknown and a whole semaphore array passed to a DMA was
silent. JAX, in TPU interpret mode, rejects the bug and runs the twin."""
from __future__ import annotations

from tests.engine.conftest import HEADER, line_of, run, run_jax

SOURCE = '''
import dataclasses


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Scratch:
    sem: object
    buf: object


def copy(x):
    scratch = Scratch(buf=pltpu.VMEM((8, 128), jnp.float32), sem=pltpu.SemaphoreType.DMA((2,)))
    leaves, tree = jax.tree.flatten(scratch)

    def kernel(x_hbm, o_hbm, *refs):
        s = tree.unflatten(refs)
        c = pltpu.make_async_copy(x_hbm, s.buf, SEM)  # SITE
        c.start()
        c.wait()
        pltpu.sync_copy(s.buf, o_hbm)

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=leaves, interpret=pltpu.InterpretParams())(x)
'''

OK, BUG = "s.sem.at[0]", "s.sem"


def test_the_rebuilt_scratch_keeps_its_refs():
    analysis, src = run(SOURCE.replace("SEM", BUG))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(src, "# SITE"))]
    assert analysis.findings[0].message.endswith("(2,)")


def test_the_twin_is_silent():
    assert run(SOURCE.replace("SEM", OK))[0].findings == []


def test_a_leaf_count_that_does_not_fill_the_tree_is_unknown():
    body = SOURCE.replace("SEM", BUG).replace("tree.unflatten(refs)", "tree.unflatten(refs[:1])")
    assert run(body)[0].findings == []


def _interpret(sem: str):
    return run_jax(HEADER + SOURCE.replace("SEM", sem) + (
        "\nx = jnp.ones((8, 128), jnp.float32)\nprint(float(copy(x).sum()))\n"))


def test_jax_runs_the_twin():
    p = _interpret(OK)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "1024.0"


def test_jax_refuses_the_bug():
    p = _interpret(BUG)
    assert p.returncode != 0
    assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, p.stderr[-2000:]
