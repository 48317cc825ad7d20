"""Kernels a test launches on purpose to see them fail.

Test suites check their error messages: `with self.assertRaisesRegex(ValueError,
"Cannot signal"): pl.pallas_call(kernel, ...)(x)`. The kernel is wrong by design
and the test is right, so reporting it would be a false alarm on correct code.
A kernel whose every launch sits inside such a block is left out of the rules
(the syntax floor included); one launched anywhere else as well is judged.
"""
from __future__ import annotations

import ast

from pallas_lsp.engine.events import Events, Launch
from pallas_lsp.engine.records import replace

# unittest / absltest (`assertRaises`, `assertRaisesRegex`, absl's
# `assertRaisesWithLiteralMatch`, the old `assertRaisesRegexp`) and pytest.
_UNITTEST_PREFIX = "assertRaises"
_PYTEST = ("raises",)


def expects_raise(node: ast.With) -> bool:
    """Is this `with` a block that the test expects to raise?"""
    for item in node.items:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name.startswith(_UNITTEST_PREFIX) and isinstance(f, ast.Attribute):
            return True
        if name in _PYTEST and (isinstance(f, ast.Name) or _is_pytest(f.value)):
            return True
    return False


def _is_pytest(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "pytest"


def mark(launches: list[Launch], start: int) -> None:
    """Mark the launches made since index `start` (the block's body, with the
    kernels they launched in turn)."""
    for launch in launches[start:]:
        launch.expects_error = True


def mark_called_inside(tree: ast.Module, text: str, launches: list[Launch]) -> None:
    """Mark launches made outside the block of a kernel that is only called in it:
    `@functools.partial(pl.pallas_call, ...)` on a `def kernel` (or `f =
    pl.pallas_call(kernel, ...)`) before the block, `kernel(x)` inside it."""
    if "assertRaises" not in text and "raises(" not in text:
        return  # the cheap test: most files have no such block
    defs = _called_only_inside(tree)
    if not defs:
        return
    for launch in launches:
        if launch.kernel_node is not None and id(launch.kernel_node) in defs:
            launch.expects_error = True


def _called_only_inside(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        blocks = [w for w in _own(fn) if isinstance(w, (ast.With, ast.AsyncWith))
                  and expects_raise(w)]
        if not blocks:
            continue
        inside = {id(n) for w in blocks for n in ast.walk(w)}
        called_in, called_out = set(), set()
        kernels: dict[str, ast.AST] = {}
        for n in _own(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                (called_in if id(n) in inside else called_out).add(n.func.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
                kernels[n.name] = n
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) \
                    and n.value.args and isinstance(n.value.args[0], ast.Name):
                wrapped = n.value.args[0].id  # f = pl.pallas_call(kernel, ...)
                if wrapped in kernels:
                    kernels[n.targets[0].id] = kernels[wrapped]
        for name in called_in - called_out:
            if name in kernels:
                found.add(id(kernels[name]))
    return found


def _own(fn: ast.AST):
    """The nodes of a function's body, nested defs' own bodies excluded
    (their def statements and decorators included)."""
    stack = list(reversed(fn.body))
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(reversed(getattr(n, "decorator_list", [])))
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(n))))


def expected_kernels(events: Events) -> set[int]:
    """Kernel ids launched only inside expected-error blocks."""
    inside = {la.kernel_id for la in events.launches if la.expects_error and la.kernel_id}
    if not inside:
        return inside
    outside = {la.kernel_id for la in events.launches if not la.expects_error}
    return inside - outside


def expected_defs(events: Events) -> list[ast.AST]:
    """The kernel functions launched only inside expected-error blocks."""
    inside = {id(la.kernel_node): la.kernel_node for la in events.launches
              if la.expects_error and la.kernel_node is not None}
    for la in events.launches:
        if not la.expects_error and la.kernel_node is not None:
            inside.pop(id(la.kernel_node), None)
    return list(inside.values())


def without_expected(events: Events) -> Events:
    """The events with those of expected-to-fail kernels left out."""
    ids = expected_kernels(events)
    if not ids and not any(la.expects_error for la in events.launches):
        return events

    groups = (events.dmas, events.sem_ops, events.accesses, events.scoped, events.rolls,
              events.kernel_ops)
    # Code run on its own (kernel 0, before any launch reached it) that the
    # expected-to-fail kernel runs is that kernel's code, unless a judged
    # kernel runs it as well.
    judged = {id(e.node) for g in groups for e in g if e.kernel_id and e.kernel_id not in ids}
    theirs = {id(e.node) for g in groups for e in g if e.kernel_id in ids} - judged

    def keep(e) -> bool:
        if e.kernel_id:
            return e.kernel_id not in ids
        return id(e.node) not in theirs

    return replace(events, dmas=[e for e in events.dmas if keep(e)],
                   sem_ops=[e for e in events.sem_ops if keep(e)],
                   accesses=[e for e in events.accesses if keep(e)],
                   scoped=[e for e in events.scoped if keep(e)],
                   rolls=[e for e in events.rolls if keep(e)],
                   kernel_ops=[e for e in events.kernel_ops if keep(e)],
                   launches=[la for la in events.launches if not la.expects_error])


def inside_expected(line: int, defs: list[ast.AST]) -> bool:
    """Is `line` in the body of one of `defs`?"""
    return any(d.lineno <= line <= (d.end_lineno or d.lineno) for d in defs)
