"""The syntax floor: DMA mistakes the source alone decides, whatever the
interpreter knows of the names.

The kinds-based rules need the engine to follow a launch down to the kernel;
on code it cannot follow (a kernel launched through `self.pallas_call`, a
docs snippet, a kernel launched nowhere) they are silent. This layer reads
only the AST of the file, in every function, and reports the cases where the
text settles the question:

* PAL101 / PAL102: a DMA's source, destination or semaphore written as a
  load: `x[...]`, `x[i, ...]`, `x[:, 0]`, `x[pl.ds(0, 8)]`, `x.at[i][0]` (an
  index no list or dict takes; never `x.at[...]`, never `x[i]`, `x[a:b]` or
  `x[i, j]`, which may select a Ref in a list or dict: `_is_load`), in `async_copy` / `async_remote_copy` / `sync_copy` (which start the
  copy) or in a `make_async_copy` / `make_async_remote_copy` whose descriptor
  is seen to be `.start()`ed;
* PAL110: the same load as the semaphore of a descriptor only ever waited on
  (every use of it visible in its function);
* PAL106: `.wait_send()` on a descriptor of `make_async_copy` / `async_copy`;
* PAL108: a negative integer literal as `priority` of `async_copy` or of a
  descriptor's `.start()`;
* PAL105: a remote copy with `device_id=None` and a send semaphore that
  cannot be None (or the reverse);
* PAL101 / PAL103 / PAL104 from what the function itself says of a name
  (`_Evidence`): where `x.at[i]` (or `x[...]`) is written, `x` is a Ref (or an
  Array), never a list or dict, so a DMA argument `x[i]` elsewhere is a read,
  and where `sems.at[i]` is written, `sems` has a rank, so a started DMA given
  the bare `sems` signals a whole semaphore array. The name must have one
  binding and the evidence must be traced whenever the DMA is (no `if` branch
  of its own that the DMA is not also in).
* PAL101 on a DMA argument `x[i]` the interpreter gave no value (a kernel
  launched through a helper of another package), where `x` is a parameter
  (or a field of one) and the file shows no sign that it holds several Refs
  (`_containers`): a list of Refs is indexed the same way, so any such sign
  keeps it silent.

A descriptor or a value is followed through a name only when that name has
exactly one binding, a plain `name = <expr>`, in its scope (no parameter,
no `global` / `nonlocal` of that name anywhere in the file); helpers of the
file that return a descriptor are followed into their callers for `.start()`,
`.wait_send()` and priorities. APIs are resolved through the file's imports
and `api.canonical`, as the interpreter does.

`analyze` adds a finding of this layer only where the engine has none at the
same span. `PALLAS_LSP_NO_SYNTAX_FLOOR=1` turns the layer off (measurements).
"""
from __future__ import annotations

import ast
import functools
import os
import re

from pallas_lsp.engine import api, standalone
from pallas_lsp.engine.model import Ref, Space, Span, Unknown
from pallas_lsp.engine.rules import (pal101_dma_arg_not_ref as pal101,
                                     pal102_send_sem_not_ref as pal102,
                                     pal103_dst_sem_not_scalar as pal103,
                                     pal104_send_sem_not_scalar as pal104,
                                     pal105_src_sem_device_id as pal105,
                                     pal106_wait_send_local as pal106,
                                     pal108_negative_priority as pal108,
                                     pal110_wait_sem_not_ref as pal110,
                                     pal112_wait_on_value as pal112,
                                     pal406_wait_sem_array as pal406)
from pallas_lsp.engine.rules._ref_annotations import is_ref_annotation, ref_fields
from pallas_lsp.engine.rules._containers import (containers, indexed_in_place, key_of,
                                                 named_as_container)
from pallas_lsp.engine.rules._base import (Context, Finding, at_fix, explain_read, raised_at,
                                           ref_fix)
from pallas_lsp.engine.syntax import _FIELDS, _fields, children
from pallas_lsp.engine.values import StarUnknown

CODES = ("PAL101", "PAL102", "PAL103", "PAL104", "PAL105", "PAL106", "PAL108", "PAL110")

_LOCAL = {"make_async_copy", "async_copy"}
_REMOTE = {"make_async_remote_copy", "async_remote_copy"}
_STARTING = {"async_copy", "async_remote_copy", "sync_copy"}
# Positional parameters of each API (jax 0.10.2: mosaic/primitives.py, helpers.py).
_PARAMS = {
    "make_async_copy": ("src_ref", "dst_ref", "sem"),
    "async_copy": ("src_ref", "dst_ref", "sem"),
    "make_async_remote_copy": ("src_ref", "dst_ref", "send_sem", "recv_sem", "device_id",
                               "device_id_type"),
    "async_remote_copy": ("src_ref", "dst_ref", "send_sem", "recv_sem", "device_id",
                          "device_id_type"),
    "sync_copy": ("src_ref", "dst_ref"),
}
_METHODS = {"start", "wait", "wait_recv", "wait_send"}
# A name for several semaphores: `sems`, `recv_sems`, `sems_in`, `dma_semaphores`, `sem_recvs`,
# `recvs15` (the plural of a send or receive semaphore).
_SEMS_NAME = re.compile(
    r"(?i)(\w*_)?sems\d*(_\w+)?|\w*semaphores|sem_(recv|send)s|(\w*_)?(send|recv)s\d*(_\w+)?")
_DS = {"pl.ds", "pl.dslice", "pltpu.ds", "pltpu.dslice"}  # a Slice: no list or dict index
# Words that must appear in a file for the floor to look at it.
_WORDS = ("make_async_copy", "async_copy", "async_remote_copy", "make_async_remote_copy",
          "sync_copy")



def enabled() -> bool:
    return os.environ.get("PALLAS_LSP_NO_SYNTAX_FLOOR", "") in ("", "0")


# ---------------------------------------------------------------- scopes


class _Scope:
    __slots__ = ("node", "parent", "kind", "binds", "stores")

    def __init__(self, node, parent, kind):
        self.node, self.parent, self.kind = node, parent, kind
        # name -> list of ("value", expr) / ("import", dotted) / ("def", node) / ("other", None)
        self.binds: dict[str, list] = {}
        self.stores: dict[str, list] = {}  # name -> the Name nodes assigning it

    def bind(self, name: str, what: tuple):
        self.binds.setdefault(name, []).append(what)


_SPECIAL = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Name,
                      ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ExceptHandler,
                      ast.MatchAs, ast.MatchStar, ast.MatchMapping, ast.Call, ast.Return,
                      ast.Yield, ast.YieldFrom})


