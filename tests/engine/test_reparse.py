"""Incremental parsing of the editor's next version: whatever it reuses,
the tree is the one a full parse gives, positions included."""
from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from pallas_lsp.engine import reparse
from pallas_lsp.engine.source import parse

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "server" / "pallas_lsp"
                                                            / "engine").glob("*.py"))[:6]

BASE = '''import functools


@functools.partial(jax.jit, static_argnums=1)
def launch(x, n):
    a = 1; b = 2
    return x
    # done


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]
'''


def same_as_full(text: str) -> bool:
    """Parse BASE, then `text` incrementally; compare with a full parse."""
    reparse.forget("k")
    reparse.parse_version(BASE, "k")
    got = reparse.parse_version(text, "k")
    full = parse(text)
    assert (got.syntax_error is None) == (full.syntax_error is None)
    return ast.dump(got.tree, include_attributes=True) == ast.dump(full.tree, include_attributes=True)


@pytest.mark.parametrize("old, new", [
    ("    a = 1; b = 2", "    a = 1; b = 3"),  # two statements on one line
    ("    # done", "    done = 1"),  # a comment after a block becomes part of it
    ("    # done", "done = 1"),  # ... or a statement of its own
    ("@functools.partial(jax.jit, static_argnums=1)", "@functools.partial(jax.jit)"),
    ("    return x", "    return (x"),  # does not parse: the full parse repairs it
    ("def kernel(x_ref, o_ref):", "def kernel(x_ref, o_ref, s):"),
    ("import functools", "import functools, math"),
    ("", "x = 1"),  # a blank line between statements
])
def test_an_edit_gives_the_full_parse(old, new):
    assert old in BASE
    assert same_as_full(BASE.replace(old, new, 1))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_random_line_edits_of_real_files(path):
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rng = random.Random(path.name)
    edits = [lambda s: s + "  # x", lambda s: s[:-1], lambda s: "# " + s, lambda s: s.lstrip(),
             lambda s: "    " + s, lambda s: s + ")", lambda s: s.replace("=", "== (", 1), lambda s: ""]
    for _ in range(25):
        new = list(lines)
        k = rng.randrange(len(lines))
        new[k] = rng.choice(edits)(new[k])
        changed = "\n".join(new)
        reparse.forget("f")
        reparse.parse_version(text, "f")
        got = reparse.parse_version(changed, "f")
        full = parse(changed)
        assert (got.syntax_error is None) == (full.syntax_error is None)
        assert ast.dump(got.tree, include_attributes=True) == \
            ast.dump(full.tree, include_attributes=True), (k, new[k])


def test_nodes_of_untouched_statements_are_reused():
    reparse.forget("k")
    before = reparse.parse_version(BASE, "k")
    after = reparse.parse_version(BASE.replace("b = 2", "b = 3"), "k")
    assert after.tree.body[0] is before.tree.body[0]  # the import, untouched
    assert after.tree.body[-1] is before.tree.body[-1]  # the kernel, untouched
    assert after.tree.body[1] is not before.tree.body[1]  # the launcher, edited
