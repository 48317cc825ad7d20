"""How much of a file the engine sees: for every DMA and semaphore call in
the source (found syntactically, so a call in a function the engine never
entered still counts) whether the engine reached it and knew the kind of
each argument; and for every kernel launch whether its parameters were
bound. `pallas-lsp coverage` reports it; it is the measure of recall work.
"""
from __future__ import annotations

import ast
from dataclasses import field

from pallas_lsp.engine import api, syntax, unknown_reasons
from pallas_lsp.engine.events import Arg, Events
from pallas_lsp.engine.model import Api, Array, Const, Ref
from pallas_lsp.engine.values import RefTree
from pallas_lsp.engine.records import record

_LAUNCHERS = {"pallas_call", "kernel", "core_map", "emit_pipeline"}
_ROLES = ("src", "dst", "sem", "send_sem")


@record
class Site:
    kind: str  # dma | semaphore | ref
    api: str
    line: int  # 0-based
    col: int
    reached: bool
    known: bool
    unknown: list[str] = field(default_factory=list)  # which arguments were not known
    reason: str = ""  # why not reached / not known, in words
    launched: bool = True  # reached by a kernel launch (not only as kernel code without one)
    # The backend of the kernel it is written in, when that is a GPU one (Triton,
    # Mosaic GPU): the TPU rules do not judge it, so it is not counted.
    backend: str = "tpu"

    def to_json(self) -> dict:
        return {"kind": self.kind, "api": self.api, "line": self.line + 1, "col": self.col + 1,
                "reached": self.reached, "known": self.known, "unknown": self.unknown,
                "reason": self.reason, "backend": self.backend}


@record
class LaunchSite:
    api: str
    kernel: str
    line: int
    bound: bool
    backend: str
    reason: str = ""

    def to_json(self) -> dict:
        return {"api": self.api, "kernel": self.kernel, "line": self.line + 1,
                "bound": self.bound, "backend": self.backend, "reason": self.reason}


@record
class FileCoverage:
    path: str | None
    backend: str = "tpu"
    sites: list[Site] = field(default_factory=list)
    launches: list[LaunchSite] = field(default_factory=list)
    # Sites in other files this analysis reached: path -> {(line, col): (known, unknown args)}.
    foreign: dict = field(default_factory=dict)
    # What the analysis' work budget did not follow (frames.Work), in words: kernels
    # it cut make no claims about what they never do. Empty when nothing was cut.
    budget: str = ""


def arg_known(arg: Arg | None) -> bool:
    """The engine knows what kind of value this is (a Ref of some kind, or
    an Array): enough to judge it."""
    if arg is None or not arg.present:
        return True
    return isinstance(arg.value, (Ref, Array, RefTree)) or (isinstance(arg.value, Const)
                                                    and arg.value.value is None)


# A known site that only kernel code run without a launch reached (standalone.py).
_NO_LAUNCH = ("no kernel launch reaches it; checked as kernel code, its parameters taken as Refs "
              "by their use (their shapes and memory spaces unknown)")


def _event_status(events: Events, launched_only: bool = False
                  ) -> dict[int, tuple[bool, list[str], object, bool, dict]]:
    """id(call node) -> (known in some analysis of it, unknown roles, node,
    reached by a launch: not only as kernel code run without one, the
    argument node of each unknown role). With `launched_only`, only the runs
    a launch reached count."""
    out: dict[int, tuple[bool, list[str], object, bool, dict]] = {}

    def note(node, unknown: list[str], kid: int, arg_nodes: dict):
        if not kid:
            return  # run on its own with unknown arguments: no kernel reaches it here
        launched = kid not in events.standalone
        if launched_only and not launched:
            return
        prev = out.get(id(node))
        known = not unknown
        # The best run says what is known: the one that knew most, a launched
        # one first among equals (kernel code run as such, its Refs from a
        # run_scoped, may know what a launch lost). Reached by a launch: any run.
        if prev is None or (known, launched, -len(unknown)) > (prev[0], prev[3], -len(prev[1])):
            out[id(node)] = (known, unknown, node, launched or (prev is not None and prev[3]),
                             arg_nodes)
        elif launched and not prev[3]:
            out[id(node)] = prev[:3] + (True,) + prev[4:]

    for call in events.dmas:
        roles = [r for r in _ROLES if getattr(call, r, None) is not None]
        unknown = [r for r in roles if not arg_known(getattr(call, r))]
        note(call.node, unknown, call.kernel_id, {r: getattr(call, r).node for r in unknown})
    for op in events.sem_ops:
        note(op.node, [] if arg_known(op.sem) else ["sem"], op.kernel_id, {"sem": op.sem.node}
             if op.sem is not None else {})
    return out


