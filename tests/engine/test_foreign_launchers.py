"""Launchers of a test-utility module the engine cannot see, used at module
level (`import pallas_test_util as ptu`, then `ptu.pallas_call(kernel, ...)`,
`functools.partial(ptu.pallas_call, ...)`, `from pallas_test_util import
kernel`): bound like Pallas's own launcher of that name when the function
passed reads as a kernel, as `self.pallas_call` of an unseen base class is.

Each launch is written correct (no finding, its DMA sites known, its launch
bound) and with the descriptor built on a read of the whole Ref (PAL101 on
that line, which only an engine that bound the kernel's parameters says:
the syntax floor is off here)."""
import pytest

from pallas_lsp.engine import analyze


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch):
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")


HEAD = '''\
import functools

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import pallas_test_util as ptu
from pallas_test_util import kernel as test_kernel

ANY = pl.BlockSpec(memory_space=pltpu.ANY)
SEM = [pltpu.SemaphoreType.DMA(())]


def copy(x_ref, o_ref, sem):
  c = pltpu.make_async_copy(x_ref, o_ref, sem)  # BUG
  c.start()
  c.wait()
'''

LAUNCHES = {
    "module_attribute": '''
def run(x):
  return ptu.pallas_call(copy, out_shape=x, in_specs=[ANY], out_specs=ANY,
                         scratch_shapes=SEM)(x)
''',
    "partial_decorator": '''
def run(x):
  launch = functools.partial(ptu.pallas_call, out_shape=x, in_specs=[ANY], out_specs=ANY,
                             scratch_shapes=SEM)
  return launch(copy)(x)
''',
    "imported_name": '''
def run(x):
  @test_kernel(out_shape=x, mesh=pltpu.create_tensorcore_mesh("core"), scratch_shapes=SEM)
  def wrapped(x_ref, o_ref, sem):
    pltpu.sync_copy(x_ref, o_ref)
    copy(x_ref, o_ref, sem)
  return wrapped(x)
''',
}


def _program(name: str, bug: bool) -> str:
    text = HEAD + LAUNCHES[name]
    return text.replace("make_async_copy(x_ref, o_ref", "make_async_copy(x_ref[...], o_ref") \
        if bug else text


@pytest.mark.parametrize("name", LAUNCHES)
def test_correct_launch_is_bound_and_clean(name):
    a = analyze(_program(name, bug=False), "k.py", coverage=True)
    assert [f.code for f in a.findings] == []
    assert a.coverage.launches and all(la.bound for la in a.coverage.launches), \
        a.coverage.launches
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known and s.launched for s in dma), [(s.line, s.reason) for s in dma]


@pytest.mark.parametrize("name", LAUNCHES)
def test_whole_ref_read_is_reported_through_the_foreign_launcher(name):
    text = _program(name, bug=True)
    line = next(i for i, s in enumerate(text.split("\n")) if "# BUG" in s)
    found = {(f.code, f.span.line) for f in analyze(text, "k.py").findings}
    assert ("PAL101", line) in found, found


def test_a_function_that_is_not_a_kernel_is_not_bound():
    """`ptu.pallas_call(helper, ...)` where the helper names no Pallas API and
    writes no parameter: an unrelated function of that name, left unknown."""
    text = HEAD + '''
def add(a, b):
  return a + b


def run(x):
  return ptu.pallas_call(add, 3)(x)
'''
    a = analyze(text, "k.py", coverage=True)
    assert [f.code for f in a.findings] == []
    assert not any(la.kernel == "add" for la in a.coverage.launches)


def test_jax_and_numpy_names_are_not_taken_for_test_utilities():
    text = HEAD.replace("import pallas_test_util as ptu", "import numpy as ptu") + '''
def run(x):
  return ptu.kernel(copy, 3)
'''
    a = analyze(text, "k.py", coverage=True)
    assert not any(la.bound for la in a.coverage.launches)


def test_a_bare_decorator_of_a_gpu_library_is_not_a_launch():
    """`@cute.kernel` (CUTLASS) writes into its parameters like a kernel, but a
    module's bare `kernel` decorator given no launch configuration is not
    Pallas's: not bound, not listed as a launch."""
    text = """
import cutlass.cute as cute


@cute.kernel
def copy_kernel(src, dst):
    dst[0] = src[0]
"""
    a = analyze(text, "k.py", coverage=True)
    assert a.findings == [] and a.coverage.launches == []
