"""The engine's record classes: `frozen` (immutable values, spans,
findings), `record` (mutable events and frames), and `replace`.

They behave like `dataclass(frozen=True)` and `dataclass` classes (fields
from annotations, defaults, `dataclasses.field(compare=False, repr=False,
default_factory=...)`, `__post_init__`, equality over the compared fields,
hashing for frozen ones, `order=True`, assignment refused with
`FrozenInstanceError`) and are made differently, for speed:

- `dataclass` spent half of the command line's start-up (about 60 ms)
  generating and compiling five or six methods for each of ~80 classes;
  here only `__init__` is generated, the other methods are closures over
  an `operator.attrgetter`, which compares and hashes in C;
- a frozen dataclass's `__init__` sets each field through
  `object.__setattr__`; this one writes the instance's dict directly,
  about twice as fast (values are made by the hundred thousand per
  analysis).
"""
from __future__ import annotations

import dataclasses
import operator
from operator import attrgetter
from typing import dataclass_transform

FrozenInstanceError = dataclasses.FrozenInstanceError
_MISSING = dataclasses.MISSING
_FACTORY = object()  # "not given" for a field whose default is made by a factory


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls=None, /, *, eq: bool = True, order: bool = False):
    """`@frozen`, `@frozen(order=True)`, `@frozen(eq=False)` (the base
    class's equality kept, as `dataclass(eq=False)` does)."""
    def wrap(c):
        return _make(c, eq, order, True)
    return wrap if cls is None else wrap(cls)


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(cls):
    """`@record`: a mutable record (`@dataclass`): equal field by field,
    so not hashable."""
    return _make(cls, True, False, False)


def replace(obj, /, **changes):
    """`dataclasses.replace` for records (and, for anything else, that)."""
    names = getattr(obj.__class__, "__record_fields__", None)
    if names is None:
        return dataclasses.replace(obj, **changes)
    own = obj.__dict__
    for name in names:
        if name not in changes:
            changes[name] = own[name]
    return obj.__class__(**changes)


class _Field:
    __slots__ = ("name", "default", "factory", "compare", "repr")

    def __init__(self, name, default, factory, compare, repr):
        self.name, self.default, self.factory = name, default, factory
        self.compare, self.repr = compare, repr


def _make(cls, eq: bool, order: bool, immutable: bool):
    inherited = {f.name: f for f in getattr(cls, "__record_field_specs__", ())}
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, dataclasses.Field):
            if not value.init or value.kw_only is True:
                raise TypeError(f"{cls.__name__}.{name}: init=False and kw_only are not "
                                f"supported")
            spec = _Field(name, value.default, value.default_factory, value.compare, value.repr)
            if value.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        else:
            spec = _Field(name, value, _MISSING, True, True)
        inherited[name] = spec  # a redefined field keeps its place, as in dataclasses
    specs = tuple(inherited.values())
    cls.__record_field_specs__ = specs
    cls.__record_fields__ = tuple(f.name for f in specs)
    body = cls.__dict__
    if "__init__" not in body:
        cls.__init__ = _init(cls, specs, immutable)
    if "__repr__" not in body:
        cls.__repr__ = _repr(tuple(f.name for f in specs if f.repr))
    compared = tuple(f.name for f in specs if f.compare)
    # One name: attrgetter gives the value itself, which compares and hashes
    # as its 1-tuple would.
    key = attrgetter(*compared) if compared else (lambda self: ())
    if eq and "__eq__" not in body:
        cls.__eq__ = _eq(key)
        if "__hash__" not in body:
            cls.__hash__ = (lambda self: hash(key(self))) if immutable else None
    if order:
        for name, op in (("__lt__", "lt"), ("__le__", "le"), ("__gt__", "gt"), ("__ge__", "ge")):
            setattr(cls, name, _compare(key, op))
    if immutable:
        cls.__setattr__ = _refuse_set
        cls.__delattr__ = _refuse_del
    return cls


def _init(cls, specs, immutable: bool):
    env = {f"_d_{f.name}": f.default for f in specs if f.default is not _MISSING}
    env.update({f"_f_{f.name}": f.factory for f in specs if f.factory is not _MISSING})
    env["_FACTORY"] = _FACTORY
    params = "".join(f", {f.name}=_d_{f.name}" if f.default is not _MISSING else
                     f", {f.name}=_FACTORY" if f.factory is not _MISSING else f", {f.name}"
                     for f in specs)
    # Frozen records write the instance dict (their __setattr__ refuses, and
    # object.__setattr__ per field costs more than the whole rest of the
    # call); mutable ones assign as usual, which keeps their attributes
    # where CPython's later writes to them are fastest (measured both ways).
    values = {f.name: f.name if f.factory is _MISSING else
              f"_f_{f.name}() if {f.name} is _FACTORY else {f.name}" for f in specs}
    body = [f"    d[{name!r}] = {value}" if immutable else f"    self.{name} = {value}"
            for name, value in values.items()]
    if immutable and specs:
        body.insert(0, "    d = self.__dict__")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    exec(f"def __init__(self{params}):\n" + ("\n".join(body) or "    pass"), env)
    fn = env["__init__"]
    fn.__qualname__ = f"{cls.__qualname__}.__init__"
    return fn


def _repr(names):
    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _eq(key):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _compare(key, op):
    fn = getattr(operator, op)

    def compare(self, other):
        if other.__class__ is self.__class__:
            return fn(key(self), key(other))
        return NotImplemented
    return compare


def _refuse_set(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_del(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")