class _File:
    """One walk of the module: scopes, bindings, parents, calls."""

    def __init__(self, tree: ast.Module):
        self.parent: dict[int, ast.AST] = {}
        self.scope_of: dict[int, _Scope] = {}  # id(call or name node) -> its scope
        self.calls: list[ast.Call] = []
        self.loads: list[ast.Name] = []
        self.tainted: set[str] = set()  # global / nonlocal anywhere: never followed
        self.def_scope: dict[int, _Scope] = {}  # id(def node) -> the scope of its body
        self.returns: dict[int, tuple] = {}  # id(function scope) -> (scope, its returns)
        self.generators: set[int] = set()
        self._bound: dict[int, frozenset] = {}  # id(stmt) -> _bound_names(stmt)
        module = _Scope(tree, None, "module")
        stack = [(child, module, tree) for child in reversed(children(tree))]
        push = stack.append
        while stack:
            node, scope, parent = stack.pop()
            self.parent[id(node)] = parent
            cls = node.__class__
            if cls not in _SPECIAL:  # most nodes: only their children matter
                for name in _FIELDS.get(cls) or _fields(cls):
                    v = getattr(node, name, None)
                    if v.__class__ is list:
                        for x in v:
                            if x.__class__ is not ast.Constant and isinstance(x, ast.AST):
                                push((x, scope, node))
                    elif v is not None and v.__class__ is not ast.Constant \
                            and isinstance(v, ast.AST):
                        push((v, scope, node))
                continue
            inner = scope
            if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                if cls is not ast.Lambda:
                    scope.bind(node.name, ("def", node))
                inner = _Scope(node, scope, "function")
                self.def_scope[id(node)] = inner
                a = node.args
                for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                    if p is not None:
                        inner.bind(p.arg, ("other", None))
                # decorators, defaults and annotations belong to the enclosing scope
                outer = list(getattr(node, "decorator_list", ())) + a.defaults + \
                    [d for d in a.kw_defaults if d is not None]
                body = node.body if isinstance(node.body, list) else [node.body]
                for child in reversed(body):
                    stack.append((child, inner, node))
                for child in reversed(outer):
                    stack.append((child, scope, node))
                continue
            if cls is ast.ClassDef:
                scope.bind(node.name, ("other", None))
                inner = _Scope(node, scope, "class")
                for child in reversed(node.decorator_list + node.bases +
                                      [k.value for k in node.keywords]):
                    stack.append((child, scope, node))
                for child in reversed(node.body):
                    stack.append((child, inner, node))
                continue
            if cls is ast.Constant:
                continue
            if cls is ast.Name:
                if node.ctx.__class__ is ast.Load:
                    self.loads.append(node)
                    self.scope_of[id(node)] = scope
                    continue
                else:
                    value = None
                    if isinstance(node.ctx, ast.Store) and isinstance(parent, ast.Assign) \
                            and len(parent.targets) == 1 and parent.targets[0] is node:
                        value = parent.value
                    elif isinstance(node.ctx, ast.Store) and isinstance(parent, ast.AnnAssign) \
                            and parent.target is node and parent.value is not None:
                        value = parent.value
                    scope.bind(node.id, ("value", value) if value is not None else ("other", None))
                    scope.stores.setdefault(node.id, []).append(node)
                    continue
            elif cls in (ast.Import, ast.ImportFrom):
                self._imports(node, scope)
            elif cls in (ast.Global, ast.Nonlocal):
                self.tainted.update(node.names)
            elif cls is ast.ExceptHandler and node.name:
                scope.bind(node.name, ("other", None))
            elif cls in (ast.MatchAs, ast.MatchStar) and node.name:
                scope.bind(node.name, ("other", None))
            elif cls is ast.MatchMapping and node.rest:
                scope.bind(node.rest, ("other", None))
            elif cls is ast.Call:
                self.calls.append(node)
                self.scope_of[id(node)] = scope
            elif cls is ast.Return:
                self.returns.setdefault(id(scope), (scope, []))[1].append(node)
            elif cls in (ast.Yield, ast.YieldFrom):
                self.generators.add(id(scope))
            for name in _FIELDS.get(cls) or _fields(cls):
                v = getattr(node, name, None)
                if v.__class__ is list:
                    for x in v:
                        if isinstance(x, ast.AST):
                            push((x, scope, node))
                elif isinstance(v, ast.AST):
                    push((v, scope, node))

    @staticmethod
    def _imports(node, scope: _Scope):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    scope.bind(a.asname, ("import", a.name))
                else:
                    top = a.name.split(".")[0]
                    scope.bind(top, ("import", top))
            return
        for a in node.names:
            if a.name == "*":
                continue
            if node.level or not node.module:
                scope.bind(a.asname or a.name, ("other", None))
            else:
                scope.bind(a.asname or a.name, ("import", f"{node.module}.{a.name}"))

    @staticmethod
    def resolve(name: str, scope: _Scope) -> tuple[_Scope | None, _Scope]:
        """(the scope binding `name` where `scope` reads it, or None, and the
        outermost scope walked: the module's). Class bodies are skipped
        above the first scope, as Python does."""
        s, first, last = scope, True, scope
        while s is not None:
            if s.kind == "class" and not first:
                s = s.parent
                continue
            first = False
            if name in s.binds:
                return s, last
            last = s
            s = s.parent
        return None, last

    def straight_line_value(self, name: ast.Name):
        """The value of `name = value` read by the load `name` when that
        assignment comes before it in the same run of statements (blocks of
        `with` included) with no other binding of the name in between;
        None otherwise (a loop's body or a branch may have rebound it)."""
        parent = self.parent
        node, up = name, parent.get(id(name))
        while up is not None and not isinstance(node, ast.stmt):
            node, up = up, parent.get(id(up))
        while up is not None:
            block = next((b for b in (getattr(up, "body", None), getattr(up, "orelse", None),
                                      getattr(up, "finalbody", None))
                          if b.__class__ is list and any(s is node for s in b)), None)
            if block is None:
                return None
            i = next(k for k, s in enumerate(block) if s is node)
            for stmt in reversed(block[:i]):
                bound = self._bound.get(id(stmt))
                if bound is None:  # each statement walked once, not once per read
                    bound = self._bound[id(stmt)] = _bound_names(stmt)
                if name.id not in bound:
                    continue
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                        and isinstance(stmt.targets[0], ast.Name):
                    return stmt.value
                return None
            if not isinstance(up, (ast.With, ast.AsyncWith)):
                return None
            node, up = up, parent.get(id(up))
        return None

    def lookup(self, name: str, scope: _Scope) -> tuple | None:
        """The one binding `name` has where it is read, or None."""
        if name in self.tainted:
            return None
        s, _ = self.resolve(name, scope)
        if s is None:
            return None
        binds = s.binds[name]
        if len(binds) == 1 and binds[0][0] != "other":
            return binds[0]
        # `try: from jax... import tpu as pltpu / except: pltpu = None`
        imports = {b[1] for b in binds if b[0] == "import"}
        rest = [b for b in binds if b[0] != "import"]
        if len(imports) == 1 and all(b[0] == "value" and isinstance(b[1], ast.Constant)
                                     and b[1].value is None for b in rest):
            return ("import", imports.pop())
        return None

    # ---- what expressions are

    def pallas_api(self, func: ast.AST, scope: _Scope) -> str | None:
        """The canonical name (`pl.ds`, `pltpu.make_async_copy`) when `func`
        names a Pallas API through the file's imports."""
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        b = self.lookup(func.id, scope)
        if b is None or b[0] != "import":
            return None
        name = api.canonical(".".join([b[1]] + parts[::-1]))
        return name if name.startswith(("pl.", "pltpu.")) else None

    def dma_api(self, func: ast.AST, scope: _Scope) -> str | None:
        """`make_async_copy` etc. when `func` names the Pallas TPU API."""
        name = self.pallas_api(func, scope)
        if name is None or not name.startswith("pltpu."):
            return None
        t = api.tail(name)
        return t if t in _PARAMS else None

    def value_of(self, node: ast.AST, scope: _Scope) -> ast.AST | None:
        """The one expression a plain name was assigned (one step)."""
        if isinstance(node, ast.Name):
            b = self.lookup(node.id, scope)
            if b is not None and b[0] == "value":
                return b[1]
        return None


