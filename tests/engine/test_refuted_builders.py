"""A kernel builder whose own `assert` refuses the values the engine has.

Builders take flags with defaults, and the engine runs a builder no caller
in view calls with those defaults. When the builder asserts against them
(`assert fused`, the default being False), what follows runs on a
configuration the program itself refuses: the scratch list and the kernel's
reading of its refs may disagree, and every finding from that run would be
about code that never runs. The launch is then not bound with those values
(coverage says why); a flag's other value, run as a variant, still is.
JAX refuses the refuted configuration at the assert, and runs the
configuration the assert accepts."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

BUILDER = '''
def build(n, fused=False):
    assert fused, "only the fused form is written"
    last = pltpu.SemaphoreType.DMA if fused else pltpu.SemaphoreType.DMA((2,))
    scratch = [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)), last]

    def kernel(x_hbm, o_hbm, buf, sems, one_sem):
        pltpu.make_async_copy(x_hbm, buf, SEM).start()  # SITE
        pltpu.make_async_copy(x_hbm, buf, sems.at[0]).wait()
        pltpu.async_copy(buf, o_hbm, one_sem).wait()

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=scratch, interpret=pltpu.InterpretParams())
'''

ASSERT = '    assert fused, "only the fused form is written"\n'


def _source(sem: str, default: str = "False") -> str:
    return BUILDER.replace("SEM", sem).replace("fused=False", f"fused={default}")


def _found(src: str) -> list:
    analysis, text = run(src)
    return [(f.code, f.span.line) for f in analysis.findings], text, analysis


def test_the_refuted_defaults_give_no_finding():
    # With `fused=False` the last scratch is an array of two semaphores, and
    # `one_sem` would be reported as a whole array: a configuration the
    # builder's own assert refuses.
    got, _, analysis = _found(_source("sems.at[0]"))
    assert got == []
    assert any(la.bound for la in analysis.launches if la.kernel == "kernel")  # fused=True


def test_without_the_assert_the_same_values_are_reported():
    got, text, _ = _found(_source("sems.at[0]").replace(ASSERT, ""))
    assert ("PAL103", line_of(text, "one_sem).wait()")) in got


def test_the_accepted_configuration_is_still_checked():
    got, text, _ = _found(_source("sems"))
    assert got == [("PAL103", line_of(text, "# SITE"))]


def test_a_refuted_builder_with_no_other_configuration_is_not_bound():
    src = _source("sems.at[0]").replace("def build(n, fused=False):",
                                         "def build(n):\n    fused = False")
    got, _, analysis = _found(src)
    assert got == []
    [launch] = [la for la in analysis.launches if la.kernel == "kernel"]
    assert not launch.bound


def test_an_assert_inside_the_kernel_does_not_refute_the_launch():
    src = _source("sems", default="True").replace(
        "        pltpu.make_async_copy(x_hbm, buf, sems).start()",
        "        assert x_hbm.shape[0] == 9\n        pltpu.make_async_copy(x_hbm, buf, sems).start()")
    got, text, _ = _found(src)
    assert ("PAL103", line_of(text, "# SITE")) in got


def test_an_assert_in_an_undecided_branch_does_not_refute():
    src = _source("sems", default="True").replace(ASSERT, "    if n > 4:\n        assert n < 2\n")
    got, text, _ = _found(src)
    assert ("PAL103", line_of(text, "# SITE")) in got


PL_KERNEL = '''
def build(x, fused=False):
    assert fused, "only the fused form is written"
    last = pltpu.SemaphoreType.DMA if fused else pltpu.SemaphoreType.DMA((2,))

    @pl.kernel(out_type=x, mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
               scratch_types=[pltpu.VMEM((8, 128), jnp.float32), last])
    def kernel(x_hbm, o_hbm, buf, one_sem):
        pltpu.async_copy(x_hbm, buf, one_sem).wait()  # SITE
        pltpu.sync_copy(buf, o_hbm)

    return kernel(x)
'''


def test_every_launcher_family_respects_the_refuted_assert():
    # `pl.kernel` binds through the shared `bind_and_run`, as core_map and
    # launches through unseen helpers do.
    got, _, _ = _found(PL_KERNEL)
    assert got == []
    got, text, _ = _found(PL_KERNEL.replace(ASSERT, ""))
    assert got == [("PAL103", line_of(text, "# SITE"))]


def _jax(default: str):
    return run_jax(HEADER + textwrap.dedent(_source("sems.at[0]", default)) +
                   "\nx = jnp.ones((8, 128), jnp.float32)\n"
                   "print(float(build(1)(x).sum()))\n")


def test_jax_refuses_the_defaults_at_the_assert():
    p = _jax("False")
    jax_refuses(p, "AssertionError: only the fused form is written")


@pytest.mark.parametrize("default", ["True"])
def test_jax_runs_the_accepted_configuration(default):
    p = _jax(default)
    jax_prints(p, "1024.0")
