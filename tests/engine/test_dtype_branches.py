"""A launcher's branch on the dtype its caller chose (`x.dtype == jnp.int8`,
`!=`, `in`): decided when the dtype is known (engine/apis/arrays.py
`compare_dtypes`), so the launch gets the branch's block and the rules judge
it; undecided, and silent, when the dtype is not known."""
from __future__ import annotations

import ast

import pytest
from test_caller_shapes import _input_block, _line, _tpu_findings

from pallas_lsp.engine.apis.arrays import compare_dtypes
from pallas_lsp.engine.model import Api, Const, Seq

INT8 = "jnp.zeros((64, 128), jnp.int8)"


@pytest.mark.parametrize("test", [
    "block = 8 if x.dtype == jnp.int8 else 32",
    "block = 32 if x.dtype != jnp.int8 else 8",
    "block = 8 if x.dtype in (jnp.int8, jnp.uint8) else 32",
    "block = 32 if x.dtype not in [jnp.int8, jnp.uint8] else 8",
    "block = 8 if x.dtype == 'int8' else 32",
])
def test_the_branch_the_callers_dtype_takes_is_judged(test):
    body = f"""
        def launch(x):
            {test}
            return rows(x, block_rows=block, copy=True)

        def test_it():
            launch({INT8})
        """
    found, src = _tpu_findings(body)
    (f,) = found
    assert f.code == "PAL401" and f.span.line == _line(src, "# IN")
    assert "int8 tiles are (32, 128)" in f.detail


def test_the_other_branch_is_silent_and_sized():
    body = f"""
        def launch(x):
            block = 32 if x.dtype == jnp.int8 else 8
            return rows(x, block_rows=block, copy=True)

        def test_it():
            launch({INT8})
        """
    assert _tpu_findings(body)[0] == []
    (part,) = _input_block(body)
    assert part.shape == (32, 128) and part.dtype == "int8" and part.exact


def test_a_float_caller_takes_the_else_branch():
    body = """
        def launch(x):
            if x.dtype == jnp.int8:
                block = 32
            else:
                block = 8
            return rows(x, block_rows=block)

        def test_it():
            launch(jnp.zeros((64, 128), jnp.float32))
        """
    assert _tpu_findings(body)[0] == []
    (part,) = _input_block(body)
    assert part.shape == (8, 128)


def test_an_unknown_dtype_stays_undecided():
    body = """
        def launch(x):
            block = 8 if x.dtype == jnp.int8 else 32
            return rows(x, block_rows=block, copy=True)

        def test_it(dt):
            launch(jnp.zeros((64, 128), dt))
        """
    assert _tpu_findings(body)[0] == []


@pytest.mark.parametrize("left, op, right, want", [
    (Api(name="jnp.int8"), ast.Eq(), Api(name="jnp.int8"), True),
    (Api(name="jnp.bfloat16"), ast.Eq(), Const(value="bfloat16"), True),
    (Api(name="jnp.int8"), ast.NotEq(), Api(name="jnp.uint8"), True),
    (Api(name="jnp.float32"), ast.In(), Seq(items=(Api(name="jnp.int8"),)), False),
    # numpy: `x.dtype is jnp.int8` is False whatever x is; not folded here
    (Api(name="jnp.int8"), ast.Is(), Api(name="jnp.int8"), None),
    (Const(value="int8"), ast.Eq(), Const(value="int8"), None),  # Python's, not ours
    (Api(name="jnp.zeros"), ast.Eq(), Api(name="jnp.int8"), None),
    (Api(name="jnp.int8"), ast.In(), Seq(items=(Api(name="jnp.int8"), Const(value=None))), None),
])
def test_compare_dtypes(left, op, right, want):
    got = compare_dtypes(left, right, op)
    assert (got.value if got is not None else None) == want