def _args(call: ast.Call, api_name: str) -> dict[str, ast.AST] | None:
    """Parameter -> argument node; None with `*args` / `**kwargs`."""
    params = _PARAMS[api_name]
    out = {}
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            return None
        if i < len(params):
            out[params[i]] = a
    for k in call.keywords:
        if k.arg is None:
            return None
        out[k.arg] = k.value
    return out


def _is_load(node: ast.AST, is_ds=None, *, stores: bool = False) -> bool:
    """A subscript that reads, never one that selects a Ref from a list or
    dict: its index holds `...` (`x[...]`, `x[i, ...]`), is a tuple holding a
    slice (`x[:, 0]`, `x[pl.ds(8), :]`: no list or dict takes that index), or
    is / holds a `pl.ds(...)` (`is_ds` says which calls are); or it indexes
    an `.at[...]` view (`x.at[i][0, 0]`: a view is a Ref, indexing it reads).
    A bare `x[i]`, `x[a:b]` or `x[i, j]` may select from a list or dict: not
    decided here. With `stores`, a subscript written to counts too."""
    if not isinstance(node, ast.Subscript) or not isinstance(
            node.ctx, (ast.Load, ast.Store) if stores else ast.Load):
        return False
    if isinstance(node.value, ast.Attribute) and node.value.attr == "at":
        return False
    if isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.Attribute) \
            and node.value.value.attr == "at":
        return True
    index = node.slice
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in items):
        return True
    if isinstance(index, ast.Tuple) and any(isinstance(e, ast.Slice) for e in items):
        return True
    return is_ds is not None and any(isinstance(e, ast.Call) and is_ds(e.func) for e in items)


