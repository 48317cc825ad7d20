"""`x[i]` handed to a DMA where nothing says `x` holds several Refs.

A kernel launched through a helper the checked files do not hold (an
installed library, another repository) gives the engine no value for its
parameters. `source[j]` in a DMA is then either a read of the Ref `source`
(JAX refuses it) or the `j`-th Ref of a list. The floor reads it as a read
unless the interpreter or the file shows a container: a `*` parameter, a
literal, slice or `list(...)` bound to the name, a loop over it, `len`,
unpacking, a string key, a container annotation or default, or another DMA
of the file indexing the name the same way. JAX, in TPU interpret mode,
refuses the read and runs the list twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

BODY = '''
def body(source, dest, state, read_sem, write_sem):
    for j in range(2):
        pltpu.async_copy(SRC, state, read_sem).wait()  # READ
        pltpu.async_copy(state, DST, write_sem).wait()  # WRITE
'''

# Launched through a helper of another package: the engine knows nothing of
# `body`'s parameters.
UNSEEN = "from kernel_tools import launch\n"

# What `launch` does, for JAX: the sources and destinations are Refs (ANY).
LAUNCH_REFS = '''
def launch(kernel, x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape[1:], x.dtype), pltpu.SemaphoreType.DMA,
                        pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams())(x)
'''

# The list twin: each of `source` and `dest` is a tuple of two Refs.
LAUNCH_LISTS = '''
def launch(kernel, x):
    def k(x0, x1, o0, o1, state, rs, ws):
        kernel((x0, x1), (o0, o1), state, rs, ws)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    shape = jax.ShapeDtypeStruct(x.shape[1:], x.dtype)
    return pl.pallas_call(
        k, out_shape=(shape, shape), in_specs=[any_spec, any_spec], out_specs=(any_spec, any_spec),
        scratch_shapes=[pltpu.VMEM(x.shape[1:], x.dtype), pltpu.SemaphoreType.DMA,
                        pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams())(x[0], x[1])
'''


def _body(src="source.at[j]", dst="dest.at[j]") -> str:
    return BODY.replace("SRC", src).replace("DST", dst)


def _sites(body: str, header: str = HEADER + UNSEEN):
    analysis, src = run(body, header)
    return [(f.code, f.span.line) for f in analysis.findings], src


@pytest.mark.parametrize("src, dst, marker", [
    ("source[j]", "dest.at[j]", "# READ"),
    ("source.at[j]", "dest[j]", "# WRITE"),
    ("source[j, 0]", "dest.at[j]", "# READ"),
])
def test_a_lone_index_is_a_read(src, dst, marker):
    got, text = _sites(_body(src, dst))
    assert got == [("PAL101", line_of(text, marker))]


def test_through_a_temporary():
    body = _body("tmp").replace("        pltpu.async_copy(tmp", "        tmp = source[j]\n"
                                "        pltpu.async_copy(tmp")
    got, text = _sites(body)
    assert got == [("PAL101", line_of(text, "# READ"))]


def test_the_detail_says_why():
    analysis, _ = run(_body("source[j]"), HEADER + UNSEEN)
    assert "Nothing here shows `source` holding several Refs" in analysis.findings[0].detail


def test_the_twin_is_silent():
    assert _sites(_body())[0] == []


CONTAINER_SIGNS = {
    "a star parameter": ("def body(source, dest,", "def body(*source, dest,"),
    "a loop over it": ("    for j in range(2):", "    for j in range(len(source)):"),
    "iterated": ("    for j in range(2):", "    for _ in source:\n        pass\n    for j in range(2):"),
    "unpacked": ("    for j in range(2):", "    first, second = source\n    for j in range(2):"),
    "an annotation": ("def body(source,", "def body(source: tuple,"),
    "a default": ("def body(source, dest, state, read_sem, write_sem):",
                  "def body(dest, state, read_sem, write_sem, source=()):"),
    "a literal": ("    for j in range(2):", "    source = [source, dest]\n    for j in range(2):"),
    "a slice": ("    for j in range(2):", "    source = source[1:]\n    for j in range(2):"),
    "another DMA indexing it": ("    for j in range(2):",
                                "    pltpu.sync_copy(source[0], state)\n    for j in range(2):"),
    "a string key": ("    for j in range(2):", "    k = source['k']\n    for j in range(2):"),
}


@pytest.mark.parametrize("case", sorted(CONTAINER_SIGNS))
def test_a_container_sign_keeps_it_silent(case):
    old, new = CONTAINER_SIGNS[case]
    body = _body("source[j]")
    assert old in body
    assert _sites(body.replace(old, new))[0] == []


@pytest.mark.parametrize("index", ["source['a']", "source[0:1]", "source[*js]"])
def test_indexes_no_ref_takes_are_left_alone(index):
    assert _sites(_body(index))[0] == []


def test_the_interpreter_knowing_a_list_keeps_it_silent():
    # jax's all_gather style: a tuple of semaphores from `scratch_shapes`.
    body = '''
def kernel(x_ref, o_ref, sems):
    pltpu.async_copy(x_ref, o_ref, sems[0]).wait()


def copy(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[(pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA)])(x)
'''
    assert _sites(body, HEADER)[0] == []


def _jax(body: str, launch: str, run_it: str):
    return run_jax(HEADER + launch + textwrap.dedent(body) +
                   "\nx = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)\n" + run_it)


def test_jax_refuses_the_read():
    p = _jax(_body("source[j]"), LAUNCH_REFS, "print(float(launch(body, x).sum()))\n")
    jax_refuses(p, "DMA source/destination/semaphore arguments must be Refs.")


LIST_TWIN = _body("source[j]", "dest[j]").replace("def body(source, dest,",
                                                  "def body(source: tuple, dest: tuple,")


def test_the_list_twin_is_silent():
    assert _sites(LIST_TWIN)[0] == []


def test_jax_runs_the_list_twin():
    p = _jax(LIST_TWIN, LAUNCH_LISTS,
             "a, b = launch(body, x)\nprint(float((a + b).sum()) == float(x.sum()))\n")
    jax_prints(p, "True")


def test_jax_runs_the_ref_twin():
    p = _jax(_body(), LAUNCH_REFS, "print(bool((launch(body, x) == x).all()))\n")
    jax_prints(p, "True")
