"""Definitions: `def` becomes a `Func` closed over its scope (decorators
applied, Pallas ones run the body), `class` a `ClassVal` (plain classes,
dataclasses, NamedTuples, BufferedRef subclasses, BlockSpec subclasses) or
an enum of constants; `method_value` is attribute access on those classes
(methods, static/class methods, properties)."""
from __future__ import annotations

import ast

from pallas_lsp.engine import buffered, syntax
from pallas_lsp.engine.apis import pytrees
from pallas_lsp.engine.binding import inherited
from pallas_lsp.engine.binding.decorators import Decorator
from pallas_lsp.engine.binding.specs import SpecClass
from pallas_lsp.engine.frames import Frame, Scope
from pallas_lsp.engine.model import Api, Const, Func, Seq, Value
from pallas_lsp.engine.values import UNKNOWN, ClassVal


class DefinitionsMixin:
    """`def` and `class` statements, and methods of the user's classes."""

    def stmt_FunctionDef(self, node: ast.FunctionDef, frame: Frame) -> None:
        captured = self._function_defaults(node.args, frame)
        func: Value = Func(node=node, scope=frame.scope,
                           captured=captured if frame.scope is not self.module_scope else ())
        if frame.scope is not self.module_scope:
            self._closures.setdefault(id(node), func)
        for dec in reversed(node.decorator_list):
            func = self.apply_decorator(dec, func, frame)
        frame.scope.vars[node.name] = func

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def _function_defaults(self, a: ast.arguments, frame: Frame) -> tuple:
        """Defaults taken as Python does, when the def statement runs. One
        that names a def (`def launch(x, body=_kernel)`): a call that leaves
        the parameter out then launches that def as the kernel. Any other
        known value (`def _do(src=src_slice)`) is returned as (param, value)
        pairs, for the Func made here. Only names and attributes are read
        (evaluating them does nothing else)."""
        positional = list(a.posonlyargs) + list(a.args)
        params = positional[len(positional) - len(a.defaults):] if a.defaults else []
        pairs = list(zip(params, a.defaults)) + \
            [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        captured = []
        for p, d in pairs:
            if isinstance(d, (ast.Name, ast.Attribute)):
                v = self.eval(d, frame)
                if isinstance(v, Func):
                    self._func_defaults[id(d)] = v
                elif v is not UNKNOWN and not isinstance(v, Const):
                    captured.append((p.arg, v))
        return tuple(captured)

    def stmt_ClassDef(self, node: ast.ClassDef, frame: Frame) -> None:
        """Plain classes, dataclasses and NamedTuples become ClassVals (kernels
        keep descriptors and Refs in them); anything fancier stays Unknown."""
        bases = [self.eval(b, frame) for b in node.bases]
        if any(isinstance(b, Api) and b.name.split(".")[-1] in _ENUM_BASES for b in bases):
            self._enum_class(node, frame)
            return
        decorators = [self.eval(d.func if isinstance(d, ast.Call) else d, frame)
                      for d in node.decorator_list]
        record = any(_dataclass_maker(d) for d in decorators) \
            or any(_dataclass_base(b) for b in bases)
        namedtuple = any(isinstance(b, Api) and b.name.endswith("NamedTuple") for b in bases)
        parents = [b for b in bases if isinstance(b, ClassVal)]
        if any(isinstance(b, Api) and b.name == "pl.BlockSpec" for b in bases) \
                and all(_harmless_base(b, n) or (isinstance(b, Api) and b.name == "pl.BlockSpec")
                        for b, n in zip(bases, node.bases)) and not decorators:
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef)
                         and s.name == "__init__"), None)
            frame.scope.vars[node.name] = SpecClass(init=init, scope=frame.scope)
            return
        # A pltpu.BufferedRef subclass: its copy/wait overrides are what
        # emit_pipeline calls, on buffers and semaphores jax allocates.
        is_buffered = any(buffered.is_buffered_ref(b) for b in bases) \
            or any(getattr(p, "buffered", False) for p in parents)
        known = [isinstance(b, ClassVal) or _harmless_base(b, n) or buffered.is_buffered_ref(b)
                 or _dataclass_base(b) for b, n in zip(bases, node.bases)]
        plain = all(known)
        decorators = [d for d in decorators if not pytrees.pytree_registration(d)]
        # A base the engine does not know (a library's TestCase, a module of
        # a library) is no reason to lose the class: its own methods and
        # those of its known bases are what `self.x` finds, and anything
        # else is Unknown. Pallas classes (other than those handled above)
        # stay unknown: their behaviour is not modelled.
        # (jax's own test helpers, `jax._src.pallas.pallas_test_util`, are
        # named like Pallas but are test cases.)
        opaque = [b for b, k in zip(bases, known) if not k]
        open_ = bool(opaque) and not namedtuple and not any(
            isinstance(b, Api) and b.name.startswith(("pl.", "pltpu.")) and "test" not in b.name
            for b in opaque)
        # The name of a class with unknown decorators (or a metaclass) is
        # unknown, but its methods still run with an instance of it as `self`.
        hidden = any(not _harmless_metaclass(k) for k in node.keywords) \
            or bool(decorators and not record)
        if not (plain or namedtuple or open_):
            frame.scope.vars[node.name] = UNKNOWN
            return
        methods, fields, kinds, defaults, static, leaves = {}, [], {}, {}, set(), set()
        method_scopes: dict = {}
        attrs: dict = {}
        for parent in reversed(parents):  # the first base wins, as in Python's MRO
            attrs.update(parent.class_attrs)
        for parent in parents:  # single inheritance from classes of this file
            methods.update(parent.methods)
            method_scopes.update({name: parent.method_scopes.get(name, parent.scope)
                                  for name in parent.methods})
            open_ = open_ or parent.open
            kinds.update(parent.kinds)
            defaults.update(parent.defaults)
            static |= parent.static
            leaves |= parent.leaves
            fields.extend(f for f in parent.fields if f not in fields)
            record = record or parent.record
        body_scope = Scope(frame.scope)  # the class body's own names, then the module's
        for stmt in node.body:
            self._class_attribute(stmt, body_scope, attrs, record or namedtuple, frame)
            if isinstance(stmt, ast.FunctionDef):
                attrs.pop(stmt.name, None)
                kind = self._method_kind(stmt, frame)
                method_scopes.pop(stmt.name, None)
                if kind is not None:
                    methods[stmt.name] = stmt
                    kinds[stmt.name] = kind
                else:
                    methods.pop(stmt.name, None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id not in fields:
                fields.append(stmt.target.id)
                if pytrees.array_annotation(stmt.annotation):
                    leaves.add(stmt.target.id)
                # `q_token: Callable | None = None`: a field the call may
                # leave out (then `schedule.q_token is None` decides branches).
                if stmt.value is not None and (record or namedtuple):
                    if pytrees.static_field(stmt.value):
                        static.add(stmt.target.id)
                        continue
                    v = self.eval(stmt.value, frame)
                    if isinstance(v, Const):
                        defaults[stmt.target.id] = v
        for attr in self._written_elsewhere(node.name, frame) if attrs else ():
            if attr in attrs:
                # `Ring.SLOTS = 8` somewhere in the file: which value a read
                # sees depends on the order of calls.
                attrs[attr] = UNKNOWN
        cls = ClassVal(node, frame.scope, methods, tuple(fields), record or namedtuple)
        object.__setattr__(cls, "kinds", kinds)
        object.__setattr__(cls, "defaults", defaults)
        object.__setattr__(cls, "static", frozenset(static))
        object.__setattr__(cls, "leaves", frozenset(leaves - static))
        object.__setattr__(cls, "method_scopes", method_scopes)
        object.__setattr__(cls, "open", open_)
        object.__setattr__(cls, "class_attrs", attrs)
        object.__setattr__(cls, "parents", tuple(parents))
        object.__setattr__(cls, "tuple_like",
                           namedtuple or any(getattr(p, "tuple_like", False) for p in parents))
        if is_buffered:
            object.__setattr__(cls, "buffered", True)
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name in buffered.HOOKS \
                        and kinds.get(stmt.name) == "method":
                    self._buffered_methods[id(stmt)] = cls
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and kinds.get(stmt.name) in ("method", "class") \
                    and id(stmt) not in self._buffered_methods:
                self._method_class[id(stmt)] = cls
        frame.scope.vars[node.name] = UNKNOWN if hidden else cls

    def _written_elsewhere(self, class_name: str, frame: Frame) -> set[str]:
        """Attributes the class's file assigns as `ClassName.attr = ...`."""
        src = frame.mod.src if frame.mod is not None else self.src
        # Kept on the tree: an imported module's parsed source is shared by
        # every analysis that reads it (the command line's project), and a
        # walk of a whole file per analysis was a quarter of their time.
        writes = getattr(src.tree, "_pl_class_writes", None)
        if writes is None:
            writes = {}
            for n in syntax.walk(src.tree):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) \
                        and isinstance(n.value, ast.Name):
                    writes.setdefault(n.value.id, set()).add(n.attr)
            src.tree._pl_class_writes = writes  # type: ignore[attr-defined]
        return writes.get(class_name, set())

    def _class_attribute(self, stmt: ast.stmt, body_scope: Scope, attrs: dict, record: bool,
                         frame: Frame) -> None:
        """A class attribute (`NUM_SLOTS = 2`, `BLOCK = (8, 128)`): what
        `self.NUM_SLOTS` reads until the instance sets its own. A record's
        annotated fields are the instance's, not the class's."""
        if isinstance(stmt, ast.AnnAssign) and (record or stmt.value is None):
            return
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
        if len(targets) == 1 and isinstance(targets[0], ast.Name) \
                and not isinstance(stmt, ast.AugAssign):
            value = self.eval(stmt.value, Frame(body_scope, kernel=False, mod=frame.mod))
            body_scope.vars[targets[0].id] = attrs[targets[0].id] = value
            return
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):  # anything fancier: unknown
                    body_scope.vars[n.id] = attrs[n.id] = UNKNOWN

    def namedtuple_class(self, name: Value, fields: Value, frame: Frame) -> Value:
        """`collections.namedtuple("Bufs", ["src", "dst"])` (also a "src dst"
        string) and `typing.NamedTuple("Bufs", [("src", T), ...])`: a record
        class with those fields; Unknown when the fields are not all known."""
        names: list = []
        if isinstance(fields, Const) and isinstance(fields.value, str):
            names = fields.value.replace(",", " ").split()
        elif isinstance(fields, Seq):
            for item in fields.items:
                if isinstance(item, Seq) and len(item.items) == 2:
                    item = item.items[0]
                if not (isinstance(item, Const) and isinstance(item.value, str)):
                    return UNKNOWN
                names.append(item.value)
        if not names or not (isinstance(name, Const) and isinstance(name.value, str)) \
                or not all(n.isidentifier() for n in names):
            return UNKNOWN
        node = ast.ClassDef(name=name.value, bases=[], keywords=[], body=[], decorator_list=[])
        cls = ClassVal(node, frame.scope, {}, tuple(names), True)
        object.__setattr__(cls, "tuple_like", True)
        object.__setattr__(cls, "class_attrs", {})
        object.__setattr__(cls, "parents", ())
        return cls

    def _enum_class(self, node: ast.ClassDef, frame: Frame) -> None:
        """An Enum: its members are constants (flags like `weight_format ==
        Format.FP4` then decide branches); the rest of the class is opaque."""
        members = {}
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    members[t.id] = Const(value=f"{node.name}.{t.id}")
        frame.scope.vars[node.name] = Seq(items=tuple(members.values()),
                                          keys=tuple(members), origin=f"enum {node.name}")

    def _method_kind(self, stmt: ast.FunctionDef, frame: Frame) -> str | None:
        """method | static | class | property; None for decorators that run
        or replace the function (Pallas decorators, property setters)."""
        kind = "method"
        for dec in stmt.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "staticmethod":
                kind = "static"
            elif name == "classmethod":
                kind = "class"
            elif name in ("property", "cached_property"):
                kind = "property"
            elif name in ("setter", "deleter", "overload", "abstractmethod"):
                return None
            elif isinstance(self.eval(dec, frame), Decorator):
                return None
            # Anything else (jax.named_scope, functools.cache, jax.jit, ...)
            # leaves a function that behaves like the method when called.
        return kind

    def method_value(self, cls: ClassVal, name: str, obj: Value | None) -> Value | None:
        """`obj.name` / `Class.name` for a method of one of the file's classes."""
        node = cls.methods.get(name)
        if node is None:
            attrs = getattr(cls, "class_attrs", {})
            if name in attrs:
                # A function stored on the class is a method when read
                # through an instance; a partial of one is not: which of
                # the two a Func stands for is not known here.
                return UNKNOWN if obj is not None and isinstance(attrs[name], Func) \
                    else attrs[name]
            if obj is not None and cls.open:
                return inherited.launcher(name)
            return None
        kind = cls.kinds.get(name, "method")
        scope = cls.method_scopes.get(name, cls.scope)  # an inherited method: its module's
        if kind == "static":
            return Func(node=node, scope=scope)
        if kind == "class":
            return Func(node=node, scope=scope, bound_args=(cls,))
        if obj is None:
            return Func(node=node, scope=scope)
        if kind == "property":
            return self.call_func(Func(node=node, scope=scope, bound_args=(obj,)), [], {},
                                  self._property_frame)
        return Func(node=node, scope=scope, bound_args=(obj,))


