"""A launch through a helper the engine cannot see, handed the kernel and its scratch.

Application code launches through helpers of its own that live in a module
outside the checked files (`gather.sparse_core_program(body, ...,
scratch_types=[...])`, `@helpers.launch(scratch_shapes=[...])`). Every Pallas
launcher gives a kernel its scratch last, so the kernel's last parameters
are known from the allocations the call hands over; the rest stays Unknown.
Before, such a kernel was analysed unbound and a whole semaphore array
handed to a DMA was silent. JAX, in TPU interpret mode, rejects each bug
(through a real helper module) and runs each twin."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.engine.conftest import HEADER, line_of, run

BODY = '''
def _body(x_hbm, o_hbm, buf, sems, *, n):
    def fetch(slot):
        return pltpu.make_async_copy(x_hbm.at[slot], buf.at[slot], SEM)  # SITE

    for slot in range(n):
        fetch(slot).start()
    for slot in range(n):
        fetch(slot).wait()
    pltpu.sync_copy(buf, o_hbm)
'''

CALL = '''
def copy(x):
    program = helpers.program(
        functools.partial(_body, n=2),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,))],
    )
    return program(x)
'''

DECORATED = '''
def copy(x):
    @helpers.program_for(
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,))],
    )
    def body(x_hbm, o_hbm, buf, sems):
        _body(x_hbm, o_hbm, buf, sems, n=2)

    return body(x)
'''

# The helper module, written next to the program when JAX runs it; the
# engine never sees it.
HELPERS = '''
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def program(body, out_shape, scratch_shapes):
    return pl.pallas_call(
        body, out_shape=out_shape,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=scratch_shapes, interpret=pltpu.InterpretParams())


def program_for(out_shape, scratch_shapes):
    return lambda body: program(body, out_shape, scratch_shapes)
'''

IMPORTS = {
    "module": "import kernel_helpers as helpers\n",
    "relative": "from . import kernel_helpers as helpers\n",
}

BUG, OK = "sems", "sems.at[slot]"


def _source(call: str, sem: str, imports: str = IMPORTS["module"]) -> str:
    return imports + BODY.replace("SEM", sem) + call


@pytest.mark.parametrize("imports", sorted(IMPORTS))
@pytest.mark.parametrize("call", ["call", "decorated"])
def test_the_whole_array_is_reported(call, imports):
    analysis, src = run(_source(CALL if call == "call" else DECORATED, BUG, IMPORTS[imports]))
    found = [(f.code, f.span.line) for f in analysis.findings]
    assert found == [("PAL103", line_of(src, "# SITE"))], analysis.findings


@pytest.mark.parametrize("imports", sorted(IMPORTS))
@pytest.mark.parametrize("call", ["call", "decorated"])
def test_the_twin_is_silent(call, imports):
    analysis, _ = run(_source(CALL if call == "call" else DECORATED, OK, IMPORTS[imports]))
    assert analysis.findings == []


def test_the_kernel_is_bound_once():
    analysis, _ = run(_source(CALL, OK))
    launches = [la for la in analysis.launches if la.kernel == "_body"]
    assert [la.bound for la in launches] == [True]
    src = _source(CALL, OK).replace("pltpu.sync_copy(buf, o_hbm)", "pltpu.sync_copy(buf, o_hbm[...])")
    assert [f.code for f in run(src)[0].findings] == ["PAL101"]


NOT_TAKEN = {
    # an item the engine cannot tell is an allocation: the list may mean anything
    "unknown item": CALL.replace("pltpu.SemaphoreType.DMA((2,))]", "pltpu.SemaphoreType.DMA((2,)), extra]"),
    # not a list of allocations at all
    "no scratch": CALL.replace("scratch_shapes=[", "buffers=["),
    # a callee the engine knows (the user's own function) is followed, not guessed at
    "known callee": CALL.replace("helpers.program(", "program(") + '''
def program(body, out_shape, scratch_shapes):
    return None
''',
}


@pytest.mark.parametrize("case", sorted(NOT_TAKEN))
def test_otherwise_the_call_stays_unknown(case):
    assert run(_unnamed(_source(NOT_TAKEN[case], BUG)))[0].findings == []


def _unnamed(src: str) -> str:
    """The semaphores under a name that says nothing of how many: the floor
    reads a bare `sems` as several whatever is bound (test_sems_named.py)."""
    return src.replace("sems", "dma_sem_pool")


STAR_BODY = BODY.replace("def _body(x_hbm, o_hbm, buf, sems, *, n):",
                         "def _body(x_hbm, *refs, n):\n    o_hbm, buf, sems = refs")


@pytest.mark.parametrize("sem, expected", [(BUG, ["PAL103"]), (OK, [])])
def test_a_star_refs_body_takes_the_scratch_at_its_end(sem, expected):
    src = IMPORTS["module"] + STAR_BODY.replace("SEM", sem) + CALL
    assert [f.code for f in run(src)[0].findings] == expected


# A helper's own keyword for the scratch (`scratch=`), given as a tuple.
OWN_KEYWORD = CALL.replace("scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), "
                           "pltpu.SemaphoreType.DMA((2,))]",
                           "scratch=(pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,)))")


@pytest.mark.parametrize("sem, expected", [(BUG, ["PAL103"]), (OK, [])])
def test_a_helpers_own_scratch_keyword(sem, expected):
    assert OWN_KEYWORD != CALL
    assert [f.code for f in run(_source(OWN_KEYWORD, sem))[0].findings] == expected


def test_leading_parameters_used_as_refs_are_refs():
    # `x_hbm` and `o_hbm` are Refs by their use (`x_hbm.at[slot]`, a DMA's
    # argument), as in kernel code no launch reaches: every DMA site is known.
    from pallas_lsp.engine.analyze import analyze
    a = analyze(HEADER + _source(CALL, OK), "k.py", coverage=True)
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert len(dma) == 2 and all(s.known for s in dma), dma


def test_a_function_that_does_not_read_as_a_kernel_is_not_bound():
    src = IMPORTS["module"] + '''
def _body(a, b, buf, sems, *, n):
    return a + b


def copy(x):
    return helpers.program(functools.partial(_body, n=2), scratch_shapes=[
        pltpu.VMEM((8,), jnp.float32), pltpu.SemaphoreType.DMA((2,))])
'''
    analysis, _ = run(src)
    assert not [la for la in analysis.launches if la.bound]


def test_fewer_parameters_than_allocations_is_not_bound():
    src = _source(CALL.replace("pltpu.SemaphoreType.DMA((2,))]",
                               "pltpu.SemaphoreType.DMA((2,))] * 3"), BUG)
    assert [f.code for f in run(_unnamed(src))[0].findings] == []


def _jax(tmp_path, call: str, sem: str):
    (tmp_path / "kernel_helpers.py").write_text(HELPERS)
    program = HEADER + _source(call, sem) + \
        "\nx = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)\n" \
        "print(float(copy(x).sum()))\n"
    (tmp_path / "main.py").write_text(program)
    return subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={"JAX_PLATFORMS": "cpu", "PATH": ""})


@pytest.mark.parametrize("call", ["call", "decorated"])
def test_jax_runs_the_twin(tmp_path, call):
    p = _jax(tmp_path, CALL if call == "call" else DECORATED, OK)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == str(float(sum(range(2 * 8 * 128))))


@pytest.mark.parametrize("call", ["call", "decorated"])
def test_jax_refuses_the_bug(tmp_path, call):
    p = _jax(tmp_path, CALL if call == "call" else DECORATED, BUG)
    assert p.returncode != 0
    assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, p.stderr[-2000:]
