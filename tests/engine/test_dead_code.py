"""Code after a `return` (or `raise`, `break`, `continue`) of its block never
runs, and a def there is never defined: JAX never traces what is in it. A
kernel that returned early above its backward pass (an application's fused
kernel, fourth held-out set) had 23 DMA sites there that coverage counted as
unknown, and the driver ran those defs as unlaunched kernel code. Now
coverage counts them as known (nothing to know), and neither the driver nor
the syntax floor reports anything in them. JAX runs the kernel with a bad
copy in its dead part."""
from __future__ import annotations


from tests.engine.conftest import HEADER, line_of, run, run_jax

from pallas_lsp.engine import analyze
from pallas_lsp.engine.syntax import dead_code

SOURCE = '''
def kernel(x_hbm, o_hbm, buf, sems):
    copy = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
    copy.start()
    copy.wait()
    pltpu.sync_copy(buf, o_hbm)
    return None

    def backward(_):  # never defined
        pltpu.make_async_copy(x_hbm, buf[...], sems).start()  # DEAD
    jax.lax.cond(True, backward, lambda _: None, None)


def launch(x):
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams(),
    )(x)
'''


def test_nothing_is_reported_in_dead_code():
    analysis, _ = run(SOURCE)
    assert analysis.findings == []


def test_coverage_counts_dead_sites_as_known():
    analysis = analyze(HEADER + SOURCE, "snippet.py", coverage=True)
    src = HEADER + SOURCE
    dead = [s for s in analysis.coverage.sites if s.line == line_of(src, "# DEAD")]
    assert len(dead) == 1 and dead[0].known and not dead[0].reached
    assert "never runs" in dead[0].reason
    assert all(s.known for s in analysis.coverage.sites)


def test_dead_code_covers_defs_and_every_kind_of_exit():
    import ast
    tree = ast.parse(
        "def f():\n    for i in x:\n        continue\n        a()\n    while y:\n        break\n"
        "        b()\n    raise E\n    def g():\n        c()\n")
    dead = dead_code(tree)
    calls = {n.func.id: id(n) in dead for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls == {"a": True, "b": True, "c": True}


def test_jax_never_traces_it():
    text = HEADER + SOURCE + (
        "\nx = jnp.ones((8, 128), jnp.float32)\nprint(float(launch(x).sum()))\n")
    p = run_jax(text)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "1024.0"
