"""The run-time state of the abstract interpreter: a file being run
(`Module`), a function activation's variables (`Scope`, chained to the
enclosing one), the execution context of running code (`Frame`: kernel or
not, depth, loop depth, the kernel id events belong to) and the step budget
(`Budget`, `MAX_STEPS`). Plain data shared by the evaluator, the driver,
the launch bindings (binding/) and the API models (apis/); no evaluation
happens here.
"""
from __future__ import annotations

import ast
import os
import threading
from dataclasses import field

from pallas_lsp.engine.model import Value
from pallas_lsp.engine.records import record
from pallas_lsp.engine.source import Source
from pallas_lsp.engine.values import UNKNOWN, join

MAX_STEPS = 400_000  # statements+expressions per file: bounds time on huge inputs


class Budget(Exception):
    """Raised when the step budget is spent; the analysis keeps what it has."""


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


def real_path(path: str) -> str:
    """The file's real path: the key of a Module (symlinks resolved)."""
    return os.path.realpath(path)
