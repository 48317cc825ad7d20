"""Why a DMA argument the engine reached is Unknown, in words, for
`pallas-lsp coverage`: where the value came from (a parameter of a kernel
whose launch did not bind it, a parameter of a helper, the result of a call
the engine does not model, a name bound in code it did not follow).

Read from the source only: the expression's root name, the function the
call is in, and that function's assignments to the name."""
from __future__ import annotations

import ast

from pallas_lsp.engine import syntax

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _root_name(node: ast.AST | None) -> str | None:
    """`x`, `x.at[i]`, `refs[0]`, `self.buf.at[k]` -> the name they start from."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _params(func: ast.AST) -> list[str]:
    a = func.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return names


def _callee(node: ast.AST) -> str:
    try:
        return ast.unparse(node.func if isinstance(node, ast.Call) else node)
    except Exception:  # noqa: BLE001 - a name for a message only
        return "?"


def _names_in(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _last_binding(func: ast.AST, name: str, before: int) -> ast.AST | None:
    """The statement (an assignment, a `for`, a comprehension's `for`) that last
    binds `name` in `func` (not in nested defs) before line `before`."""
    best = None
    stack = list(syntax.children(func))
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS + (ast.ClassDef,)):
            continue
        targets = []
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        if targets and _line(node) < before and any(name in _names_in(t) for t in targets):
            if best is None or _line(node) > _line(best):
                best = node
        stack.extend(syntax.children(node))
    return best


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", None) or node.target.lineno


def explain(role: str, arg_node: ast.AST | None, call: ast.AST, func: ast.AST | None,
            launches) -> str:
    """One clause saying where the Unknown `role` argument of `call` came from."""
    name = _root_name(arg_node)
    if name is None:
        return ""
    try:
        text = ast.unparse(arg_node)
    except Exception:  # noqa: BLE001 - a name for a message only
        text = name
    # `sem` (`self.sems.at[slot]`) comes from ...
    subject = f"`{role}` (`{text}`)" if text != name and len(text) <= 60 else f"`{role}`"
    if func is None:
        return f"{subject} is `{name}`, a module-level name the engine could not tell"
    fname = getattr(func, "name", "<lambda>")
    if name in _params(func):
        mine = [la for la in launches if la.kernel_node is func]
        if mine and not any(la.bound for la in mine):
            why = next((la.reason for la in mine if la.reason), "")
            line = getattr(mine[0].node, "lineno", 0)
            return (f"{subject} comes from parameter `{name}` of kernel `{fname}`, which its "
                    f"launch (line {line}) did not bind" + (f": {why}" if why else ""))
        if mine:
            return (f"{subject} comes from parameter `{name}` of kernel `{fname}`, bound to a "
                    f"value the engine could not tell (a launch argument or scratch entry it "
                    f"does not model)")
        return (f"{subject} comes from parameter `{name}` of `{fname}`, whose callers pass a "
                f"value the engine could not tell")
    bound = _last_binding(func, name, getattr(call, "lineno", 1 << 30))
    if isinstance(bound, (ast.For, ast.AsyncFor, ast.comprehension)):
        return (f"{subject} is `{name}`, a loop variable (line {_line(bound)}) over items the "
                f"engine could not tell")
    if bound is not None:
        value = bound.value
        if isinstance(value, ast.Call):
            return (f"{subject} is `{name}`, the result of `{_callee(value)}(...)` (line "
                    f"{bound.lineno}), which the engine does not model")
        return f"{subject} is `{name}`, assigned on line {bound.lineno} a value the engine " \
               f"could not tell"
    return f"{subject} is `{name}`, bound outside `{fname}` to a value the engine could not tell"
