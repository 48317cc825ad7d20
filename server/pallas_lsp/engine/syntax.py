"""Reading an AST quickly. `ast.walk` visits every node through two
generators per node, and half the nodes it yields are the shared
`Load`/`Store` and operator singletons no check of ours looks at; this walk
is a plain loop over the fields that can hold nodes, about 4x faster on
kernel files, where walks of launchers and kernels were 5-10 % of an
analysis."""
from __future__ import annotations

import ast

# Fields that only ever hold a context, an operator or text.
_NOT_NODES = frozenset({"ctx", "op", "ops", "type_comment", "kind"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    out = _FIELDS[cls] = tuple(f for f in cls._fields if f not in _NOT_NODES)
    return out


def walk(node: ast.AST) -> list[ast.AST]:
    """`node` and everything under it, in `ast.walk`'s (breadth-first)
    order, without expression contexts and operators."""
    out = [node]
    append = out.append
    fields = _FIELDS
    i = 0
    while i < len(out):
        n = out[i]
        i += 1
        for name in fields.get(n.__class__) or _fields(n.__class__):
            v = getattr(n, name, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, ast.AST):
                        append(x)
            elif isinstance(v, ast.AST):
                append(v)
    return out


def children(node: ast.AST) -> list[ast.AST]:
    """The direct children of `node` (`ast.iter_child_nodes` without
    contexts and operators)."""
    out = []
    for name in _FIELDS.get(node.__class__) or _fields(node.__class__):
        v = getattr(node, name, None)
        if v.__class__ is list:
            out.extend(x for x in v if isinstance(x, ast.AST))
        elif isinstance(v, ast.AST):
            out.append(v)
    return out


_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)
_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def dead_code(tree: ast.AST) -> frozenset[int]:
    """ids of the nodes Python never runs: every statement after a `return`,
    `raise`, `break` or `continue` of its block, and all inside it (a def
    there is never defined, so its body never runs either). Only statements
    hold blocks, so only they are visited; dead code (rare) is walked whole."""
    dead: set[int] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if block.__class__ is not list:
                continue
            for i, stmt in enumerate(block):
                if isinstance(stmt, _EXITS):
                    for after in block[i + 1:]:
                        dead.update(map(id, walk(after)))
                    break
                stack.append(stmt)
        cases = getattr(node, "cases", None)  # match statements
        if cases.__class__ is list:
            stack.extend(cases)
    return frozenset(dead)
