"""Helpers and kernels imported from other modules.

The engine does not analyse another file's code in the caller's context.
Instead it summarises each imported function once (per file version): which
of its parameters reach a DMA, a semaphore operation or a direct Ref access.
At the call site, the caller's argument values are checked against that
summary, so the diagnostic lands in the file being edited, on the argument
that is wrong, with the line in the other file as related information.

Finding the other file is the resolver's job (jedi in the CLI and the
server; see pallas_lsp/resolve.py). The engine only defines the protocol.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from typing import Protocol

from pallas_lsp.engine.model import Value


class Resolver(Protocol):
    def locate(self, importing_path: str | None, module: str, name: str,
               level: int) -> tuple[str, str] | None:
        """Where `from <level dots><module> import <name>` is defined:
        (file path, function name there), or None."""

    def source(self, path: str) -> str | None:
        """The text of a file (editor buffer or disk)."""


@dataclass(frozen=True)
class Probe(Value):
    """A parameter of a function being summarised: unknown, but traceable."""

    index: int = 0
    name: str = ""


@dataclass(frozen=True)
class Imported(Value):
    """A name bound by `from m import f` that the resolver may find."""

    module: str = ""
    name: str = ""
    level: int = 0
    bound_args: tuple = ()  # Args bound by functools.partial
    bound_kwargs: tuple = ()  # ((name, Arg), ...)

    def describe(self) -> str:
        return f"imported {self.name}"


@dataclass
class DmaUse:
    api: str
    roles: dict  # role ("src", "dst", "sem", "send_sem") -> parameter index
    started: bool
    waits: tuple  # op names
    line: int  # 0-based, in the helper's file


@dataclass
class SemUse:
    api: str
    param: int
    line: int


@dataclass
class AccessUse:
    kind: str
    param: int
    line: int


@dataclass
class Summary:
    path: str
    name: str
    params: tuple  # positional parameter names
    kwonly: tuple
    dmas: list = field(default_factory=list)
    sem_ops: list = field(default_factory=list)
    accesses: list = field(default_factory=list)


_CACHE: dict[tuple, Summary | None] = {}
_CACHE_LIMIT = 512


def summarize(path: str, text: str, name: str, resolver: Resolver | None,
              depth: int) -> Summary | None:
    key = (path, hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest(), name)
    if key in _CACHE:
        return _CACHE[key]
    result = _summarize(path, text, name, resolver, depth)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = result
    return result


def _summarize(path: str, text: str, name: str, resolver, depth: int) -> Summary | None:
    from pallas_lsp.engine.interp import Frame, Interpreter
    from pallas_lsp.engine.model import Func
    from pallas_lsp.engine.source import parse

    src = parse(text)
    interp = Interpreter(src, path, resolver=resolver, import_depth=depth + 1)
    frame = Frame(interp.module_scope, kernel=False)
    try:
        interp.exec_body(src.tree.body, frame)
    except Exception:  # a broken helper module must not break the caller
        return None
    func = interp.module_scope.vars.get(name)
    if not isinstance(func, Func) or not isinstance(func.node, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef)):
        return None
    a = func.node.args
    params = tuple(p.arg for p in list(a.posonlyargs) + list(a.args))
    kwonly = tuple(p.arg for p in a.kwonlyargs)
    probes = [Probe(index=i, name=n) for i, n in enumerate(params)]
    kw = {n: Probe(index=len(params) + i, name=n) for i, n in enumerate(kwonly)}
    interp.events.dmas.clear()
    interp.events.sem_ops.clear()
    interp.events.accesses.clear()
    try:
        interp.call_func(func, probes, kw, frame, kernel=True)
    except Exception:
        return None
    summary = Summary(path=path, name=name, params=params, kwonly=kwonly)
    for call in interp.events.dmas:
        roles = {}
        for role in ("src", "dst", "sem", "send_sem"):
            arg = getattr(call, role)
            if arg is not None and isinstance(arg.value, Probe):
                roles[role] = arg.value.index
        if roles:
            summary.dmas.append(DmaUse(
                api=call.api, roles=roles, started=call.started,
                waits=tuple(op.op for op in call.ops if op.op.startswith("wait")),
                line=call.node.lineno - 1))
    for op in interp.events.sem_ops:
        if isinstance(op.sem.value, Probe):
            summary.sem_ops.append(SemUse(api=op.api, param=op.sem.value.index,
                                          line=op.node.lineno - 1))
    for acc in interp.events.accesses:
        if isinstance(acc.ref.value, Probe):
            summary.accesses.append(AccessUse(kind=acc.kind, param=acc.ref.value.index,
                                              line=acc.node.lineno - 1))
    return summary
