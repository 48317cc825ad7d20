"""engine/syntax.py: the fast walk visits what `ast.walk` visits, in the
same order, less the context and operator singletons."""
import ast
import importlib.util
from pathlib import Path

import pytest

from pallas_lsp.engine import syntax

ROOT = Path(__file__).resolve().parents[2]
_SINGLETONS = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _files():
    files = sorted((ROOT / "examples").rglob("*.py")) + [Path(syntax.__file__)]
    spec = importlib.util.find_spec("jax")
    if spec is not None and spec.origin:
        files += sorted((Path(spec.origin).parent / "experimental/pallas/ops/tpu").rglob("*.py"))
    return files


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_walk_is_ast_walk_without_contexts_and_operators(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    expected = [n for n in ast.walk(tree) if not isinstance(n, _SINGLETONS)]
    got = syntax.walk(tree)
    assert len(got) == len(expected)
    assert all(a is b for a, b in zip(got, expected))


def test_children_of_every_node():
    tree = ast.parse("async def f(a, *b, c=1, **d):\n"
                     "    x: int = [i async for i in g() if not i] or {k: v for k, v in h}\n"
                     "    match x:\n        case [1, *rest] if rest: pass\n"
                     "    try:\n        pass\n    except* E as e:\n        del e\n")
    for node in ast.walk(tree):
        expected = [c for c in ast.iter_child_nodes(node) if not isinstance(c, _SINGLETONS)]
        assert syntax.children(node) == expected
