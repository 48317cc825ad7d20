"""Static facts about function and loop bodies, read from the AST: which
names a loop reads from its previous iteration, whether a loop runs
straight through, which names a def takes from its closure."""
from __future__ import annotations

import ast

from pallas_lsp.engine import syntax


def closure_values(scope: tuple, names: tuple) -> list:
    """The values of `names` in a (parent, vars) snapshot of a closure."""
    parent, vars = scope
    return [vars[n] if n in vars else (parent.lookup(n) if parent is not None else None)
            for n in names]


def free_names(func: ast.AST) -> tuple:
    """Names a def reads that it (and the defs inside it) does not bind:
    what it takes from its closure or the module."""
    loads, stores = set(), set()
    for node in syntax.walk(func):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, ast.arg):
            stores.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node is not func:
            stores.add(node.name)
    return tuple(sorted(loads - stores))


def branch_free_names(func: ast.AST) -> tuple:
    """The free names of a def (`free_names`) that its branch tests read
    (`if`, `elif`, `while`, a conditional expression, `match`): the closure
    values that can change which of its code runs."""
    tests: set[str] = set()
    for node in syntax.walk(func):
        test = node.test if isinstance(node, (ast.If, ast.IfExp, ast.While)) else \
            node.subject if isinstance(node, ast.Match) else None
        if test is not None:
            tests.update(n.id for n in syntax.walk(test) if isinstance(n, ast.Name))
    return tuple(n for n in free_names(func) if n in tests)


def straight_loop(node: ast.For, cache: dict) -> bool:
    """No `break` / `continue` / `return` / `yield` of this loop in its body
    (then running each iteration in turn is what Python does)."""
    hit = cache.get(id(node))
    if hit is None:
        hit = True
        stack = list(node.body)
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom, ast.Break, ast.Continue)):
                hit = False
                break
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
                # its own break/continue are its business; returns still count
                stack.extend(x for x in syntax.walk(n) if isinstance(x, (ast.Return, ast.Yield,
                                                                      ast.YieldFrom)))
                continue
            stack.extend(syntax.children(n))
        cache[id(node)] = hit
    return hit


def exposed_reads(loop: ast.AST) -> frozenset:
    """Names a loop body may read from the previous iteration: every name it
    loads, except where an assignment earlier on every path through the
    body has already rebound it. Reads inside nested functions count
    wherever they are (they run when called)."""
    out: set[str] = set()
    first: set[str] = set()
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        first = _targets(loop.target)
    if isinstance(loop, ast.While):
        _loads(loop.test, set(), out)  # also evaluated again after the body
    _block(loop.body, first, out)
    return frozenset(out)


# Module-level helpers of exposed_reads (closures calling themselves would be
# reference cycles, left for the collector).
def _loads(node, assigned: set, out: set) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load) and n.id not in assigned:
                out.add(n.id)
            continue
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)  # `x += 1` reads x (its target is a Store)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            out.update(m.id for m in syntax.walk(n) if isinstance(m, ast.Name))
            continue
        stack.extend(syntax.children(n))


def _targets(node) -> set:
    return {n.id for n in syntax.walk(node) if isinstance(n, ast.Name)}


def _block(stmts, assigned: set, out: set) -> set:
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            _loads(stmt.test, assigned, out)
            _block(stmt.body, set(assigned), out)
            _block(stmt.orelse, set(assigned), out)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            _loads(stmt.iter, assigned, out)
            _block(stmt.body, assigned | _targets(stmt.target), out)
            _block(stmt.orelse, set(assigned), out)
        elif isinstance(stmt, ast.While):
            _loads(stmt.test, assigned, out)
            _block(stmt.body, set(assigned), out)
            _block(stmt.orelse, set(assigned), out)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                _loads(item.context_expr, assigned, out)
                if item.optional_vars is not None:
                    assigned |= _targets(item.optional_vars)
            assigned = _block(stmt.body, assigned, out)  # the body always runs
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                _loads(stmt.value, assigned, out)
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                if isinstance(t, (ast.Name, ast.Tuple, ast.List)):
                    assigned |= _targets(t)
                else:
                    _loads(t, assigned, out)  # `x[i] = v`, `o.a = v` read x, o
        else:
            _loads(stmt, assigned, out)
    return assigned