def _neg_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int \
            and node.operand.value > 0:
        return -node.operand.value
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value < 0:
        return node.value
    return None


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _never_none(node) -> bool:
    """Syntactically a value that cannot be None."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.JoinedStr)):
        return True
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "at":
        return True
    return _is_load(node)


# ---------------------------------------------------------------- descriptors


class _Evidence:
    """What the file's own text says a name is: `x.at[...]` and `x[...]`
    (a load or store no list or dict takes) show that the name, in the scope
    that binds it once, is a Ref or an Array. Built lazily: most files never
    ask."""

    def __init__(self, f: "_File", is_ds):
        self.f, self.is_ds = f, is_ds
        self._by_key: dict[tuple, list] | None = None
        self._links: dict[tuple, list] | None = None
        self._resolved: dict[tuple, list] = {}
        self._attrs: dict[int, dict] = {}
        self._called: dict[tuple, frozenset] = {}
        self._loads_by_name: dict[str, list] | None = None

    def _candidates(self) -> dict[tuple, list]:
        """key -> [(the `x.at[i]` / `x[...]` node, rank)], built once: each
        use's binding is looked up once, so the cost is linear in the file."""
        if self._by_key is None:
            self._by_key = {}
            parent = self.f.parent
            for name in self.f.loads:
                up = parent.get(id(name))
                if up.__class__ is ast.Attribute and up.attr == "at":
                    sub = parent.get(id(up))
                    if not (sub.__class__ is ast.Subscript and sub.value is up):
                        continue
                    found = (sub, _index_rank(sub.slice))
                elif up.__class__ is ast.Subscript and up.value is name \
                        and _is_load(up, self.is_ds, stores=True):
                    found = (up, None)
                else:
                    continue
                key = self.key(name.id, self.f.scope_of[id(name)])
                if key is not None:
                    self._by_key.setdefault(key, []).append(found)
        return self._by_key

    def _evidence(self, key) -> list:
        """[(node, rank, branch path)] for the name bound once at `key`."""
        got = self._resolved.get(key)
        if got is None:
            got = self._resolved[key] = [(node, rank, self.path(node, key[0]))
                                         for node, rank in self._candidates().get(key, ())]
        return got

    def key(self, name: str, scope: _Scope):
        """(id(scope binding `name` once), name), or None. A name the file
        never binds (a docs page's placeholder for a kernel's parameter, a
        star import's) is one value in the file's functions, which show parts
        of one kernel; uses at module level may be other snippets' things."""
        if name in self.f.tainted:
            return None
        s, module = self.f.resolve(name, scope)
        if s is not None:
            # `wrow_vm = None` on the path that never uses it: a None has no
            # `.at`, so evidence speaks of the one other binding.
            binds = [b for b in s.binds[name]
                     if not (b[0] == "value" and _is_none(b[1]))]
            if len(binds) == 1:
                return (id(s.node), name)
            settled = self._settled_after(s, name)
            return (id(s.node), name, settled) if settled is not None else None
        top = scope  # the top-level def (or class) around the use
        while top.parent is not None and top.parent.parent is not None:
            top = top.parent
        return (id(module.node), name) if top.parent is not None and top.kind == "function" \
            else None

    def _settled_after(self, s: _Scope, name: str) -> int | None:
        """The last line binding `name` in the function `s`, when every
        binding is a plain assignment run at most once per call (no loop, no
        comprehension; `if` arms and unpacking allowed): code after that line
        reads one value per call, whichever binding made it. None otherwise."""
        if s.kind != "function":
            return None
        stores = s.stores.get(name, ())
        if len(stores) != len(s.binds[name]) or not stores:
            return None  # a parameter, import, def or handler binds it too
        parent = self.f.parent
        for node in stores:
            up = parent.get(id(node))
            while up is not None and up is not s.node:
                if isinstance(up, (ast.For, ast.AsyncFor, ast.While) + _COMPS):
                    return None
                up = parent.get(id(up))
        return max(n.lineno for n in stores)

    def path(self, node, top_id) -> frozenset:
        """The branches (`if` arms, `try` bodies, handlers, cases, filters) `node` sits in,
        up to the function binding the name. A nested def runs where it is
        called or handed on (`start()` under `if pipelined:`, `fori_loop(...,
        body, ...)`): its code is under the branches every such place shares
        (`_called_path`)."""
        out, parent = set(), self.f.parent
        child, up = node, parent.get(id(node))
        while up is not None and id(child) != top_id:
            if isinstance(up, _DEFS) and id(up) != top_id:
                out |= self._called_path(up, top_id)
                break
            if isinstance(up, (ast.If, ast.IfExp)):
                if child is not up.test:
                    out.add((_decision(up), child in up.body if isinstance(up.body, list)
                             else child is up.body))
            elif isinstance(up, (ast.ExceptHandler, ast.match_case, ast.comprehension)):
                out.add((id(up), True))
            elif isinstance(up, _TRY) and child in up.body:  # `.at` may be what raised
                out.add((id(up), True))
            elif isinstance(up, _COMPS) and any(g.ifs for g in up.generators):
                out.add((id(up), True))  # a filtered element
            elif isinstance(up, ast.BoolOp) and up.values and child is not up.values[0]:
                out.add((id(up), True))
            child, up = up, parent.get(id(up))
        return frozenset(out)

    def _called_path(self, d, top_id) -> frozenset:
        """The branches shared by every place the nested def `d` is called or
        handed on (its name read), or where it stands when it is a lambda,
        decorated (run as defined: `@pl.when`), or never named again."""
        key = (id(d), top_id)
        got = self._called.get(key)
        if got is not None:
            return got
        self._called[key] = frozenset()  # a def calling itself adds nothing more
        sites = None
        if not isinstance(d, ast.Lambda) and not d.decorator_list:
            if self._loads_by_name is None:
                self._loads_by_name = {}
                for n in self.f.loads:
                    self._loads_by_name.setdefault(n.id, []).append(n)
            sites = [n for n in self._loads_by_name.get(d.name, ())
                     if self.f.lookup(n.id, self.f.scope_of[id(n)]) == ("def", d)]
        paths = [self.path(n, top_id) for n in sites] if sites else [self.path(d, top_id)]
        got = self._called[key] = frozenset.intersection(*paths)
        return got

    def of(self, name: ast.Name, fallback: _Scope, *, ranked: bool):
        """Evidence for `name` read at its place that is traced whenever that
        place is (`ranked`: only `x.at[i]` with a real index): (the node, its
        rank, the call that hands the name on when the evidence is across it)."""
        key = self.key(name.id, self.f.scope_of.get(id(name), fallback))
        if key is None:
            return None
        found = self._evidence(key)
        here = self.path(name, key[0])
        if len(key) == 3:  # several bindings: only what runs after them all
            if name.lineno <= key[2]:
                return None
            found = [e for e in found if e[0].lineno > key[2]]
        for node, rank, path in found:
            if (rank if ranked else True) and path <= here:
                return node, rank, None
        # The same value under another name: a parameter a function of this
        # file is handed (`g(recvs=recvs)`), with its evidence there.
        for other, call, caller_side in self._linked().get(key, ()):
            if len(key) == 3 or len(other) == 3:
                continue  # one hop across a call, of names bound once only
            for node, rank, path in self._evidence(other):
                if not (rank if ranked else True):
                    continue
                if caller_side:  # evidence in the caller, the use in the callee
                    ok = path <= self.path(call, other[0])
                else:  # evidence in the callee (always traced), the use in the caller
                    ok = not path and self.path(call, key[0]) <= here
                if ok:
                    return node, rank, call
        return None

    def ranks(self, node, fallback: _Scope) -> list:
        """[(the `x.at[i, ...]` node, how many axes it names)] for `x` (a name
        bound once, or `self.x` assigned once in its class), wherever the
        file indexes it: how many axes the value has at least."""
        if isinstance(node, ast.Attribute):
            found = self._attr_evidence(node)
            return [(ev, r) for ev, r in found if r] if found else []
        key = self.key(node.id, self.f.scope_of.get(id(node), fallback))
        if key is None or len(key) == 3:
            return []
        return [(ev, r) for ev, r, _ in self._evidence(key) if r]

    def of_attr(self, node: ast.Attribute, *, ranked: bool):
        """Evidence for `self.x` read in a method (or a closure in one): a
        `self.x.at[i]`, or a load or store no list takes, in any method of
        the class. The instance is one object, so evidence anywhere in the
        class holds wherever `self.x` is read, provided the class assigns
        `self.x` at most once (then every method sees that one value)."""
        for ev, rank in self._attr_evidence(node) or ():
            if rank if ranked else True:
                return ev, rank, None
        return None

    def _attr_evidence(self, node: ast.Attribute):
        """[(evidence node, rank)] for `self.x` or `self.a.b` (state kept on
        the instance, or on an object kept there: `self.scratch.sems`), when
        every method sees one value: `self.x` assigned at most once, and for
        a chain each object on the way assigned at most once and the last
        attribute never; None otherwise."""
        path = _self_path(node)
        owner = self._method_class(node) if path is not None else None
        if owner is None:
            return None
        attrs = self._class_attrs(owner)
        parts = path.split(".")
        for i in range(1, len(parts)):
            if attrs.get(".".join(parts[:i]), (0, ()))[0] > 1:
                return None
        assigned, found = attrs.get(path, (0, ()))
        if assigned > (1 if len(parts) == 1 else 0):
            return None
        return found

    def _method_class(self, node: ast.Attribute):
        """The class whose instance the chain's first name is: the first
        parameter of the method the read sits in, not shadowed on the way."""
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        name, parent = root.id, self.f.parent
        child, up = node, parent.get(id(node))
        while up is not None:
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = up.args
                params = [p.arg for p in a.posonlyargs + a.args]
                holder = parent.get(id(up))
                if isinstance(holder, ast.ClassDef) and params and params[0] == name \
                        and child in up.body:
                    return holder
                if name in params or name in {p.arg for p in a.kwonlyargs}:
                    return None
            elif isinstance(up, ast.ClassDef):
                return None
            child, up = up, parent.get(id(up))
        return None

    def _class_attrs(self, cls: ast.ClassDef) -> dict[str, tuple]:
        """attr (or `a.b` for `self.a.b`) -> (times it is assigned, [(evidence
        node, rank)]), per class."""
        got = self._attrs.get(id(cls))
        if got is not None:
            return got
        count: dict[str, int] = {}
        found: dict[str, list] = {}
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = method.args
            params = a.posonlyargs + a.args
            if not params:
                continue
            me = params[0].arg
            for n in ast.walk(method):
                if not isinstance(n, ast.Attribute):
                    continue
                path = _self_path(n, me)
                if path is None:
                    continue
                up = self.f.parent.get(id(n))
                if not isinstance(n.ctx, ast.Load):
                    # `self.x += v` rebinds a value set somewhere else first: two
                    count[path] = count.get(path, 0) + (2 if up.__class__ is ast.AugAssign
                                                        else 1)
                    continue
                if up.__class__ is ast.Attribute and up.attr == "at":
                    sub = self.f.parent.get(id(up))
                    if sub.__class__ is ast.Subscript and sub.value is up:
                        found.setdefault(path, []).append((sub, _index_rank(sub.slice)))
                elif up.__class__ is ast.Subscript and up.value is n \
                        and _is_load(up, self.is_ds, stores=True):
                    found.setdefault(path, []).append((up, None))
        got = self._attrs[id(cls)] = {k: (count.get(k, 0), tuple(found.get(k, ())))
                                      for k in set(found) | set(count)}
        return got

    def _linked(self) -> dict[tuple, list]:
        """key -> [(the other key, the call, is the other the caller's)] for
        each call of a def of this file given a name as an argument."""
        if self._links is None:
            self._links = {}
            f = self.f
            for call in f.calls:
                func = call.func
                if not isinstance(func, ast.Name):
                    continue
                scope = f.scope_of.get(id(call))
                b = f.lookup(func.id, scope) if scope is not None else None
                if b is None or b[0] != "def":
                    continue
                inner = f.def_scope.get(id(b[1]))
                if inner is None:
                    continue
                a = b[1].args
                positional = [p.arg for p in a.posonlyargs + a.args]
                # positional arguments up to the first `*xs`: their parameters are certain
                given = next((call.args[:i] for i, x in enumerate(call.args)
                              if isinstance(x, ast.Starred)), call.args)
                pairs = list(zip(positional, given))
                names = set(positional) | {p.arg for p in a.kwonlyargs}
                pairs += [(k.arg, k.value) for k in call.keywords if k.arg in names]
                for param, arg in pairs:
                    if not isinstance(arg, ast.Name) or param in f.tainted \
                            or inner.binds.get(param) != [("other", None)]:
                        continue
                    outer = self.key(arg.id, f.scope_of.get(id(arg), scope))
                    if outer is None:
                        continue
                    callee = (id(inner.node), param)
                    self._links.setdefault(callee, []).append((outer, call, True))
                    self._links.setdefault(outer, []).append((callee, call, False))
        return self._links


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


