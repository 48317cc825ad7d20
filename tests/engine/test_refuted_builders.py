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


# Two parameters the asserts demand at once (and a string mode of an `or`):
# no single flag flipped alone satisfies them, the variant the asserts
# demand does (`variants.assert_variants`).
DEMANDING = '''
def build(n, fused=False, rows=None, mode="a"):
    assert (mode == "b" or n > 100) and fused
    assert rows is not None and rows % 8 == 0, rows
    last = pltpu.SemaphoreType.DMA if mode == "b" else pltpu.SemaphoreType.DMA((2,))

    def kernel(x_hbm, o_hbm, buf, sems, one_sem):
        pltpu.make_async_copy(x_hbm, buf, SEM).start()  # SITE
        pltpu.make_async_copy(x_hbm, buf, sems.at[0]).wait()
        pltpu.async_copy(buf, o_hbm, one_sem).wait()

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((rows, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)), last],
        interpret=pltpu.InterpretParams())
'''


def test_the_configuration_the_asserts_demand_is_checked():
    got, text, analysis = _found(DEMANDING.replace("SEM", "sems"))
    assert got == [("PAL103", line_of(text, "# SITE"))]
    assert any(la.bound for la in analysis.launches if la.kernel == "kernel")


def test_the_demanded_configuration_twin_is_silent():
    got, _, analysis = _found(DEMANDING.replace("SEM", "sems.at[0]"))
    assert got == []
    assert any(la.bound for la in analysis.launches if la.kernel == "kernel")


@pytest.mark.parametrize("test, wanted", [
    ("flag", {"flag": True}), ("not flag", {}), ("rows is not None", {"rows": "GIVEN"}),
    ("mode == 'b'", {"mode": "b"}), ("mode == 'a' or flag", {}),
    ("(mode == 'b' or n > 1) and flag", {"mode": "b", "flag": True}),
    ("n > 1 and flag", {"flag": True}), ("other", {}),
    ("flag and not flag", {}),  # contradictory: no configuration meets it
])
def test_what_an_assert_demands(test, wanted):
    import ast

    from pallas_lsp.engine import variants
    func = ast.parse(f"def f(n, flag=False, rows=None, mode='a'):\n    assert {test}\n").body[0]
    got = variants.assert_variants(func)
    as_plain = {k: "GIVEN" if v is variants.GIVEN else v.value for k, v in got[0].items()} \
        if got else {}
    assert as_plain == wanted


def _jax_demanding(call: str):
    return run_jax(HEADER + textwrap.dedent(DEMANDING.replace("SEM", "sems.at[0]")) +
                   "\nx = jnp.ones((8, 128), jnp.float32)\n"
                   f"print(float({call}(x).sum()))\n")


def test_jax_refuses_the_defaults_and_runs_the_demanded_configuration():
    jax_refuses(_jax_demanding("build(1)"), "AssertionError")
    jax_prints(_jax_demanding("build(1, fused=True, rows=8, mode='b')"), "1024.0")


def test_an_assert_false_whatever_its_unknown_part_refutes():
    # `n > 4 and fused`: with `fused=False` it is false whatever `n` is.
    src = _source("sems.at[0]").replace(ASSERT, "    assert n > 4 and fused\n")
    got, _, analysis = _found(src)
    assert got == []
    src = _source("sems.at[0]").replace(ASSERT, "    assert n > 4 or fused\n")  # undecided
    got, text, _ = _found(src)
    assert ("PAL103", line_of(text, "one_sem).wait()")) in got


def test_each_alternative_of_an_or_is_a_configuration():
    # `fast = mode == "fast"`: a local the assert names stands for its test.
    import ast

    from pallas_lsp.engine import variants
    func = ast.parse("def f(n, mode='slow', fused=False, rows=None):\n"
                     "    fast = mode == 'fast'\n"
                     "    assert (n > 1 or (fast and fused)) and rows is not None\n"
                     "    assert (mode == 'x' or fused)\n").body[0]
    got = [{k: "GIVEN" if v is variants.GIVEN else v.value for k, v in d.items()}
           for d in variants.assert_variants(func)]
    assert got == [{"mode": "fast", "fused": True, "rows": "GIVEN"}]
    func = ast.parse("def f(mode='slow', fused=False):\n"
                     "    assert mode == 'a' or fused\n").body[0]
    got = [{k: v.value for k, v in d.items()} for d in variants.assert_variants(func)]
    assert got == [{"mode": "a"}, {"fused": True}]


def _interpreted(read: str) -> str:
    # The builder also takes `interpret`, tested in the kernel: its copies
    # differ there (one block per step, as interpret mode wants).
    src = DEMANDING.replace("SEM", "sems.at[0]").replace(
        'mode="a"):', 'mode="a", interpret=False):').replace(
        "        pltpu.async_copy(buf, o_hbm, one_sem).wait()\n",
        "        if interpret:\n"
        f"            pltpu.async_copy({read}, o_hbm.at[0], one_sem).wait()  # INTERPRET\n"
        "        else:\n"
        "            pltpu.async_copy(buf.at[0], o_hbm.at[0], one_sem).wait()\n")
    # The buffers are `n_bufs` alike (one by default): with unknown
    # arguments the kernel's first buffer is unknown, so only the runs with
    # the builder's values see the path (and `buf`, bound from the scratch,
    # is no parameter the floor reads alone).
    src = src.replace('interpret=False):', 'interpret=False, n_bufs=1):').replace(
        "scratch_shapes=[pltpu.VMEM((rows, 128), jnp.float32), ",
        "scratch_shapes=[pltpu.VMEM((rows, 128), jnp.float32)] * n_bufs + [").replace(
        "def kernel(x_hbm, o_hbm, buf, sems, one_sem):\n",
        "def kernel(x_hbm, o_hbm, *scratch):\n"
        "        buf, sems, one_sem = scratch[0], scratch[-2], scratch[-1]\n")
    return src.replace("interpret=pltpu.InterpretParams()", "interpret=interpret")


def test_a_flag_flipped_on_top_of_the_demanded_configuration_is_checked():
    # Only the configuration the asserts demand binds the kernel; the path
    # under `interpret` is reached when that configuration also flips it.
    got, text, _ = _found(_interpreted("buf[0]"))
    assert got == [("PAL101", line_of(text, "# INTERPRET"))]
    got, _, _ = _found(_interpreted("buf.at[0]"))
    assert got == []


def test_jax_on_the_flag_flipped_on_the_demanded_configuration():
    def program(read):
        return HEADER + textwrap.dedent(_interpreted(read)) + \
            "\nx = jnp.ones((8, 128), jnp.float32)\n" \
            "print(float(build(1, fused=True, rows=8, mode='b', " \
            "interpret=pltpu.InterpretParams())(x)[0].sum()))\n"
    jax_refuses(run_jax(program("buf[0]")), "DMA source/destination/semaphore arguments must be Refs.")
    jax_prints(run_jax(program("buf.at[0]")), "128.0")


def test_flag_flips_combined_with_configurations():
    from pallas_lsp.engine import variants
    from pallas_lsp.engine.model import Const
    t, f = Const(value=True), Const(value=False)
    flips = [{"a": t, "b": f}, {"a": f, "b": t}]
    got = variants.combined(flips, [{"b": t}])
    assert got == [({"a": t, "b": t}, {})]  # {"a": False, "b": True} is a flip already
    many = [{"k": Const(value=i)} for i in range(20)]
    assert len(variants.combined(many, [{"c": t}])) == variants.MAX_VARIANTS
