"""A DMA handed a bare name for several semaphores (`recv_sems`,
`self.semaphores`) where the engine has no value for it.

A kernel launched through a helper of another package gives the engine no
value for its parameters. A semaphore argument named as several semaphores
is then either a whole semaphore array or a list of semaphores, and JAX
refuses both: one DMA signals one semaphore. A name the interpreter knows,
and a name without the plural, are left alone. JAX, in TPU interpret mode,
refuses the array and runs the `.at[i]` twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

UNSEEN = "from kernel_tools import launch\n"

BODY = '''
def body(x_hbm, o_hbm, buf, SEMS):
    for j in range(2):
        pltpu.async_copy(x_hbm.at[j], buf, SEM).wait()  # SITE
        pltpu.sync_copy(buf, o_hbm.at[j])
'''

LAUNCH = '''
def launch(kernel, x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape[1:], x.dtype), pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams())(x)
'''


def _body(name: str, sem: str) -> str:
    return BODY.replace("SEMS", name).replace("SEM", sem)


def _sites(body: str, header: str = HEADER + UNSEEN):
    analysis, src = run(body, header)
    return [(f.code, f.span.line) for f in analysis.findings], src, analysis


@pytest.mark.parametrize("name", ["sems", "recv_sems", "dma_semaphores", "sems_in", "sem_recvs",
                                  "recvs15", "sends", "dma_recvs", "sems2"])
def test_a_bare_name_for_several_is_reported(name):
    got, src, analysis = _sites(_body(name, name))
    assert got == [("PAL103", line_of(src, "# SITE"))]
    assert "named as several semaphores" in analysis.findings[0].detail


def test_through_a_temporary():
    body = _body("sems", "s").replace("    for j", "    s = sems\n    for j")
    got, src, _ = _sites(body)
    assert got == [("PAL103", line_of(src, "# SITE"))]


@pytest.mark.parametrize("name, sem", [
    ("sems", "sems.at[j]"),  # one of them
    ("sem", "sem"),  # a name for one
    ("sem_ids", "sem_ids"),  # not the plural of a semaphore
    ("semsize", "semsize"),
    ("sendsize", "sendsize"),
    ("recv", "recv"),  # one receive semaphore
])
def test_silent(name, sem):
    assert _sites(_body(name, sem))[0] == []


def test_a_known_single_semaphore_named_so_is_silent():
    # The interpreter knows the launch: `sems` is one DMA semaphore.
    body = _body("sems", "sems") + '''

def copy(x):
    return pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape[1:], x.dtype), pltpu.SemaphoreType.DMA])(x)
'''
    assert _sites(body, HEADER)[0] == []


def _jax(body: str):
    return run_jax(HEADER + LAUNCH + textwrap.dedent(body) +
                   "\nx = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2, 8, 128)\n"
                   "print(bool((launch(body, x) == x).all()))\n")


def test_jax_refuses_the_whole_array():
    p = _jax(_body("sems", "sems"))
    jax_refuses(p, "Cannot signal on a non-()-shaped semaphore: (2,)")


def test_jax_runs_the_twin():
    p = _jax(_body("sems", "sems.at[j]"))
    jax_prints(p, "True")


METHODS = '''
class Pipe:
    def __init__(self, buf, sem_recvs):
        self.buf, self.sem_recvs = buf, sem_recvs

    def start(self, x_hbm, slot):
        pltpu.make_async_copy(x_hbm.at[slot], self.buf.at[slot], self.sem_recvs.at[slot]).start()

    def wait(self, slot):
        sem = SEM
        pltpu.make_async_copy(self.buf.at[slot], self.buf.at[slot], sem).wait()  # SITE
'''


def test_a_temporary_of_an_attribute_indexed_elsewhere():
    # `sem = self.sem_recvs`: the class's other method selects one with `.at[slot]`.
    got, src, analysis = _sites(METHODS.replace("SEM", "self.sem_recvs"))
    assert got == [("PAL406", line_of(src, "# SITE"))]
    assert "self.sem_recvs.at[slot]" in analysis.findings[0].detail
    assert _sites(METHODS.replace("SEM", "self.sem_recvs.at[slot]"))[0] == []