_PURE = (ast.Name, ast.Load, ast.Constant, ast.UnaryOp, ast.Not, ast.BoolOp, ast.And, ast.Or,
         ast.Compare, ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn, ast.Lt, ast.LtE,
         ast.Gt, ast.GtE, ast.Attribute)


def _decision(node: ast.If | ast.IfExp):
    """What an `if` decides on: two `if not do_a2a8:` of one file take the
    same arm (a flag read twice), so they are one decision; a test that
    calls or indexes anything is its own."""
    if all(isinstance(n, _PURE) for n in ast.walk(node.test)):
        return ast.dump(node.test)
    return id(node)


def _bound_names(stmt: ast.stmt) -> frozenset:
    """The names `stmt` binds (nested defs and classes by their name only;
    a def or class that is `stmt` itself, its body's too)."""
    out: set[str] = set()
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            if node is not stmt:
                continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        if isinstance(node, (ast.Lambda,) + _COMPS):
            continue  # their own scopes (a walrus inside aside)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(out)


_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _names_ds(f: "_File", func) -> bool:
    """`func` names `pl.ds` (resolved where its base name is read)."""
    base = func
    while isinstance(base, ast.Attribute):
        base = base.value
    scope = f.scope_of.get(id(base)) if isinstance(base, ast.Name) else None
    return scope is not None and f.pallas_api(func, scope) in _DS


def _self_path(node: ast.Attribute, me: str | None = None) -> str | None:
    """`"x"` for `self.x`, `"a.b"` for `self.a.b` (two attributes at most:
    state kept on the instance, or on one object kept there); None for
    anything else. `me` names the instance (default: whatever name it is)."""
    parts = [node.attr]
    base = node.value
    if isinstance(base, ast.Attribute):
        parts.append(base.attr)
        base = base.value
    if not isinstance(base, ast.Name) or (me is not None and base.id != me):
        return None
    return ".".join(reversed(parts))


def _at_view(node):
    """`x` of `x.at[...]` (a name or `self.x`), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "at" and isinstance(node.value.value, (ast.Name, ast.Attribute)):
        return node.value.value
    return None


def _index_rank(index) -> int | None:
    """How many axes `x.at[index]` names at least; None for `...` / `()`
    alone (which a scalar takes as well)."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    n = sum(1 for e in items if not (isinstance(e, ast.Constant) and e.value is Ellipsis))
    return n or None



class _Maker:
    """One `make_async_copy(...)`-like call and what is seen done with it."""
    __slots__ = ("call", "api", "scope", "args", "ops", "escaped", "ambiguous")

    def __init__(self, call, api_name, scope, args):
        self.call, self.api, self.scope, self.args = call, api_name, scope, args
        self.ops: list[tuple[str, ast.Call, ast.Attribute]] = []
        self.escaped = False
        # bound to a name with several bindings, read where none explains it:
        # it may be this descriptor or another (not handed on, just unknown)
        self.ambiguous = False

    @property
    def remote(self) -> bool:
        return self.api in _REMOTE


