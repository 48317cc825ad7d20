"""The run-time state of the abstract interpreter: a file being run
(`Module`), a function activation's variables (`Scope`, chained to the
enclosing one), the execution context of running code (`Frame`: kernel or
not, depth, loop depth, the kernel id events belong to) and the work budget
(`Budget`, `MAX_STEPS`; `Work`: calls entered, nesting, variants). Plain data shared by the evaluator, the driver,
the launch bindings (binding/) and the API models (apis/); no evaluation
happens here.
"""
from __future__ import annotations

import ast
import os
import threading
from contextlib import contextmanager
from dataclasses import field
from typing import Callable

from pallas_lsp.engine.model import Value
from pallas_lsp.engine.records import record
from pallas_lsp.engine.source import Source
from pallas_lsp.engine.values import UNKNOWN, join

MAX_STEPS = 400_000  # statements+expressions per file: bounds time on huge inputs
# Past these a call (or a launcher variant) is not followed: its result is
# Unknown, what it was handed escapes and the kernel around it makes no
# claims about what it never does. Cost stays bounded, verdicts stay right.
MAX_DEPTH = 400  # helper calls nested in one another (a chain of helpers)
# A def active this many times at once: recursion whose arguments keep
# changing (`f(args[1:], acc + (x,))`), which could branch to the budget.
MAX_RECURSION = 24
MAX_CALLS = 15_000  # function activations run per analysis (memo hits are free)
MAX_VARIANT_RUNS = 500  # launcher flag/optional-argument variants run per analysis
MAX_ESCAPED_CLOSURES = 8  # runs of one escaped def, each with other closure values


class Budget(Exception):
    """Raised when the step budget is spent; the analysis keeps what it has."""


class Stopped(BaseException):
    """The caller no longer wants this analysis (`stop_when`): it ends now,
    with no result. A BaseException, so that no `except Exception` of the
    engine turns it into a finding or an internal error."""


_stop = threading.local()  # the current thread's analysis may ask `_stop.wanted()`


@contextmanager
def stop_when(wanted: Callable[[], bool] | None):
    """Analyses run on this thread inside the block end with `Stopped` as
    soon as `wanted()` is true (asked every few hundred calls): the server
    stops the analysis of a version the user has already replaced."""
    outer, _stop.wanted = getattr(_stop, "wanted", None), wanted
    try:
        yield
    finally:
        _stop.wanted = outer


class Work:
    """What an analysis has spent of its budget, and what it did not follow
    for want of it (`pallas-lsp coverage` shows why)."""

    __slots__ = ("calls", "variants", "cut", "_active")

    def __init__(self):
        self.calls = 0
        self.variants = 0
        self._active: dict[int, int] = {}  # id(def node) -> its activations running now
        self.cut: dict[int, tuple[str, str]] = {}  # id(def) -> (its name, why)

    def too_deep(self, depth: int) -> bool:
        return depth >= MAX_DEPTH

    def enter(self, node_id: int) -> str:
        """Count one activation of a def; why it is not followed, if it is not
        (then no `leave`). Also where a stale analysis stops (`stop_when`)."""
        self.calls += 1
        if not self.calls & 255:
            wanted = getattr(_stop, "wanted", None)
            if wanted is not None and wanted():
                raise Stopped()
        if self.calls > MAX_CALLS:
            return MANY_CALLS
        active = self._active.get(node_id, 0)
        if active >= MAX_RECURSION:
            return RECURSION
        self._active[node_id] = active + 1
        return ""

    def leave(self, node_id: int) -> None:
        self._active[node_id] -= 1

    def not_followed(self, node: ast.AST, why: str) -> None:
        self.cut.setdefault(id(node), (getattr(node, "name", "<lambda>"), why))

    def note(self) -> str:
        """What the budget cut, in words (empty when nothing)."""
        if not self.cut:
            return ""
        name, why = next(iter(self.cut.values()))
        more = f" and {len(self.cut) - 1} more" if len(self.cut) > 1 else ""
        return f"`{name}`{more} not followed: {why}"

    def variant(self) -> bool:
        """Count one launcher variant run; False when their budget is spent."""
        self.variants += 1
        return self.variants <= MAX_VARIANT_RUNS


DEEP = (f"calls nested more than {MAX_DEPTH} deep are not followed (the analysis' work "
        f"budget); a call at that depth counts as unknown")
MANY_CALLS = (f"the analysis entered {MAX_CALLS:,} function calls (its work budget); later "
              f"calls count as unknown")
RECURSION = (f"a function calling itself more than {MAX_RECURSION} deep with new arguments each "
             f"time is not followed further (the analysis' work budget)")
PYTHON_DEPTH = "code nested too deeply for the analysis to follow; this call counts as unknown"


class Module:
    """One file as the interpreter runs it: its source and global scope."""

    __slots__ = ("path", "src", "scope")

    def __init__(self, path: str, src: Source):
        self.path = path
        self.src = src
        self.scope = Scope(module=self)


# The scopes made by the analysis running on this thread (see Interpreter.release).
scopes_made = threading.local()


class Scope:
    """Variables of one function activation, chained to the enclosing scope."""

    __slots__ = ("vars", "parent", "module")

    def __init__(self, parent: Scope | None = None, vars: dict | None = None,
                 module: Module | None = None):
        self.vars: dict[str, Value] = vars if vars is not None else {}
        self.parent = parent
        self.module = module if module is not None else (parent.module if parent else None)
        made = getattr(scopes_made, "scopes", None)
        if made is not None:
            made.append(self)

    def lookup(self, name: str) -> Value | None:
        s: Scope | None = self
        while s is not None:
            v = s.vars.get(name)
            if v is not None:
                return v
            s = s.parent
        return None

    def rebind(self, name: str, value: Value) -> None:
        """Assign where the name lives: `next(it)` in a comprehension or a
        nested function advances the enclosing scope's iterator."""
        s: Scope | None = self
        while s is not None:
            if name in s.vars:
                s.vars[name] = value
                return
            s = s.parent
        self.vars[name] = value

    def fork(self) -> Scope:
        return Scope(self.parent, dict(self.vars), self.module)

    def merge(self, a: Scope, b: Scope, lost=None) -> None:
        av, bv, out = a.vars, b.vars, self.vars
        for name, va in av.items():
            vb = bv.get(name)
            if vb is va or vb is None:
                out[name] = va  # the common case: a name neither side changed
                continue
            out[name] = joined = join(va, vb)
            if joined is UNKNOWN and lost is not None:
                lost(va, vb)
        for name, vb in bv.items():
            if name not in av:
                out[name] = vb


@record
class Frame:
    scope: Scope
    kernel: bool  # inside a kernel (names are recorded for hover)
    depth: int = 0
    kernel_id: int = 0
    loop_depth: int = 0
    returns: list[Value] = field(default_factory=list)
    yields: list[Value] | None = None  # a generator's yielded values
    # Set by `return` (and `raise`, see stmt_Raise): the rest of the block is
    # not run, and a branch that left does not flow into the code after its `if`.
    left: bool = False
    undecided: int = 0  # how many undecided branches enclose the running code
    mod: Module | None = None  # the file whose code runs (None: the analysed file)
    # The call in the analysed file through which this frame was reached,
    # when its code is in another file (findings there are also shown here).
    site: ast.AST | None = None


# A scope variable no Python name can be: set where a function's own
# `assert` failed on values the engine decided (defaults no caller passes),
# so what runs after it runs on values the program itself refuses.
REFUTED = "<refuted>"


def real_path(path: str) -> str:
    """The file's real path: the key of a Module (symlinks resolved)."""
    return os.path.realpath(path)
