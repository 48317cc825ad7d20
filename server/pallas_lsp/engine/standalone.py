"""Kernels no launch in the analysed code reaches (their launcher lives in
a file not opened, or nowhere yet).

A function that calls a DMA or semaphore API can only run inside a kernel,
and a parameter it uses as a Ref (`p.at[...]`, `p[...] = v`, handed to a
DMA or semaphore call as a Ref) or names as one (`x_ref`, `x_hbm`) is a Ref
whatever launch binds it. Run as kernel code with those Refs, such a
function still gets the checks that do not depend on the launch: Ref-ness
of DMA arguments, descriptor methods, priorities, device ids. What the
launch decides (shapes, memory spaces, semaphore kinds) stays unknown, and
so does the kernel around the function: no claims about its start/wait
protocol are made.

A function (or method) that calls such a function of the same file by name
(`ring.stage(...)`, `_issue(...)`) is kernel code too: a kernel's plug-in
method builds a helper object from its Refs and calls the helper's method
that does the DMAs, and only the outer call binds the Refs."""
from __future__ import annotations

import ast
import re

from pallas_lsp.engine import syntax
from pallas_lsp.engine.relevance import any_between
from pallas_lsp.engine.variants import LAUNCH_NAMES

_LAUNCHES = LAUNCH_NAMES | {"emit_pipeline"}
# Positions of the Ref arguments of each kernel-only call.
_REF_POSITIONS = {"make_async_copy": (0, 1, 2), "async_copy": (0, 1, 2), "sync_copy": (0, 1),
                  "make_async_remote_copy": (0, 1, 2, 3), "async_remote_copy": (0, 1, 2, 3),
                  "semaphore_signal": (0,), "semaphore_wait": (0,), "semaphore_read": (0,)}
_REF_KEYWORDS = {"src_ref", "dst_ref", "sem", "send_sem", "recv_sem", "sem_or_view"}
# Pallas' naming convention for Refs (`x_ref`, `x_hbm`, `buf_vmem`), also
# evidence where the only use is the one a bug changed (`copy(x_ref[...])`).
_REF_SUFFIXES = ("_ref", "_hbm", "_vmem", "_smem")
# `x.at[i].set(v)`: a jax array's functional update, not a Ref.
_ARRAY_UPDATES = {"set", "add", "multiply", "mul", "divide", "min", "max", "get", "apply",
                  "power"}


def named_as_ref(name: str) -> bool:
    return name.endswith(_REF_SUFFIXES) or name == "ref"


def _tail(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else ""


class KernelCode:
    """Which defs of one file can only be kernel code: they call a DMA or
    semaphore API, or call by name (`f(...)`, `obj.f(...)`) a def of the file
    that is kernel code; a def that launches a kernel is a launcher, never
    this. Worked out per def on demand, from the text first: a def is only
    walked where its lines have such a call or name such a def."""

    def __init__(self, lines: list[str], defs: list[ast.AST]):
        self.defs = defs
        self.lines = lines
        self._hits: list[int] | None = None  # lines with a DMA or semaphore call, when needed
        self._memo: dict[int, bool] = {}
        self._by_name: dict[str, list[tuple[int, ast.AST]]] | None = None  # name -> defs
        self._depth = 0  # is_kernel calls under way (a chain of helpers nests them)
        self._launchers: set[str] | None = None

    @property
    def hits(self) -> list[int]:
        if self._hits is None:
            text = "\n".join(self.lines)
            found: set[int] = set()
            for needle in ("copy(", "semaphore_"):  # str.find: no Python loop over lines
                at = text.find(needle)
                while at >= 0:
                    found.add(text.count("\n", 0, at))
                    at = text.find(needle, at + 1)
            self._hits = sorted(found)
        return self._hits

    def is_kernel(self, node: ast.AST) -> bool:
        if not self.hits:
            return False
        key = id(node)
        if key in self._memo:
            return self._memo[key]
        if self._depth >= _MAX_NESTING:
            return False  # not known to be kernel code: not run as such (no finding lost wrongly)
        self._memo[key] = False  # while deciding (a def that calls itself)
        first, last = node.lineno - 1, getattr(node, "end_lineno", node.lineno) - 1
        self._depth += 1
        try:
            found = any_between(self.hits, first, last) and _calls(node, _REF_POSITIONS.keys())
            if found and _calls(node, self.launchers):
                # A test that builds its kernel and launches it through a helper
                # (`self.copy_with(body, x)`) is a launcher, like one that launches.
                found = False
            if not found:
                names = self._kernel_names_in(node, first, last)
                found = bool(names) and _calls(node, names)
        finally:
            self._depth -= 1
        self._memo[key] = found
        return found

    @property
    def launchers(self) -> set[str]:
        """Names of the file's defs that launch a kernel themselves."""
        if self._launchers is None:
            text = "\n".join(self.lines)
            if text.isascii() and not any(w in text for w in _LAUNCH_WORDS):
                self._launchers = set()  # (a call's name is one of its identifiers, spelt out)
        if self._launchers is None:
            self._launchers = {d.name for d in self.defs
                               if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))
                               and any(_launches(n) for stmt in d.body
                                       for n in syntax.walk(stmt))}
        return self._launchers

    def _kernel_names_in(self, node: ast.AST, first: int, last: int) -> set[str]:
        """Names of the file's kernel-code defs (outside `node`) that `node`
        calls, by its text: `name(`."""
        text = "\n".join(self.lines[first:last + 1])
        if self._by_name is None:
            self._by_name = {}
            for i, d in enumerate(self.defs):
                self._by_name.setdefault(d.name, []).append((i, d))
        # The defs whose `name(` is in the text: each word before a `(` and
        # its tails (`xname(` holds `name(`), looked up by name. Scanning every
        # def of the file per def was quadratic in a file of many helpers.
        by_name = self._by_name
        named = [d for word in _CALLED.findall(text) for k in range(len(word))
                 for d in by_name.get(word[k:], ())]
        out: set[str] = set()
        for _, d in sorted(set(named), key=lambda x: x[0]):  # in the file's order, as before
            if d.name not in out and not (first <= d.lineno - 1 <= last) and self.is_kernel(d):
                out.add(d.name)
        return out