class _Floor:
    def __init__(self, ctx: Context, dead=None):
        self.ctx, self.dead = ctx, dead
        self.f = _File(ctx.src.tree)
        self.makers: dict[int, _Maker] = {}
        self.helpers: dict[int, list[_Maker]] = {}  # id(def) -> makers it returns
        self._evidence: _Evidence | None = None
        self._containers: frozenset[str] | None = None
        self._dma_indexed: dict[str, list[int]] | None = None
        self._lone: set[int] = set()  # the `x[i]` read as loads for want of other signs
        self._ref_fields: frozenset[str] | None = None

    @property
    def evidence(self) -> _Evidence:
        if self._evidence is None:
            # (a function of `f` alone: a method of ours would make a cycle)
            self._evidence = _Evidence(self.f, functools.partial(_names_ds, self.f))
        return self._evidence

    def span(self, node) -> Span:
        return self.ctx.span(node)

    def unreached(self, node) -> bool:
        """After a `return` / `raise` / `break` / `continue` of its block, or in
        a def that is (JAX never traces it), or known dead by the interpreter."""
        if id(node) in self.ctx.src.dead:
            return True
        return self.dead is not None and self.dead(node, self.f.scope_of.get(id(node)))

    def text(self, node) -> str:
        return self.ctx.text(node)

    # ---- which descriptor an expression is

    def descriptors(self, expr, scope, depth=0) -> list[_Maker] | None:
        if depth > 4:
            return None
        if isinstance(expr, ast.Call):
            m = self.makers.get(id(expr))
            if m is not None:
                return [m]
            if isinstance(expr.func, ast.Name):  # a helper of this file
                b = self.f.lookup(expr.func.id, scope)
                if b is not None and b[0] == "def":
                    return self.helpers.get(id(b[1]))
            return None
        if isinstance(expr, ast.Name):
            b = self.f.lookup(expr.id, scope)
            if b is not None and b[0] == "value":
                return self.descriptors(b[1], self._scope_binding(expr.id, scope), depth + 1)
            if b is None and expr.id not in self.f.tainted:
                # `dma = make_async_remote_copy(...)` in each of three loops:
                # the name is bound thrice, but each `dma.start()` reads the
                # assignment just above it.
                value = self.f.straight_line_value(expr)
                m = self.makers.get(id(value)) if value is not None else None
                if m is not None:
                    return [m]
        return None

    def _scope_binding(self, name, scope):
        return self.f.resolve(name, scope)[0] or scope

    def run(self):
        f = self.f
        for call in f.calls:
            name = f.dma_api(call.func, f.scope_of[id(call)])
            if name is None:
                continue
            args = _args(call, name)
            if args is None or self.unreached(call):
                continue
            self.makers[id(call)] = _Maker(call, name, f.scope_of[id(call)], args)
        if not self.makers:
            return
        self._find_helpers()
        self._uses()
        yield from self._wait_send()
        yield from self._priority()
        yield from self._device_id()
        yield from self._loads()

    def _find_helpers(self):
        """Functions of the file every `return` of which gives a descriptor."""
        returns: dict[int, tuple] = {}
        for key, (scope, rets) in self.f.returns.items():
            if key in self.f.generators or scope.kind != "function" \
                    or isinstance(scope.node, ast.Lambda):
                continue
            if any(r.value is not None and isinstance(r.value, (ast.Call, ast.Name))
                   for r in rets):
                returns[id(scope.node)] = (scope, rets)
        for _ in range(3):  # helpers returning helpers
            changed = False
            for node_id, (scope, rets) in returns.items():
                found = []
                for r in rets:
                    got = self.descriptors(r.value, scope) if r.value is not None else None
                    if not got:
                        found = None
                        break
                    found.extend(got)
                if found and [id(m) for m in found] != [id(m) for m in self.helpers.get(node_id, [])]:
                    self.helpers[node_id] = found
                    changed = True
            if not changed:
                break

    def _uses(self):
        """Methods called on descriptors; descriptors used any other way escape."""
        f = self.f
        for m in self.makers.values():
            parent = f.parent.get(id(m.call))
            if isinstance(parent, ast.Attribute):
                continue  # chained: seen as a method call below
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0], ast.Name) \
                    and parent.targets[0].id not in f.tainted:
                # followed through the name below (bound once, or by the
                # assignment just above each use)
                continue
            if isinstance(parent, ast.Expr) and m.api in _STARTING:
                continue  # `pltpu.async_copy(...)` as a statement: nothing else done
            m.escaped = True
        for call in f.calls:
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr in _METHODS):
                continue
            got = self.descriptors(func.value, f.scope_of[id(call)])
            if got and self.unreached(call):
                continue
            for m in got or ():
                m.ops.append((func.attr, call, func))
        # names bound to a descriptor read in any other way: it escapes
        bound = {t.id for m in self.makers.values()
                 for t in [getattr(f.parent.get(id(m.call)), "targets", [None])[0]]
                 if isinstance(t, ast.Name)}
        for call in f.calls:  # `c = helper(...)`
            up = f.parent.get(id(call))
            if isinstance(up, ast.Assign) and isinstance(call.func, ast.Name) and \
                    len(up.targets) == 1 and isinstance(up.targets[0], ast.Name):
                bound.add(up.targets[0].id)
        # makers assigned to a name bound more than once: a read that no
        # assignment just above explains may be any of them
        several: dict[tuple, list] = {}
        for m in self.makers.values():
            up = f.parent.get(id(m.call))
            if isinstance(up, ast.Assign) and len(up.targets) == 1 \
                    and isinstance(up.targets[0], ast.Name) \
                    and f.lookup(up.targets[0].id, m.scope) is None:
                target = up.targets[0].id
                s = self._scope_binding(target, m.scope)
                several.setdefault((id(s), target), []).append(m)
        for name in f.loads:
            if name.id not in bound:
                continue
            scope = f.scope_of[id(name)]
            got = self.descriptors(name, scope)
            if not got:
                for m in several.get((id(self._scope_binding(name.id, scope)), name.id), ()):
                    m.escaped = m.ambiguous = True
                continue
            parent = f.parent.get(id(name))
            if isinstance(parent, ast.Attribute) and parent.attr in _METHODS and \
                    isinstance(f.parent.get(id(parent)), ast.Call) and \
                    f.parent[id(parent)].func is parent:
                continue
            for m in got:
                m.escaped = True
        for ms in self.helpers.values():
            for m in ms:
                m.escaped = True  # its callers may do anything with it

    # ---- the findings

    def _wait_send(self):
        for m in self.makers.values():
            if m.remote:
                continue
            for op, call, attr in m.ops:
                if op != "wait_send" or call.args or call.keywords:
                    continue
                yield pal106.finding(self.ctx, attr, m.api, m.call.lineno)

    def _priority_args(self, m: _Maker):
        """(value node, literal, the call holding it) for each priority of `m`."""
        out = []
        if m.api == "async_copy" and "priority" in m.args:
            out.append((m.args["priority"], m.call))
        for op, call, _ in m.ops:
            if op != "start":
                continue
            if call.args and not isinstance(call.args[0], ast.Starred):
                out.append((call.args[0], call))
            for k in call.keywords:
                if k.arg == "priority":
                    out.append((k.value, call))
        for node, call in out:
            p = _neg_int(node)
            if p is None:
                via = self.f.value_of(node, self.f.scope_of.get(id(call)) or m.scope)
                p = _neg_int(via) if via is not None else None
            if p is not None:
                yield node, p, call

    def _priority(self):
        seen = set()
        for m in self.makers.values():
            for node, p, call in self._priority_args(m):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                yield pal108.finding(self.ctx, call, node, p, fixable=_neg_int(node) is not None)

    def _device_id(self):
        for m in self.makers.values():
            if not m.remote:
                continue
            dev, send = m.args.get("device_id"), m.args.get("send_sem")
            if dev is None or send is None:
                continue
            if _is_none(dev) and _never_none(send):
                yield pal105.finding(self.ctx, dev, device_is_none=True)
            elif _is_none(send) and _never_none(dev):
                yield pal105.finding(self.ctx, send, device_is_none=False)

    def _load(self, node, m: _Maker):
        """(node, the load it is or holds) when `node` is a load; None otherwise."""
        def is_ds(func):
            return self.f.pallas_api(func, m.scope) in _DS

        if _is_load(node, is_ds) or self._evident_load(node, m.scope) \
                or self._lone_index(node, node) or self._annotated_ref(node, node):
            return node
        via = self.f.value_of(node, m.scope)
        if via is not None and (_is_load(via, is_ds) or self._evident_load(via, m.scope)
                                or self._lone_index(via, node) or self._annotated_ref(via, node)):
            return via
        return None

    def _annotated_ref(self, sub, arg) -> bool:
        """`x[...]` given to a DMA (as `arg`, or as the value of the name
        `arg`) where `x` is a parameter annotated as a Ref, or `obj.x` where
        a class of the file annotates its field `x` as one; only where the
        interpreter had no value there (it decides otherwise)."""
        if self.dead is None or id(arg) in self.dead.known:
            return False
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load)):
            return False
        base = sub.value
        if isinstance(base, ast.Attribute):
            if base.attr == "at":
                return False
            if self._ref_fields is None:
                self._ref_fields = ref_fields(self.ctx.src.tree)
            return base.attr in self._ref_fields
        param = self._param_of(base) if isinstance(base, ast.Name) else None
        return param is not None and is_ref_annotation(param.annotation)

    def _lone_index(self, sub, arg) -> bool:
        """`x[i]` given to a DMA (as `arg`, or as the value of the name `arg`)
        where neither the interpreter nor the file says `x` holds several
        values. A list of Refs is indexed the same way, so every sign of a
        container keeps this silent: a `*x` parameter, a literal, slice or
        `list(...)` bound to the name, iteration, `len`, unpacking, a string
        key, a container annotation, and the file's other DMAs indexing `x`
        the same way (they are taken to be right)."""
        if self.dead is None or id(arg) in self.dead.known:
            return False
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load)):
            return False
        base = sub.value
        if not isinstance(base, (ast.Name, ast.Attribute)) \
                or (isinstance(base, ast.Attribute) and base.attr == "at"):
            return False
        if not self._handed_in(base):
            return False
        index = sub.slice
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if isinstance(index, ast.Slice) or any(
                isinstance(e, ast.Starred) or (isinstance(e, ast.Constant)
                                               and isinstance(e.value, (str, bytes)))
                for e in items):
            return False
        key = key_of(base)
        signs, indexed = self._container_signs()
        if key in signs or named_as_container(key) or any(
                other != id(sub) for other in indexed.get(key, ())):
            return False
        self._lone.add(id(sub))
        return True

    def _container_signs(self) -> tuple[frozenset[str], dict[str, list[int]]]:
        """(the names the file shows to be containers, name -> the `x[i]` the
        file's DMAs are handed), built on first use: most files never ask."""
        if self._containers is None:
            self._dma_indexed = {}
            for mk in self.makers.values():
                for a in mk.args.values():
                    got = indexed_in_place(a)
                    k = key_of(got.value) if got is not None else None
                    if k:
                        self._dma_indexed.setdefault(k, []).append(id(got))
            self._containers = containers(self.ctx.src.tree, frozenset(
                i for ids in self._dma_indexed.values() for i in ids))
        return self._containers, self._dma_indexed

    def _evident_load(self, node, scope) -> bool:
        """`x[i]` where the function shows `x` is a Ref or an Array (`_Evidence`)."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)):
            return False
        if isinstance(node.value, ast.Attribute):  # `self.buf[i]`, `self.k_hbm_ref[i]`
            return self.evidence.of_attr(node.value, ranked=False) is not None \
                or (isinstance(node.value.value, ast.Name)
                    and standalone.named_as_ref(node.value.attr))
        if not isinstance(node.value, ast.Name):
            return False
        if self.evidence.of(node.value, scope, ranked=False) is not None:
            return True
        # `for hbm, buf, sem in ((lse_hbm, lse_buf, 0), ...)`: each value `buf`
        # takes is a name the function shows to be a Ref.
        values = self._loop_values(node.value)
        return bool(values) and all(
            isinstance(v, ast.Name) and self.evidence.of(v, scope, ranked=False) is not None
            for v in values)

    def _loop_values(self, name: ast.Name) -> list | None:
        """The expressions `name` takes when its one binding is a `for`
        target over a literal tuple or list; None otherwise."""
        scope = self.f.scope_of.get(id(name))
        s, _ = self.f.resolve(name.id, scope) if scope is not None else (None, None)
        stores = s.stores.get(name.id, ()) if s is not None else ()
        if len(stores) != 1 or len(s.binds.get(name.id, ())) != 1:
            return None
        node, path = stores[0], []
        parent = self.f.parent.get(id(node))
        while isinstance(parent, (ast.Tuple, ast.List)):
            path.append(parent.elts.index(node))
            node, parent = parent, self.f.parent.get(id(parent))
        if not (isinstance(parent, ast.For) and parent.target is node
                and isinstance(parent.iter, (ast.Tuple, ast.List))):
            return None
        values = []
        for item in parent.iter.elts:
            for i in reversed(path):
                if not isinstance(item, (ast.Tuple, ast.List)) or i >= len(item.elts):
                    return None
                item = item.elts[i]
            values.append(item)
        return values

    def _whole_sem_array(self, node, m: _Maker):
        """The `x.at[i]` showing that the bare name `node`, given as a started
        DMA's semaphore, is a semaphore array; None otherwise."""
        if isinstance(node, ast.Attribute):  # `self.sem_recvs`
            return self.evidence.of_attr(node, ranked=True)
        if not isinstance(node, ast.Name):
            return None
        got = self.evidence.of(node, m.scope, ranked=True)
        if got is None:  # `sem = sems` on the line before: the evidence is of `sems`
            via = self.f.value_of(node, self.f.scope_of.get(id(node), m.scope))
            if isinstance(via, ast.Name):
                got = self.evidence.of(via, m.scope, ranked=True)
                if got is None:  # `sem = row` where `row = sems.at[slot]`
                    via = self.f.value_of(via, self.f.scope_of.get(id(via), m.scope))
            elif isinstance(via, ast.Attribute):  # `sem = self.sem_recvs`
                got = self.evidence.of_attr(via, ranked=True)
            if got is None and _at_view(via) is not None:
                got = self._view_of_array(via, m)
        return got

    def _view_of_array(self, view: ast.Subscript, m: _Maker):
        """`s = x.at[slot]` where the file indexes `x` with more axes
        (`x.at[slot, c]`): `s` is still an array. Slices keep their axis, so
        the view has at least that many axes less the ones named here."""
        base, named = _at_view(view), _index_rank(view.slice) or 0
        found = self.evidence.ranks(base, m.scope)
        if not found:
            return None
        at, rank = max(found, key=lambda e: e[1])
        return (at, rank - named, view) if rank > named else None

    def _named_sem_array(self, node, m: _Maker) -> str | None:
        """The name, when the semaphore `node` (or the name it was assigned
        from) is named as several (`recv_sems`, `self.semaphores`) and the
        interpreter gave it no value. Whatever such a name holds, a list or an
        array, it is not one semaphore; no file of the corpora names a single
        semaphore so."""
        if self.dead is None or id(node) in self.dead.known:
            return None
        via = self.f.value_of(node, self.f.scope_of.get(id(node), m.scope))
        for n in (node, via):
            name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) \
                else None
            if name and _SEMS_NAME.fullmatch(name):
                return name
        return None

    def _handed_in(self, base) -> bool:
        """`base` is a parameter (or a field of one: `scratch.hist`) of the
        function it is read in, or a name the file never binds (a docs
        page's placeholder). A name bound to a value (`bufs = pool.alloc()`,
        `self.bufs`) may hold anything: not judged."""
        while isinstance(base, ast.Attribute):
            base = base.value
        if not isinstance(base, ast.Name) or base.id in ("self", "cls") \
                or base.id in self.f.tainted:
            return False
        scope = self.f.scope_of.get(id(base))
        if scope is None:
            return False
        s, _ = self.f.resolve(base.id, scope)
        return s is None or self._param_of(base, s) is not None

    def _param_of(self, name: ast.Name, s: _Scope | None = None) -> ast.arg | None:
        """The parameter `name` is, when the function it is read in binds it
        only so (`s`: the scope binding it, when already resolved)."""
        if s is None:
            scope = self.f.scope_of.get(id(name))
            if scope is None or name.id in self.f.tainted:
                return None
            s, _ = self.f.resolve(name.id, scope)
        if s is None or s.kind != "function" or len(s.binds[name.id]) != 1:
            return None
        a = s.node.args
        return next((p for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg == name.id), None)

    def _explain(self, role: str, node, load) -> tuple[str, tuple]:
        what = explain_read(self.ctx, load, sem=role.endswith("semaphore"))
        if id(load) in self._lone:
            what += (f" (Nothing here shows `{self.text(load.value)}` holding several Refs: "
                     "no `*` parameter, literal, loop or other DMA indexing it.)")
        if load is not node:
            return (f"The {role} `{self.text(node)}` holds a read (line {load.lineno}): {what}",
                    ())
        return f"The {role} {what}", ref_fix(self.ctx, node)

    def _related(self, m: _Maker, kinds) -> tuple:
        return raised_at(self.ctx, ((op, call) for op, call, _ in m.ops if op in kinds))

    def _loads(self):
        for m in self.makers.values():
            a = m.args
            if m.remote and _is_none(a.get("device_id")) != _is_none(a.get("send_sem")):
                continue  # PAL105 is raised first, when the descriptor is built
            if m.api == "async_copy" and any(True for _ in self._priority_args(m)):
                continue  # PAL108 is checked first
            started = m.api in _STARTING or any(op == "start" for op, _, _ in m.ops)
            if m.api == "sync_copy":
                roles = [("source", "src_ref"), ("destination", "dst_ref")]
                if isinstance(a.get("src_ref"), (ast.List, ast.Tuple, ast.Dict)):
                    roles = roles[:1]  # a pytree of Refs into one read: another error first
            elif m.remote:
                roles = [("source", "src_ref"), ("destination", "dst_ref"),
                         ("receive semaphore", "recv_sem")]
            else:
                roles = [("source", "src_ref"), ("destination", "dst_ref"), ("semaphore", "sem")]
            found = [(role, a[key], self._load(a[key], m)) for role, key in roles if key in a]
            found = [x for x in found if x[2] is not None]
            # A descriptor returned, stored or passed on is started or waited
            # where this function cannot see; a read among its Refs is wrong
            # either way (JAX refuses it at the start, or at the wait).
            handed_on = m.escaped and not m.ops and not m.ambiguous
            if started or handed_on:
                for role, node, load in found:
                    detail, fixes = self._explain(role, node, load)
                    if handed_on:
                        detail = ("This descriptor is handed on (returned, stored or passed) to be "
                                  "started or waited elsewhere, and " + detail[0].lower()
                                  + detail[1:])
                    yield Finding(code=pal101.CODE, message=pal101.MESSAGE, span=self.span(node),
                                  detail=detail, fixes=fixes,
                                  related=self._related(m, ("start",)))
                if not found:
                    yield from self._whole_arrays(m)
                send = a.get("send_sem")
                if m.remote and not found and send is not None:
                    load = self._load(send, m)
                    if load is not None:
                        detail, fixes = self._explain("send semaphore", send, load)
                        yield Finding(code=pal102.CODE, message=pal102.MESSAGE,
                                      span=self.span(send), detail=detail, fixes=fixes,
                                      related=self._related(m, ("start",)))
                continue
            waits = [op for op, _, _ in m.ops if op in ("wait", "wait_recv", "wait_send")]
            if not waits or m.escaped:
                continue
            if not m.remote and "wait_send" in waits:
                continue  # PAL106 first
            sems = [("receive semaphore" if m.remote else "semaphore",
                     a.get("recv_sem" if m.remote else "sem"))]
            if m.remote and any(w in ("wait", "wait_send") for w in waits):
                sems.append(("send semaphore", a.get("send_sem")))
            said = False
            for role, node in sems:
                if node is None:
                    continue
                load = self._load(node, m)
                if load is None:
                    for f in self._waited_array(m, role, node):
                        said = True
                        yield f
                    continue
                said = True
                detail, fixes = self._explain(role, node, load)
                yield Finding(code=pal110.CODE, message=pal110.MESSAGE, span=self.span(node),
                              detail=("This descriptor is only built to be waited on, and "
                                      + detail[0].lower() + detail[1:]),
                              fixes=fixes,
                              related=self._related(m, ("wait", "wait_recv", "wait_send")))
            if said:
                continue
            # PAL112: the wait makes its source a read effect and its
            # destination a write effect; a value made in the kernel is no
            # input of the jaxpr, and tracing fails when the kernel is closed.
            for role, key, effect in (("source", "src_ref", "Read"), ("destination", "dst_ref", "Write")):
                node = a.get(key)
                load = self._load(node, m) if node is not None else None
                if load is None:
                    continue
                detail, fixes = self._explain(role, node, load)
                yield Finding(code=pal112.CODE, message=pal112.MESSAGE.format(effect=f"{effect}<…>"),
                              span=self.span(node),
                              detail=("This descriptor is only built to be waited on, and "
                                      + detail[0].lower() + detail[1:] + " JAX fails when it "
                                      "finishes tracing the kernel (the traceback does not name "
                                      "this line)."),
                              fixes=fixes,
                              related=self._related(m, ("wait", "wait_recv", "wait_send")))

    def _waited_array(self, m: _Maker, role: str, node):
        """PAL406: a wait-only descriptor given a bare name its file indexes
        with `.at[i]` waits on a whole semaphore array (the TPU lowering
        refuses it; tracing does not check)."""
        yield from self._array_finding(
            m, node, pal406.CODE, pal406.MESSAGE, ("wait", "wait_recv", "wait_send"),
            f"A DMA wait blocks on one {role}, so select it with `{{text}}.at[i]`. Tracing "
            f"accepts this; lowering for a TPU fails (the `tpu.wait_dma2` op).")

    def _whole_arrays(self, m: _Maker):
        """PAL103 / PAL104: a started DMA given a bare name its function also
        indexes with `.at[i]` as its (receive or send) semaphore."""
        roles = [("recv_sem", pal103, "receive"), ("send_sem", pal104, "send")] \
            if m.remote else [("sem", pal103, "completion")]
        for key, rule, role in roles:
            node = m.args.get(key)
            if node is not None:
                # `…`: a value only the running program knows (the array's shape)
                yield from self._array_finding(
                    m, node, rule.CODE, rule.MESSAGE.format(shape="…"), ("start",),
                    f"A DMA signals exactly one {role} semaphore, so select it with "
                    f"`{{text}}.at[i]`.")

    def _array_finding(self, m: _Maker, node, code: str, message: str, ops, advice: str):
        """The finding for a bare name shown to be a whole semaphore array."""
        got = self._whole_sem_array(node, m)
        if got is None:
            named = self._named_sem_array(node, m)
            if named is not None:
                text = self.text(node)
                yield Finding(
                    code=code, message=message, span=self.span(node),
                    detail=(f"`{text}` is named as several semaphores (`{named}`), and nothing "
                            "here gives it one: a list or an array of semaphores is not one. "
                            + advice.format(text=text)),
                    fixes=at_fix(self.ctx, node, None), related=self._related(m, ops))
            return
        at, rank, call = got
        text = self.text(node)
        if isinstance(call, ast.Subscript):  # `s = x.at[slot]`, where line N indexes `x` further
            what = (f"`{text}` is `{self.text(call)}`, still an array of semaphores: line "
                    f"{at.lineno} indexes the same array with more axes (`{self.text(at)}`). ")
        else:
            handed = f" (the same array, handed on by the call on line {call.lineno})" \
                if call is not None else ""
            what = (f"`{text}` is a whole array of semaphores: line {at.lineno} selects one of "
                    f"them with `{self.text(at)}`{handed}. ")
        yield Finding(
            code=code, message=message, span=self.span(node),
            detail=what + advice.format(text=text),
            fixes=at_fix(self.ctx, node, (None,) * rank),
            related=self._related(m, ops))


