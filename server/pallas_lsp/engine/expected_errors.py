"""Kernels a test launches on purpose to see them fail.

Test suites check their error messages: `with self.assertRaisesRegex(ValueError,
"Cannot signal"): pl.pallas_call(kernel, ...)(x)`. The kernel is wrong by design
and the test is right, so reporting it would be a false alarm on correct code.
A kernel whose every launch sits inside such a block is left out of the rules;
one launched anywhere else as well is judged.

The syntax floor (mistakes the text alone decides) still speaks in such a
kernel when the block names the message it expects and the floor's finding is
another one: a `x_ref[...]` passed to a DMA in a test that expects "Cannot
signal" makes the test fail, so it is a bug there too. It speaks as well
under a catch-all block (`assertRaises(Exception)`, `pytest.raises(Exception)`,
no message): such a test expects a failure it does not name (a lowering or
compile error, whose message is not stable), while each floor finding is a
plain Python error with a stable message that a test meaning it would name;
so a floor mistake there is one the test did not mean, and the test passes
for the wrong reason. Under a block that names a specific exception class
without a message (`assertRaises(ValueError)`) the floor's finding may be the
failure meant, and nothing is said.

A block that names only the run-time error class (`jax.errors.JaxRuntimeError`,
`XlaRuntimeError`: a debug check failing on the device, a compile running out
of VMEM) does not expect what JAX raises while tracing: each trace-time rule's
error is a Python `ValueError` / `NotImplementedError` raised before anything
runs (recorded so on a v5e chip), which escapes such a block and fails the
test. There the trace-time rules (`TRACE_CODES`) and the floor judge the
kernel; the compile and run-time ones (PAL3xx, PAL4xx, PAL207/208) stay silent.
"""
from __future__ import annotations

import ast
import re

from pallas_lsp.engine import syntax
from pallas_lsp.engine.events import Events, Launch, without_kernels
from pallas_lsp.engine.records import replace

# unittest / absltest (`assertRaises`, `assertRaisesRegex`, absl's
# `assertRaisesWithLiteralMatch`, the old `assertRaisesRegexp`) and pytest.
_UNITTEST_PREFIX = "assertRaises"
_PYTEST = ("raises",)


# The pattern of a block that expects any exception at all, any message: a
# regular-expression comment (it matches every message).
CATCH_ALL = "(?#any exception)"
_BROAD = {"Exception", "BaseException"}
# The pattern of a block that expects only a run-time error (see above).
RUNTIME_ONLY = "(?#a run-time error)"
_RUNTIME = {"JaxRuntimeError", "XlaRuntimeError"}
# Rules whose JAX error is a Python exception raised while tracing or lowering,
# never a JaxRuntimeError (the chip record, tests/oracle/data/chip_v5e.jsonl).
TRACE_CODES = frozenset({*(f"PAL1{n:02d}" for n in range(1, 13)),
                         "PAL201", "PAL202", "PAL203", "PAL204", "PAL205", "PAL206", "PAL209"})


def expected_pattern(node: ast.With | ast.AsyncWith) -> str | None:
    """None: not a block the test expects to raise. Else the regular
    expression its message must match ("": any message of the class it
    names; CATCH_ALL: any exception, any message)."""
    for item in node.items:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            continue
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name.startswith(_UNITTEST_PREFIX) and isinstance(f, ast.Attribute):
            text = _literal(call.args[1]) if len(call.args) > 1 else None
            if text is None:
                text = _literal(_keyword(call, "expected_regex") or _keyword(call, "expected_regexp"))
            if text and "Literal" in name:
                return re.escape(text)
            return _valid(text) or _catch_all(call.args[0] if call.args else
                                              _keyword(call, "expected_exception"))
        if name in _PYTEST and (isinstance(f, ast.Name) or _is_pytest(f.value)):
            return _valid(_literal(_keyword(call, "match"))) or _catch_all(
                call.args[0] if call.args else _keyword(call, "expected_exception"))
    return None


def _catch_all(exc: ast.AST | None) -> str:
    """CATCH_ALL when the expected class is `Exception` / `BaseException`
    (alone or in a tuple), RUNTIME_ONLY when every class named is the run-time
    error, else "" (any message of a narrower class)."""
    items = exc.elts if isinstance(exc, ast.Tuple) else [exc]
    names = [e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name)
             else None for e in items]
    if any(n in _BROAD for n in names):
        return CATCH_ALL
    return RUNTIME_ONLY if names and all(n in _RUNTIME for n in names) else ""


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _valid(pattern: str | None) -> str:
    """A pattern re can compile, else "" (any message: the safe reading)."""
    if not pattern:
        return ""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return ""
    return pattern