_CALLED = re.compile(r"(\w+)\(")
_MAX_NESTING = 1_000  # defs calling defs, followed to decide which are kernel code


# The call names `_launches` looks for (non-ASCII identifiers aside, which
# Python normalises): a file without them has no launcher.
_LAUNCH_WORDS = ("pallas_call", "core_map", "kernel")


def _launches(node: ast.AST) -> bool:
    """A launch: `pallas_call(...)`, `core_map(...)`, or a `kernel(...)` given
    a launch's configuration (a plain `kernel(refs...)` calls a kernel)."""
    if not isinstance(node, ast.Call):
        return False
    tail = _tail(node.func)
    return tail in ("pallas_call", "core_map") or (tail == "kernel" and any(
        k.arg in ("out_shape", "out_type", "mesh", "scratch_shapes", "scratch_types")
        for k in node.keywords))


# Keywords only a Pallas launcher takes: a call given one configures a launch
# whatever its callee is named (`test_kernel(out_shape=..., mesh=...)`, an
# imported launcher under another name).
# (`mesh=` and `out_specs=` are shard_map's too: not taken.)
_LAUNCH_ONLY_KEYWORDS = frozenset({"out_shape", "out_type", "grid_spec", "scratch_shapes",
                                   "scratch_types"})


def _configures_launch(call: ast.Call) -> bool:
    return any(k.arg in _LAUNCH_ONLY_KEYWORDS for k in call.keywords)


def _calls(func: ast.AST, names) -> bool:
    """Does `func` call one of `names` (by its last dotted part), and launch
    no kernel? Its own decorators are not its code (`@self.kernel(...)` makes
    it a kernel, it does not launch one)."""
    hit = False
    body = func.body if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else [func]
    for node in (n for stmt in body for n in syntax.walk(stmt)):
        if isinstance(node, ast.Call):
            tail = _tail(node.func)
            if tail in _LAUNCHES or _configures_launch(node):
                return False
            hit = hit or tail in names
    return hit


