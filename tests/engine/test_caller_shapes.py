"""Shapes and dtypes from the callers (engine/apis/arrays.py, the operands of
a pallas_call, test-case variants): what the engine learns from a caller's
arrays, and that what it cannot tell stays silent. The compiler's side of
each rule: tests/compile/test_caller_shapes.py."""
from __future__ import annotations

import textwrap

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.rules import _tpu
from pallas_lsp.engine.source import parse

HEADER = """\
import functools
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from absl.testing import parameterized
import pytest


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def rows(x, block_rows=8, copy=False):
    return pl.pallas_call(
        copy_kernel if copy else kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))],  # IN
        out_specs=pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0)),
    )(x)
"""


def _run(body: str):
    src = HEADER + textwrap.dedent(body)
    return analyze(src, "snippet.py"), src


def _tpu_findings(body: str):
    a, src = _run(body)
    return [f for f in a.findings if f.code.startswith("PAL4")], src


def _line(src: str, marker: str) -> int:
    return next(i for i, text in enumerate(src.split("\n")) if marker in text)


def _input_block(body: str):
    """The in_specs[0] part of the launch that was given its operands."""
    src = HEADER + textwrap.dedent(body)
    it = Interpreter(parse(src), "snippet.py")
    it.run()
    parts = [p for lv in _tpu.vmem_rows(it.events) if lv.launch.operands is not None
             for p in lv.estimate.parts if p.name == "in_specs[0]"]
    return parts


@pytest.mark.parametrize("make, shape, dtype", [
    ("jnp.zeros((48, 128), jnp.bfloat16)", (48, 128), "bfloat16"),
    ("jnp.ones(shape=(48, 128), dtype=jnp.int8)", (48, 128), "int8"),
    ("jnp.full((48, 128), 2.0)", (48, 128), "float32"),
    ("jnp.arange(48 * 128).reshape(48, 128)", (48, 128), "int32"),
    ("jnp.arange(48 * 128, dtype=jnp.float16).reshape(-1, 128)", (48, 128), "float16"),
    ("jax.random.normal(jax.random.PRNGKey(0), (48, 128), jnp.bfloat16)", (48, 128), "bfloat16"),
    ("jax.random.uniform(jax.random.PRNGKey(0), (48, 128))", (48, 128), "float32"),
    ("jax.random.randint(jax.random.PRNGKey(0), (48, 128), 0, 9, dtype=jnp.uint8)", (48, 128),
     "uint8"),
    ("jnp.zeros((48, 128)).astype(jnp.int8)", (48, 128), "int8"),
    ("jnp.zeros_like(jnp.zeros((48, 128), jnp.int16))", (48, 128), "int16"),
    ("np.zeros((48, 128), np.int8)", (48, 128), "int8"),
    ("jnp.asarray(np.ones((48, 128), dtype=np.float16))", (48, 128), "float16"),
])
def test_constructors_give_the_operand_its_shape_and_dtype(make, shape, dtype):
    (part,) = _input_block(f"""
        def test_it():
            rows({make}, block_rows=16)
        """)
    assert part.shape == (16, shape[1]) and part.dtype == dtype and part.count == 2


@pytest.mark.parametrize("make", [
    "np.random.randn(48, 128)",  # float64: 32 or 64 bits by jax's mode
    "np.ones((48, 128))",
    "jnp.array([[1, 2], [3, 4]])",  # literals: not shaped
])
def test_dtypes_that_depend_on_the_mode_stay_unknown(make):
    parts = _input_block(f"""
        def test_it():
            rows({make}, block_rows=16)
        """)
    assert all(p.dtype is None for p in parts)


def test_x64_files_get_no_default_dtype():
    parts = _input_block("""
        jax.config.update("jax_enable_x64", True)

        def test_it():
            rows(jnp.zeros((48, 128)), block_rows=16)
        """)
    assert [p.dtype for p in parts] == [None]


def test_exact_input_block_in_the_vmem_estimate():
    src = HEADER + textwrap.dedent("""
        def fixed(x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct((64, 512), jnp.bfloat16),
                grid=(4,),
                in_specs=[pl.BlockSpec((16, 512), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((16, 512), lambda i: (i, 0)),
            )(x)

        def test_it():
            fixed(jnp.zeros((64, 512), jnp.bfloat16))
        """)
    it = Interpreter(parse(src), "snippet.py")
    it.run()
    call = _line(src, "def fixed") + 2  # 1-based line of its pallas_call
    rows_ = [lv for lv in _tpu.vmem_rows(it.events) if lv.launch.node.lineno == call]
    # the same call before its operands were seen (same specs) is not shown again
    (lv,) = rows_
    assert lv.launch.operands is not None and lv.estimate.exact
    # two buffers of a (16, 512) bf16 block, in and out
    assert lv.estimate.total == 4 * 16 * 512 * 2


def test_input_block_judged_against_the_callers_array():
    found, src = _tpu_findings("""
        def test_it():
            x = jnp.ones((48, 128), jnp.float32)
            rows(x, block_rows=12)
        """)
    (f,) = found
    assert f.code == "PAL401" and f.span.line == _line(src, "# IN")
    assert "with x: float32[48, 128]" in f.detail
    (rel,) = f.related
    assert rel.span.line == _line(src, "x = jnp.ones") and rel.message.startswith("x: float32")


def test_a_block_equal_to_the_array_is_fine():
    found, _ = _tpu_findings("""
        def test_it():
            rows(jnp.ones((12, 100), jnp.float32), block_rows=12)
        """)
    assert found == []


