"""One launch site, many kernels: a test base class's `self.pallas_call`
wrapper (`pl.pallas_call(*args, **kwargs, interpret=...)`) is one
`pallas_call` for every test of a suite. Each kernel it is given is run, not
only the first few, and a kernel is never taken for another one that the site
launched earlier with the same specs."""
from __future__ import annotations

from pallas_lsp.engine import analyze

HEAD = '''
import unittest

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


class Base(unittest.TestCase):
  INTERPRET: bool = False

  def pallas_call(self, *args, **kwargs):
    return pl.pallas_call(*args, **kwargs, interpret=self.INTERPRET)


class DmaTest(Base):
'''

TEST = '''
  def test_copy_{i}(self):
    def kernel(x_hbm_ref, y_hbm_ref):
      def body(sem):
        pltpu.async_copy({src}, y_hbm_ref, sem).wait()
      pl.run_scoped(body, pltpu.SemaphoreType.DMA)
    x = jnp.ones((8, 128))
    self.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                     out_specs=pl.BlockSpec(memory_space=pl.ANY),
                     out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
'''

EXPECTED = '''
  def test_expects_the_error(self):
    def kernel(x_hbm_ref, y_hbm_ref):
      def body(sem):
        pltpu.async_copy(x_hbm_ref, y_hbm_ref, sem).wait()
      pl.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))
    with self.assertRaisesRegex(ValueError, 'Cannot signal'):
      x = jnp.ones((8, 128))
      self.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
'''


def _suite(n: int, bug_at: int | None, expected_last: bool = False) -> str:
    tests = [TEST.format(i=i, src="x_hbm_ref[...]" if i == bug_at else "x_hbm_ref")
             for i in range(n)]
    return HEAD + "".join(tests) + (EXPECTED if expected_last else "")


def _codes(text: str) -> list[tuple[int, str]]:
    return [(f.span.line + 1, f.code) for f in analyze(text, "test_suite.py").findings]


def _line_of(text: str, needle: str, nth: int) -> int:
    return [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln][nth]


def test_the_twentieth_kernel_of_a_shared_wrapper_is_still_checked():
    text = _suite(20, bug_at=19)
    line = _line_of(text, "x_hbm_ref[...]", 0)
    # PAL101 (JAX's first error there) and PAL204 (a load from an ANY Ref)
    assert sorted(_codes(text)) == [(line, "PAL101"), (line, "PAL204")]
    assert _codes(_suite(20, bug_at=None)) == []


def test_every_kernel_of_a_shared_wrapper_is_reached():
    result = analyze(_suite(20, bug_at=None), "test_suite.py", coverage=True)
    sites = [s for s in result.coverage.sites if s.kind == "dma"]
    assert len(sites) == 20 and all(s.known for s in sites), [s.line for s in sites if not s.known]


def test_a_kernel_expected_to_fail_after_many_others_with_the_same_specs_stays_silent():
    """Its launch has the specs of the earlier ones: it is run (and judged as
    expected to fail), not taken for them and left to run on its own."""
    assert _codes(_suite(12, bug_at=None, expected_last=True)) == []
