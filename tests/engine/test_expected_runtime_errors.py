"""A test block that expects only the run-time error class (`assertRaises(
jax.errors.JaxRuntimeError)`: a debug check failing on the device, a compile
out of VMEM) does not expect what JAX raises while tracing. A trace-time
mistake in its kernel (a read handed to a DMA, a negative priority) raises a
`ValueError` that escapes the block and fails the test: the trace-time rules
and the syntax floor judge such a kernel; the compile-time ones stay silent
(expected_errors.py). JAX's side is checked by running the same test file."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.engine.conftest import codes

SUITE = '''
import functools
import unittest

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def launch(kernel, x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA])(x)


class T(unittest.TestCase):
    def test_it(self):
        def kernel(x_hbm, o_hbm, sem):
            pltpu.async_copy(SRC, o_hbm, sem PRIORITY).wait()

        with BLOCK:
            launch(kernel, jnp.zeros((8, 128), jnp.float32))
'''

RUNTIME = "self.assertRaises(jax.errors.JaxRuntimeError)"
RUNTIME_TUPLE = "self.assertRaises((jax.errors.JaxRuntimeError, jax.errors.JaxRuntimeError))"


def suite(block: str, src: str = "x_hbm", priority: str = "") -> str:
    return (SUITE.replace("BLOCK", block).replace("SRC", src)
            .replace(" PRIORITY", f", priority={priority}" if priority else ""))


@pytest.mark.parametrize("block", [RUNTIME, RUNTIME_TUPLE,
                                   "pytest.raises(jax.errors.JaxRuntimeError)"])
@pytest.mark.parametrize("src, priority, code", [
    ("x_hbm[...]", "", "PAL101"),     # the floor's case
    ("x_hbm", "-1", "PAL108"),
])
def test_a_run_time_only_block_does_not_hide_a_trace_time_mistake(block, src, priority, code):
    text = suite(block, src, priority)
    if block.startswith("pytest"):
        text = "import pytest\n" + text
    assert code in codes(text)


def test_a_read_through_a_name_is_judged_too():
    text = suite(RUNTIME).replace("pltpu.async_copy(x_hbm,", "v = x_hbm[...]\n"
                                  "            pltpu.async_copy(v,")
    assert "PAL101" in codes(text)


@pytest.mark.parametrize("block", ["self.assertRaises(ValueError)",
                                   "self.assertRaises((ValueError, jax.errors.JaxRuntimeError))"])
def test_a_block_that_may_expect_the_trace_time_error_stays_silent(block):
    assert codes(suite(block, "x_hbm[...]")) == []


def test_the_twin_gets_nothing():
    assert codes(suite(RUNTIME)) == []


def _run_suite(tmp_path, text: str) -> subprocess.CompletedProcess:
    (tmp_path / "suite_rt.py").write_text(textwrap.dedent(text))
    # TPU interpret mode on this CPU machine: the kernel traces as it would for a TPU.
    boot = ("import jax\nfrom jax._src.pallas import pallas_call as pc\n"
            "from jax.experimental.pallas import tpu as pltpu\n"
            "orig = pc.pallas_call\n"
            "def forced(*a, **k):\n"
            "    k['interpret'] = pltpu.InterpretParams()\n"
            "    return orig(*a, **k)\n"
            "import jax.experimental.pallas as pl\npl.pallas_call = forced\n"
            "import unittest, sys\n"
            "r = unittest.main(module='suite_rt', exit=False, argv=['x']).result\n"
            "print('ERRORS', [e[1] for e in r.errors])\n"
            "print('FAILURES', len(r.failures))\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tmp_path),
           "JAX_TRACEBACK_FILTERING": "off"}
    return subprocess.run([sys.executable, "-c", boot], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)


@pytest.mark.parametrize("src, priority, message", [
    ("x_hbm[...]", "", "DMA source/destination/semaphore arguments must be Refs."),
    ("x_hbm", "-1", "DMA start priority must be non-negative: -1"),
])
def test_jax_fails_the_test_with_the_trace_time_error(tmp_path, src, priority, message):
    out = _run_suite(tmp_path, suite(RUNTIME, src, priority)).stdout
    assert message in out.split("ERRORS", 1)[1], out


def test_jax_passes_the_block_that_expects_the_value_error(tmp_path):
    out = _run_suite(tmp_path, suite("self.assertRaises(ValueError)", "x_hbm[...]")).stdout
    assert "ERRORS []" in out and "FAILURES 0" in out, out