def test_int8_blocks_need_32_rows():
    found, src = _tpu_findings("""
        def test_bad():
            rows(jnp.zeros((64, 128), jnp.int8), block_rows=16, copy=True)

        def test_good():
            rows(jnp.zeros((64, 128), jnp.int8), block_rows=32, copy=True)
            rows(jnp.zeros((64, 128), jnp.bfloat16), block_rows=8, copy=True)
        """)
    (f,) = found
    assert f.span.line == _line(src, "# IN") and "int8 tiles are (32, 128)" in f.detail


def test_unknown_shapes_stay_silent():
    found, _ = _tpu_findings("""
        def test_it(n):
            rows(jnp.ones((n, 100), jnp.int8), block_rows=12, copy=True)
            rows(jnp.ones((48, 128), jnp.int8), block_rows=n, copy=True)
        """)
    assert found == []


def test_int8_operand_reaches_kernel_arithmetic():
    found, src = _tpu_findings("""
        def test_it():
            x = jax.random.randint(jax.random.PRNGKey(0), (64, 128), 0, 3, dtype=jnp.int8)
            rows(x, block_rows=32)
        """)
    (f,) = found
    assert f.code == "PAL403" and f.span.line == _line(src, "o_ref[...] = x_ref[...] * 2")
    assert f.related[0].span.line == _line(src, "x = jax.random.randint")


def test_pytest_cases_run_one_by_one():
    found, src = _tpu_findings("""
        @pytest.mark.parametrize("n", [64, 48])
        @pytest.mark.parametrize("block", [8, 12])
        def test_it(n, block):
            rows(jnp.ones((n, 256), jnp.float32), block_rows=block)
        """)
    (f,) = found  # (48, 12) breaks; (64, 12) is not a launch anyone can make either
    assert "`test_it`" in f.detail and "block=12" in f.detail


def test_absl_parameters_and_named_parameters():
    found, _ = _tpu_findings("""
        class T(parameterized.TestCase):
            @parameterized.named_parameters(("ok", 64, 8), ("bad", 48, 12))
            def test_named(self, n, block):
                rows(jnp.ones((n, 256), jnp.float32), block_rows=block)
        """)
    (f,) = found
    assert "n=48, block=12" in f.detail


def test_absl_product():
    found, _ = _tpu_findings("""
        class T(parameterized.TestCase):
            @parameterized.product(dtype=[jnp.float32, jnp.int8], block=[32])
            def test_product(self, dtype, block):
                rows(jnp.ones((64, 128), dtype), block_rows=block)
        """)
    assert [f.code for f in found] == ["PAL403"]  # int8 * 2 in the kernel


def test_cases_that_are_not_literals_are_not_run():
    found, _ = _tpu_findings("""
        CASES = make_cases()

        @pytest.mark.parametrize("n, block", CASES)
        def test_it(n, block):
            rows(jnp.ones((n, 256), jnp.float32), block_rows=block)
        """)
    assert found == []


def test_jit_static_argnames_and_partial():
    found, _ = _tpu_findings("""
        def test_jit():
            f = jax.jit(rows, static_argnames="block_rows")
            f(jnp.ones((48, 128), jnp.float32), block_rows=12)

        def test_partial():
            f = functools.partial(rows, block_rows=16)
            f(jnp.ones((48, 128), jnp.float32))
        """)
    (f,) = found
    assert "(12, 128)" in f.detail


def test_a_test_file_shapes_a_library_launcher(tmp_path):
    from pallas_lsp.engine.project import Project

    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "ops.py").write_text(HEADER)
    test = tmp_path / "test_ops.py"
    test.write_text(textwrap.dedent("""\
        import jax.numpy as jnp
        from mylib.ops import rows


        def test_rows():
            x = jnp.ones((48, 128), jnp.float32)
            rows(x, block_rows=12)
        """))
    a = analyze(test.read_text(), str(test), project=Project([str(tmp_path)]))
    lib = str(tmp_path / "mylib" / "ops.py")
    (there,) = [f for f in a.foreign.get(lib, []) if f.code == "PAL401"]
    assert there.span.line == _line(HEADER, "# IN")
    assert "with x: float32[48, 128]" in there.detail
    made = [r for r in there.related if r.path == str(test)]
    assert made and made[0].span.line == 5 and made[0].message.startswith("x: float32[48, 128]")
    (here,) = [f for f in a.findings if f.code == "PAL401"]
    assert here.span.line == 6  # the call of the launcher


def test_pythons_random_and_bad_reshapes_are_not_arrays():
    src = HEADER + textwrap.dedent("""
        import random

        def test_it():
            rows(random.randint(0, 9), block_rows=16)
            rows(jnp.arange(100).reshape(16, 128), block_rows=16)
        """)
    it = Interpreter(parse(src), "snippet.py")
    it.run()
    ops = [la.operands for la in it.events.launches if la.operands is not None]
    # Python's random.randint is a number; a reshape Python would refuse has no shape
    assert [[(sd.shape, sd.dtype) for sd in o] for o in ops] == [[(None, "int32")]]


@pytest.mark.parametrize("dtype, rows_, bad", [
    ("uint8", 16, True), ("float8_e4m3fn", 8, True), ("float8_e5m2", 8, True),
    ("int16", 8, False), ("bool_", 8, False), ("float8_e5m2", 32, False),
])
def test_block_rows_per_dtype(dtype, rows_, bad):
    """As measured with a deviceless compile for v5e and v6e."""
    found, _ = _tpu_findings(f"""
        def test_it():
            rows(jnp.zeros((64, 128), jnp.{dtype}), block_rows={rows_}, copy=True)
        """)
    assert [f.code for f in found] == (["PAL401"] if bad else [])