def _is_pytest(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "pytest"


def mark(launches: list[Launch], start: int, pattern: str = "") -> None:
    """Mark the launches made since index `start` (the block's body, with the
    kernels they launched in turn)."""
    for launch in launches[start:]:
        if not launch.expects_error:
            launch.expects_error = True
            launch.expected_pattern = pattern


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
        if launch.kernel_node is not None and id(launch.kernel_node) in defs \
                and not launch.expects_error:
            launch.expects_error = True
            launch.expected_pattern = defs[id(launch.kernel_node)]


def _called_only_inside(tree: ast.Module) -> dict[int, str]:
    """id(kernel def) -> the pattern of the block it is called in."""
    found: dict[int, str] = {}
    for fn in syntax.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        blocks = [(w, pattern) for w in _own(fn) if isinstance(w, (ast.With, ast.AsyncWith))
                  and (pattern := expected_pattern(w)) is not None]
        if not blocks:
            continue
        inside = {id(n): pattern for w, pattern in blocks for n in syntax.walk(w)}
        called_in: dict[str, str] = {}
        called_out: set[str] = set()
        kernels: dict[str, ast.AST] = {}
        for n in _own(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                if id(n) in inside:
                    called_in.setdefault(n.func.id, inside[id(n)])
                else:
                    called_out.add(n.func.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
                kernels[n.name] = n
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) \
                    and n.value.args and isinstance(n.value.args[0], ast.Name):
                wrapped = n.value.args[0].id  # f = pl.pallas_call(kernel, ...)
                if wrapped in kernels:
                    kernels[n.targets[0].id] = kernels[wrapped]
        for name, pattern in called_in.items():
            if name in kernels and name not in called_out:
                found[id(kernels[name])] = pattern
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
        stack.extend(reversed(syntax.children(n)))


def runtime_only(events: Events) -> bool:
    """Does a block that expects only a run-time error launch something?"""
    return any(la.expects_error and la.expected_pattern == RUNTIME_ONLY for la in events.launches)


def _expects(la: Launch, trace: bool) -> bool:
    """Is this launch expected to fail, for the trace-time rules (`trace`) or
    for every rule?"""
    return la.expects_error and not (trace and la.expected_pattern == RUNTIME_ONLY)


def expected_kernels(events: Events, trace: bool = False) -> set[int]:
    """Kernel ids launched only inside expected-error blocks, and the runs of
    their defs as kernel code before the launch was seen (standalone.py).
    `trace`: as the trace-time rules see it (run-time-only blocks judged)."""
    inside = {la.kernel_id for la in events.launches if _expects(la, trace) and la.kernel_id}
    if not inside:
        return inside
    outside = {la.kernel_id for la in events.launches if not _expects(la, trace)}
    defs = {id(node) for node, _ in expected_defs(events, trace)}
    return (inside - outside) | {kid for kid, node in events.standalone_defs.items()
                                 if id(node) in defs}


def expected_defs(events: Events, trace: bool = False) -> list[tuple[ast.AST, str]]:
    """The kernel functions launched only inside expected-error blocks, each
    with the message pattern of its block."""
    inside = {id(la.kernel_node): (la.kernel_node, la.expected_pattern)
              for la in events.launches if _expects(la, trace) and la.kernel_node is not None}
    for la in events.launches:
        if not _expects(la, trace) and la.kernel_node is not None:
            inside.pop(id(la.kernel_node), None)
    return list(inside.values())


def without_expected(events: Events, trace: bool = False) -> Events:
    """The events with those of expected-to-fail kernels left out (and the
    code they ran on its own before a launch reached it). `trace`: for the
    trace-time rules, which judge kernels a run-time-only block launches."""
    ids = expected_kernels(events, trace)
    if not ids and not any(_expects(la, trace) for la in events.launches):
        return events
    return replace(without_kernels(events, ids),
                   launches=[la for la in events.launches if not _expects(la, trace)])


def expected_floor_finding(line: int, message: str, defs: list[tuple[ast.AST, str]]) -> bool:
    """Is a syntax-floor finding at `line` (0-based) one that its test expects: inside
    an expected-to-fail kernel whose block names an exception class and no
    message, or this message? (Not under a catch-all block: see above.)"""
    for d, pattern in defs:
        if d.lineno - 1 <= line <= (d.end_lineno or d.lineno) - 1:
            if pattern in (CATCH_ALL, RUNTIME_ONLY):
                continue  # a failure the test does not name, or a run-time one: not the floor's
            if not pattern or _matches(pattern, message):
                return True
    return False


def _matches(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except (re.error, RecursionError):
        return True
