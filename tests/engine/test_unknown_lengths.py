"""Lists whose length the source does not fix, and flags that decide it.

- `[pltpu.SemaphoreType.DMA((2,))] * (2 + n)` with `n` from a mesh or a
  parameter: every entry is alike, so each required kernel parameter gets
  one and `*rest` the others (a collective's send and receive semaphores).
- `[buf, *[sem] * k]`: a known front, then entries all alike.
- `operands[:n_in]` of a `*operands` parameter is still one array per item
  (`tree_map(new_ref, operands[:n_in])` in a core_map wrapper).
- A scratch tree with a bare `pltpu.SemaphoreType.DMA` leaf, flattened for
  `pl.kernel` and rebuilt in a body `(x_hbm, o_hbm, *s)`: the bare type is
  one leaf, and the body's named inputs are known once the result is called.
- A flag handed to a module-level kernel body through `functools.partial`
  (`with_scales=with_scales`) that also picks the launcher's scratch list:
  each value is analysed apart, so the list and the body's unpacking agree.

Before, each of these left every DMA of the kernel Unknown and its bugs
silent. JAX, in TPU interpret mode, rejects each bug and runs each twin."""
from __future__ import annotations

import pytest

from tests.engine.conftest import HEADER, line_of, run, run_jax

ALIKE = '''
def kernel(x_hbm, o_hbm, sem_a, sem_b, *net, n):
    send, recv = net[:n], net[n:2 * n]
    c = pltpu.make_async_copy(x_hbm, o_hbm, sem_a.at[0])
    c.start()
    c.wait()
    d = pltpu.make_async_copy(x_hbm, o_hbm, RECV)  # SITE
    d.start()
    d.wait()


def copy(x, n):
    return pl.pallas_call(
        functools.partial(kernel, n=n), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA((2,))] * (2 + 2 * n),
        interpret=pltpu.InterpretParams())(x)
'''

FRONT = '''
def kernel(x_hbm, o_hbm, buf, *sems):
    c = pltpu.make_async_copy(x_hbm, buf, SEM)  # SITE
    c.start()
    c.wait()
    pltpu.sync_copy(buf, o_hbm)


def copy(x, k):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), *[pltpu.SemaphoreType.DMA((2,))] * k],
        interpret=pltpu.InterpretParams())(x)
'''

FLAG = '''
def _body(*refs, with_scales):
    if with_scales:
        x_hbm, s_hbm, o_hbm, so_hbm, buf, sbuf, sems, ssems = refs
    else:
        x_hbm, o_hbm, buf, sems = refs
    c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
    c.start()
    c.wait()
    pltpu.sync_copy(buf, o_hbm)
    if with_scales:
        d = pltpu.make_async_copy(s_hbm, sbuf, SEM)  # SITE
        d.start()
        d.wait()
        pltpu.sync_copy(sbuf, so_hbm)


def gather(x, scales):
    with_scales = scales is not None
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    if with_scales:
        out_shape = (jax.ShapeDtypeStruct(x.shape, x.dtype),
                     jax.ShapeDtypeStruct(scales.shape, scales.dtype))
        scratch = [pltpu.VMEM(x.shape, x.dtype), pltpu.VMEM(scales.shape, scales.dtype),
                   pltpu.SemaphoreType.DMA((2,)), pltpu.SemaphoreType.DMA((2,))]
        operands = (x, scales)
    else:
        out_shape = (jax.ShapeDtypeStruct(x.shape, x.dtype),)
        scratch = [pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,))]
        operands = (x,)
    return pl.pallas_call(
        functools.partial(_body, with_scales=with_scales), out_shape=out_shape,
        in_specs=[any_spec] * len(operands), out_specs=[any_spec] * len(operands),
        scratch_shapes=scratch, interpret=pltpu.InterpretParams())(*operands)
'''

CORE_MAP = '''
def program(body, *, mesh, scratch_types, out_type, in_place=0):
    @jax.jit
    def run(*operands):
        n_in = len(operands) - in_place
        operand_refs = jax.tree_util.tree_map(jax.new_ref, operands[:n_in])
        out_ref = jax.new_ref(jnp.zeros(out_type.shape, out_type.dtype))

        @pl.core_map(mesh, scratch_shapes=scratch_types)
        def _(*scratch_refs):
            body(*operand_refs, out_ref, *scratch_refs)

        return out_ref[...]
    return run


def _body(x_hbm, idx_hbm, o_hbm, buf, sems):
    c = pltpu.make_async_copy(x_hbm, buf, SEM)  # SITE
    c.start()
    c.wait()


def gather(x, idx, mesh):
    return program(_body, mesh=mesh, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   scratch_types=[pltpu.VMEM((8, 128), jnp.float32),
                                  pltpu.SemaphoreType.DMA((2,))])(x, idx)
'''