def _unknown_reason(unknown: list[str], arg_nodes: dict, node, funcs, launches) -> str:
    """"the engine reached it but could not tell what `dst` is", and where
    each unknown value came from when the source says it."""
    head = "the engine reached it but could not tell what " + ", ".join(
        f"`{r}`" for r in unknown) + " is"
    try:
        why = [w for r in unknown
               if (w := unknown_reasons.explain(r, arg_nodes.get(r), node, funcs.get(id(node)),
                                               launches))]
    except (AttributeError, TypeError, ValueError, RecursionError):
        why = []  # words for a report: never worth a failed analysis
    return head + ("; " + "; ".join(dict.fromkeys(why)) if why else "")


def _api_name(node: ast.AST, scope: dict) -> str | None:
    """Canonical API name of a call's callee, via the file's imports."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    base = scope.get(node.id)
    if not isinstance(base, Api):
        return None
    name = base.name
    for p in reversed(parts):
        name = api.join(name, p)
    return name


def measure(src, interp, events: Events) -> FileCoverage:
    cov = FileCoverage(path=interp.path, backend=interp.file_backend,
                       budget=interp.work.note() or interp.incomplete or "")
    status = _event_status(events)
    scope = interp.root.scope.vars
    funcs = _enclosing_functions(src.tree)
    gpu_kernels = _gpu_kernels(interp.events.launches)
    for node in syntax.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        name = _api_name(node.func, scope)
        if name is None:
            continue
        t = api.tail(name)
        if t in api.DMA_MAKERS:
            kind = "dma"
        elif t in api.SEM_OPS:
            kind = "semaphore"
        elif t in ("load", "store"):
            kind = "ref"
        else:
            continue
        span = src.span(node)
        hit = status.get(id(node))
        if id(node) in src.dead:
            # Nothing to know: JAX never traces it.
            cov.sites.append(Site(kind, t, span.line, span.col, False, True, [], _DEAD))
            continue
        if kind == "ref":
            reached = any(a.node is node and a.kernel_id for a in events.accesses)
            site = Site(kind, t, span.line, span.col, reached, reached, [],
                        "" if reached else _why_unreached(node, funcs, interp))
        elif hit is None:
            site = Site(kind, t, span.line, span.col, False, False, [],
                        _why_unreached(node, funcs, interp))
        else:
            known, unknown, _, launched, arg_nodes = hit
            site = Site(kind, t, span.line, span.col, True, known, unknown,
                        ("" if launched else _NO_LAUNCH + _budget(interp)) if known else
                        _unknown_reason(unknown, arg_nodes, node, funcs,
                                        interp.events.launches), launched)
        if not site.known and gpu_kernels:
            site.backend = _kernel_backend(node, funcs, gpu_kernels)
        cov.sites.append(site)
    by_node: dict[int, LaunchSite] = {}
    for launch in interp.events.launches:  # a launch run in several variants counts once
        node = launch.node
        if node is None or getattr(node, "_pl_src", src) is not src:
            continue
        # One entry per kernel function a call launches (two defs of one name
        # launched from one line are two kernels).
        key = (id(node), id(launch.kernel_node) if launch.kernel_node is not None else None)
        old = by_node.get(key)
        if old is None:
            by_node[key] = LaunchSite(launch.api, launch.kernel, src.span(node).line,
                                      launch.bound, launch.backend, launch.reason)
        elif launch.bound and not old.bound:
            old.bound, old.reason = True, ""
    bound_at = {key[0] for key, site in by_node.items() if site.bound}
    cov.launches.extend(site for key, site in by_node.items()  # an unbound try, bound later
                        if site.bound or key[1] is not None or key[0] not in bound_at)
    seen_launch = {id(launch.node) for launch in interp.events.launches} \
        | interp.events.factory_nodes
    for node in syntax.walk(src.tree):
        if isinstance(node, ast.Call) and id(node) not in seen_launch:
            name = _api_name(node.func, scope)
            if name and api.tail(name) in _LAUNCHERS:
                cov.launches.append(LaunchSite(api.tail(name), "", src.span(node).line, False,
                                               interp.file_backend,
                                               _why_unreached(node, funcs, interp)))
    for known, unknown, node, launched, _ in _event_status(events, launched_only=True).values():
        other = getattr(node, "_pl_src", None)
        if other is None or other is src or not other.path or not launched:
            continue
        span = other.span(node)
        per = cov.foreign.setdefault(other.path, {})
        prev = per.get((span.line, span.col))
        if prev is None or (known and not prev[0]):
            per[(span.line, span.col)] = (known, unknown)
    cov.sites.sort(key=lambda s: (s.line, s.col))
    cov.launches.sort(key=lambda s: s.line)
    return cov


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_DEAD = "never runs: after a `return`, `raise`, `break` or `continue` of its block"


def _enclosing_functions(tree: ast.AST) -> dict[int, ast.AST]:
    """id(node) -> innermost def containing it, for every call and def."""
    out: dict[int, ast.AST] = {}

    def visit(node, func):
        for child in syntax.children(node):
            inner = child if isinstance(child, _DEFS) else func
            if isinstance(child, (ast.Call,) + _DEFS) and func is not None:
                out[id(child)] = func
            visit(child, inner)

    visit(tree, None)
    return out


def _budget(interp) -> str:
    """Why the analysis may have missed a launch reaching a site: its work
    budget (frames.Work, the step limit), in words; empty when it was not spent."""
    note = interp.work.note() or interp.incomplete or ""
    return f"; {note}" if note else ""


def _why_unreached(node, funcs, interp) -> str:
    func = funcs.get(id(node))
    if func is None:
        return "module-level code the engine did not reach" + _budget(interp)
    name = getattr(func, "name", "<lambda>")
    cut = interp.work.cut.get(id(func))
    if cut is not None:
        return f"`{name}` was not followed: {cut[1]}"
    if id(func) not in interp._entered or id(func) in interp._unknown_run:
        return f"no kernel launch the engine can follow reaches `{name}`" + _budget(interp)
    return f"`{name}` was analysed, but this call was not reached (a branch or loop the " \
           f"engine did not enter)"


def _gpu_kernels(launches) -> dict[int, str]:
    """id(kernel def) -> backend, for the kernels launched only for a GPU
    backend (Triton, Mosaic GPU), which the TPU rules do not judge."""
    backends: dict[int, set] = {}
    for launch in launches:
        if launch.kernel_node is not None:
            backends.setdefault(id(launch.kernel_node), set()).add(launch.backend)
    return {k: min(b) for k, b in backends.items() if "tpu" not in b}


def _kernel_backend(call: ast.Call, funcs, gpu_kernels: dict[int, str]) -> str:
    """The backend of the innermost GPU kernel written around `call`, else tpu."""
    func = funcs.get(id(call))
    while func is not None:
        if id(func) in gpu_kernels:
            return gpu_kernels[id(func)]
        func = funcs.get(id(func))
    return "tpu"