def _harmless_metaclass(keyword: ast.keyword) -> bool:
    """`metaclass=abc.ABCMeta`: construction and attributes as without it."""
    v = keyword.value
    name = v.attr if isinstance(v, ast.Attribute) else getattr(v, "id", "")
    return keyword.arg == "metaclass" and name == "ABCMeta"


def _dataclass_maker(value: Value) -> bool:
    """Decorators that make a dataclass: fields from the annotations, in order."""
    return isinstance(value, Api) and value.name in _DATACLASS_MAKERS


def _dataclass_base(value: Value) -> bool:
    """Bases whose subclasses are dataclasses (`flax.struct.PyTreeNode`)."""
    return isinstance(value, Api) and value.name in _DATACLASS_BASES


# `@dataclass`, flax's and chex's pytree dataclasses (the same constructor).
_DATACLASS_MAKERS = {"dataclasses.dataclass", "dataclass", "flax.struct.dataclass",
                     "struct.dataclass", "chex.dataclass", "chex.mappable_dataclass"}
_DATACLASS_BASES = {"flax.struct.PyTreeNode", "struct.PyTreeNode"}


def _harmless_base(value: Value, node: ast.expr) -> bool:
    """Bases that add no behaviour the engine would miss."""
    if isinstance(node, ast.Name) and node.id == "object":
        return True
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        node = node.value
    name = value.name if isinstance(value, Api) else getattr(node, "id", getattr(node, "attr", ""))
    return name.split(".")[-1] in ("ABC", "Generic", "Protocol")


_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}
