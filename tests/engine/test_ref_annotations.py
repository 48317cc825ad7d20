"""A DMA handed `x[...]` where the file's annotations say `x` is one Ref.

Typed test suites annotate a kernel's parameters (`x: pl.UnconstrainedInRef[...]`)
and scratch dataclasses their fields (`global_histogram: Ref`), often where no
launch is in view, so the interpreter has no value for them. Any subscript of
one Ref, a slice included, reads it into an Array, which JAX refuses as a DMA
argument. A container annotation (`list[Ref]`, `Sequence[...]`), a name the
interpreter knows, and `x.at[...]` are left alone. The names here say nothing
(`x`, `hist`), so that only the annotation can tell. JAX, in TPU interpret
mode, refuses the read and runs the `.at[...]` twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

UNSEEN = "from kernel_tools import launch\n"

PARAM = '''
def body(x: ANN, o_hbm, buf, sem):
    pltpu.async_copy(SRC, buf, sem).wait()  # SITE
    pltpu.sync_copy(buf, o_hbm.at[0:1])
'''

FIELD = '''
import dataclasses


@dataclasses.dataclass
class Scratch:
    hist: FIELD_ANN
    sem: object


def body(x_hbm, o_hbm, scratch):
    pltpu.async_copy(x_hbm.at[0:1], SRC, scratch.sem).wait()  # SITE
    pltpu.sync_copy(scratch.hist, o_hbm.at[0:1])
'''

# For JAX: the launcher builds the scratch record around the kernel.
FIELD_LAUNCH = '''

def kernel(x_hbm, o_hbm, buf, sem):
    body(x_hbm, o_hbm, Scratch(buf, sem))
'''

LAUNCH = '''
def launch(kernel, x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((1,) + x.shape[1:], x.dtype), pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams())(x)
'''


def _sites(body: str, header: str = HEADER + UNSEEN):
    analysis, src = run(body, header)
    return [(f.code, f.span.line) for f in analysis.findings], src


def _param(ann: str, src: str) -> str:
    return PARAM.replace("ANN", ann).replace("SRC", src)


def _field(ann: str, dst: str) -> str:
    return FIELD.replace("FIELD_ANN", ann).replace("SRC", dst)


@pytest.mark.parametrize("ann", ['"pl.UnconstrainedInRef[[Rows, Cols]]"', "jax.Ref",
                                 '"pltpu.VmemScratchRef | None"', '"Optional[Ref]"'])
@pytest.mark.parametrize("src", ["x[0:1]", "x[0]", "x[...]"])
def test_a_read_of_a_parameter_annotated_as_a_ref(ann, src):
    got, text = _sites(_param(ann, src))
    assert got == [("PAL101", line_of(text, "# SITE"))]


@pytest.mark.parametrize("ann", ['"list[Ref]"', '"Sequence[pl.Ref]"', "jax.Array", '"Refs"',
                                 "tuple"])
def test_other_annotations_say_nothing_of_a_slice(ann):
    assert _sites(_param(ann, "x[0:1]"))[0] == []


def test_the_at_twin_is_silent():
    assert _sites(_param("jax.Ref", "x.at[0:1]"))[0] == []


@pytest.mark.parametrize("ann", ["jax.Ref", '"pl.Ref"'])
def test_a_read_of_a_field_annotated_as_a_ref(ann):
    got, text = _sites(_field(ann, "scratch.hist[0:1]"))
    assert got == [("PAL101", line_of(text, "# SITE"))]


@pytest.mark.parametrize("ann, dst", [("object", "scratch.hist[0:1]"),
                                      ('"list[jax.Ref]"', "scratch.hist[0:1]"),
                                      ("jax.Ref", "scratch.hist.at[0:1]")])
def test_a_field_not_annotated_as_one_ref_is_silent(ann, dst):
    assert _sites(_field(ann, dst))[0] == []


def test_a_field_annotated_two_ways_is_silent():
    body = _field("jax.Ref", "scratch.hist[0:1]") + '''

@dataclasses.dataclass
class Other:
    hist: list
'''
    assert _sites(body)[0] == []


def test_a_parameter_the_interpreter_knows_is_judged_by_the_rules():
    # Launched in view: the engine knows `x` (the rules speak, not the floor).
    body = _param("jax.Ref", "x[0:1]") + LAUNCH + "\nlaunch(body, jnp.zeros((2, 8, 128)))\n"
    analysis, text = run(body, HEADER)
    site = [f for f in analysis.findings if f.span.line == line_of(text, "# SITE")]
    assert "PAL101" in [f.code for f in site]


def _jax(body: str, kernel: str = "body"):
    return run_jax(HEADER + LAUNCH + textwrap.dedent(body) +
                   "\nx = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)\n"
                   f"print(bool((launch({kernel}, x)[0] == x[0]).all()))\n")


def test_jax_refuses_the_read():
    jax_refuses(_jax(_param("jax.Ref", "x[0:1]")),
                "DMA source/destination/semaphore arguments must be Refs.")


def test_jax_runs_the_twin():
    jax_prints(_jax(_param("jax.Ref", "x.at[0:1]")), "True")


def test_jax_refuses_the_field_read():
    jax_refuses(_jax(_field("jax.Ref", "scratch.hist[0:1]") + FIELD_LAUNCH, "kernel"),
                "DMA source/destination/semaphore arguments must be Refs.")


def test_jax_runs_the_field_twin():
    jax_prints(_jax(_field("jax.Ref", "scratch.hist.at[0:1]") + FIELD_LAUNCH, "kernel"), "True")