TREE = '''
import dataclasses
from typing import Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class S:
    sem: Any
    sems: Any
    buf: Any


def copy(x):
    scratch, tree = jax.tree.flatten(S(sem=pltpu.SemaphoreType.DMA,
                                       sems=pltpu.SemaphoreType.DMA((2,)),
                                       buf=pltpu.VMEM((8, 128), jnp.float32)))

    @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
               mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
               scratch_types=scratch, interpret=pltpu.InterpretParams())
    def _kernel(x_hbm, o_hbm, *s):
        s = tree.unflatten(s)
        c = pltpu.make_async_copy(x_hbm, s.buf, SEM)  # SITE
        c.start()
        c.wait()
        pltpu.sync_copy(s.buf, o_hbm)
    return _kernel(x)
'''

CASES = {  # source, the bug's text, its twin's
    "alike": (ALIKE, "recv[0]", "recv[0].at[1]"),
    "front": (FRONT, "sems[1]", "sems[1].at[0]"),
    "flag": (FLAG, "ssems", "ssems.at[1]"),
    "core_map": (CORE_MAP, "sems", "sems.at[0]"),
    "tree": (TREE, "s.sems", "s.sems.at[1]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_whole_semaphore_array_is_reported(case):
    source, bug, _ = CASES[case]
    analysis, src = run(source.replace("RECV", bug).replace("SEM", bug))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(src, "# SITE"))]
    assert analysis.findings[0].message.endswith("(2,)")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_twin_is_silent(case):
    source, _, ok = CASES[case]
    assert run(source.replace("RECV", ok).replace("SEM", ok))[0].findings == []


def test_a_list_of_unlike_entries_and_unknown_length_stays_unknown():
    # `[buf, sem] * n`: the kernel's third parameter is a buffer or a
    # semaphore depending on n; the engine must not pick one.
    source = FRONT.replace("SEM", "sems[1]").replace(
        "[pltpu.VMEM(x.shape, x.dtype), *[pltpu.SemaphoreType.DMA((2,))] * k]",
        "[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,))] * k")
    assert run(source)[0].findings == []


CALLS = {
    "alike": "print(float(copy(x, 1).sum()))",
    "front": "print(float(copy(x, 2).sum()))",
    "flag": "print(float(gather(x, x * 2)[1].sum()))",
    "tree": "print(float(copy(x).sum()))",
}


def _interpret(case: str, sem: str):
    source = CASES[case][0].replace("RECV", sem).replace("SEM", sem)
    return run_jax(HEADER + source + "\nx = jnp.ones((8, 128), jnp.float32)\n" + CALLS[case] + "\n")


@pytest.mark.parametrize("case", sorted(CALLS))
def test_jax_runs_the_twin(case):
    p = _interpret(case, CASES[case][2])
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == ("2048.0" if case == "flag" else "1024.0")


@pytest.mark.parametrize("case", sorted(CALLS))
def test_jax_refuses_the_bug(case):
    p = _interpret(case, CASES[case][1])
    assert p.returncode != 0
    assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, p.stderr[-2000:]


LEADING = '''
def kernel(lens_ref, starts_ref, *refs):
    *hbm, o_hbm, buf, sems = refs
    n = lens_ref[0] + starts_ref[0]
    c = pltpu.make_async_copy(hbm[0].at[pl.ds(0, 8)], buf, SEM)  # SITE
    c.start()
    c.wait()
    pltpu.sync_copy(buf, o_hbm)


def launch(lens, starts, xs):
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[smem] * 2 + [any_spec] * len(xs), out_specs=any_spec,
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams())(lens, starts, *xs)
'''


def test_known_leading_inputs_then_an_unknown_count():
    """`[smem] * 2 + [any_spec] * len(xs)`: the first two inputs are SMEM
    Refs (reading them is fine), how many follow is unknown, and the
    scratch at the end of `*refs` is still known. Before, the whole list
    counted as one input, and `starts_ref` was taken for the ANY output:
    reading it was a false PAL204."""
    analysis, src = run(LEADING.replace("SEM", "sems"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(src, "# SITE"))]
    assert run(LEADING.replace("SEM", "sems.at[0]"))[0].findings == []


@pytest.mark.parametrize("sem, ok", [("sems.at[0]", True), ("sems", False)])
def test_jax_on_leading_inputs(sem, ok):
    p = run_jax(HEADER + LEADING.replace("SEM", sem) + (
        "\nx = jnp.ones((16, 128), jnp.float32)\n"
        "print(float(launch(jnp.zeros((1,), jnp.int32), jnp.zeros((1,), jnp.int32), [x, x])"
        ".sum()))\n"))
    if ok:
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.strip() == "1024.0"
    else:
        assert p.returncode != 0
        assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, p.stderr[-2000:]