def check(ctx: Context, interp=None):
    """The floor's findings for the analysed file (its own AST only).

    With `interp` (the interpreter that ran the file), a DMA call in a
    function the engine ran with the values of a launch, but never reached
    (a branch JAX does not trace), is left alone: the engine knows it is dead."""
    src = ctx.src
    if not enabled() or not any(w in src.text for w in _WORDS):
        return []
    return list(_Floor(ctx, _Dead(interp) if interp is not None else None).run())


def _informative(value) -> bool:
    """A value that says more than "some Ref": a parameter taken for a Ref
    by its use alone has no shape, kind of semaphore or memory space."""
    if isinstance(value, (Unknown, StarUnknown)):
        return False
    return not (isinstance(value, Ref) and value.shape is None and value.sem is None
                and value.space is Space.UNKNOWN)


class _Dead:
    """What the interpreter knows is never traced."""

    def __init__(self, interp):
        events = interp.events
        self.ok = not events.truncated  # a step budget ran out: nothing is known dead
        self.entered = set(interp._entered) - set(interp._unknown_run)
        self.reached = set()
        self.known = set()  # DMA arguments the interpreter gave a value
        for call in events.dmas:
            self.reached.add(id(call.node))
            self.reached.update(id(op.node) for op in call.ops)
            for arg in (call.src, call.dst, call.sem, call.send_sem):
                if arg is not None and arg.node is not None and _informative(arg.value):
                    self.known.add(id(arg.node))
        # No DMA call of the file reached: the engine may not know these APIs
        # under the names this file uses; then an unreached call is not dead.
        own = interp.src  # (the command line's parse may be tagged as the file's own)
        self.ok = self.ok and any(getattr(n, "_pl_src", own) is own
                                  for n in (c.node for c in events.dmas))

    def __call__(self, node, scope) -> bool:
        if not self.ok or id(node) in self.reached:
            return False
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        return scope is not None and id(scope.node) in self.entered