def ref_params(func: ast.AST, defs: dict[str, ast.AST] | None = None,
               _seen: frozenset = frozenset()) -> list[str]:
    """The parameters of `func` (a method's `self` or `cls` aside) used or
    named as Refs; with `defs` (the file's functions by name), also those
    handed on to a parameter a helper uses so (`_copy(hbm, buf, sems, l)`
    where `_copy` makes the DMA)."""
    a = getattr(func, "args", None)
    if a is None:
        return []
    params = [p.arg for p in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    refs, arrays = _ref_uses(func, _name_of, defs, _seen)
    return [p for p in params if (p in refs or named_as_ref(p)) and p not in arrays]


def ref_attrs(func: ast.AST) -> list[str]:
    """The attributes of a method's `self` it uses as Refs, the way
    `ref_params` reads parameters (`self.sems.at[slot]`, `self.buf` handed
    to a DMA): state a pipeline object keeps on its instance."""
    a = getattr(func, "args", None)
    params = [p.arg for p in list(a.posonlyargs) + list(a.args)] if a is not None else []
    if not params or params[0] != "self":
        return []
    refs, arrays = _ref_uses(func, _attr_of_self)
    return sorted(refs - arrays)


def free_refs(func: ast.AST, unbound: frozenset) -> list[str]:
    """Names of `unbound` (the module never binds them: a docs page's
    placeholders for a kernel's parameters, `hbm_ref.at[i]` in a fence) that
    `func` reads as globals and uses as Refs, the way `ref_params` reads
    parameters."""
    local = _bound_in(func, module=False)
    free = unbound - local
    refs, arrays = _ref_uses(func, lambda n: n.id if isinstance(n, ast.Name)
                             and n.id in free else None)
    return sorted(refs - arrays)


def unbound_names(tree: ast.AST) -> frozenset:
    """Names the file reads that its module never binds (no module-level
    assignment, def, class, import or `global`); none with a star import,
    which may bind any name. In a function they are globals that do not
    exist: on a docs page, a kernel's parameters a fragment leaves out."""
    read: set[str] = set()
    declared: set[str] = set()  # `global x` in any function binds a module name
    for n in syntax.walk(tree):
        cls = n.__class__
        if cls is ast.Name and isinstance(n.ctx, ast.Load):
            read.add(n.id)
        elif cls is ast.Global:
            declared.update(n.names)
        elif cls is ast.ImportFrom and any(a.name == "*" for a in n.names):
            return frozenset()
    return frozenset(read - declared - _bound_in(tree, module=True) - _BUILTINS)


def _bound_in(root: ast.AST, module: bool) -> set[str]:
    """Names bound in `root`: with `module`, at the module's level only (a
    def's or class's name, not what its body binds); else everywhere
    inside, its parameters and nested scopes' too."""
    bound: set[str] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        cls = n.__class__
        if cls is ast.Name:
            if not isinstance(n.ctx, ast.Load):
                bound.add(n.id)
            continue
        if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) and n is not root:
            bound.add(n.name)
            if module:
                continue
        elif cls is ast.Lambda and module:
            continue
        elif cls is ast.arg:
            bound.add(n.arg)
        elif cls in (ast.Import, ast.ImportFrom):
            bound.update(a.asname or a.name.split(".")[0] for a in n.names)
        elif cls in (ast.Global, ast.Nonlocal):
            bound.update(n.names)
        elif cls in _NAMING and getattr(n, "name", None):
            bound.add(n.name)
        elif cls is ast.MatchMapping and n.rest:
            bound.add(n.rest)
        stack.extend(ast.iter_child_nodes(n))
    return bound


_NAMING = (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
_BUILTINS = frozenset(dir(__import__("builtins")))


def _name_of(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _attr_of_self(node) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self":
        return node.attr
    return None


def _ref_uses(func: ast.AST, key, defs=None, seen=frozenset()) -> tuple[set, set]:
    """(what `func` uses as Refs, what it updates as arrays), each thing
    named by `key(expression)`: handed to a DMA or semaphore call, `x.at[i]`,
    `x[...] = v` (arrays are immutable in kernel code); `x.at[i].set(v)` is
    an array's functional update. With `defs`, names handed to a helper of
    the file that uses its parameter so count too."""
    refs: set[str] = set()
    arrays: set[str] = set()

    def add(node) -> None:
        k = key(node)
        if k is not None:
            refs.add(k)

    for node in syntax.walk(func):
        if isinstance(node, ast.Call):
            positions = _REF_POSITIONS.get(_tail(node.func))
            if positions is None:
                callee = defs.get(node.func.id) if defs and isinstance(node.func, ast.Name) \
                    else None
                if callee is not None and id(callee) not in seen and len(seen) < 8:
                    refs.update(_handed_to_refs(node, callee, defs, seen | {id(func)}))
                continue
            for i in positions:
                if i < len(node.args):
                    add(node.args[i])
            for k in node.keywords:
                if k.arg in _REF_KEYWORDS:
                    add(k.value)
        elif isinstance(node, ast.Subscript):
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "at":
                add(v.value)
            elif isinstance(node.ctx, ast.Store):
                add(v)
        elif isinstance(node, ast.Attribute) and node.attr in _ARRAY_UPDATES \
                and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Attribute) \
                and node.value.value.attr == "at":
            k = key(node.value.value.value)
            if k is not None:
                arrays.add(k)
    return refs, arrays


def _handed_to_refs(call: ast.Call, callee: ast.AST, defs, seen) -> set[str]:
    """Names handed as plain positional arguments of `call` to parameters
    `callee` uses as Refs."""
    a = callee.args
    if a.vararg is not None or any(isinstance(x, ast.Starred) for x in call.args):
        return set()
    names = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    used = set(ref_params(callee, defs, seen))
    return {x.id for x, p in zip(call.args, names) if isinstance(x, ast.Name) and p in used}
