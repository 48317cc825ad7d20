"""Python semantics the interpreter shares: builtins on abstract values
(zip, len, range, isinstance...), constant folding, truth values, `match`
patterns, list stores, and hashable keys for memoising calls."""
from __future__ import annotations

import ast

from pallas_lsp.engine import syntax
from pallas_lsp.engine.model import Api, Array, Const, Descriptor, Ref, Seq, Value
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.values import (UNKNOWN, Alloc, ClassVal, Given, Instance, Iter, Partial,
                                      SeqOf, ShapeDtype, Spec, StarUnknown, TextPrefix, join_all,
                                      VARARGS, tuple_items)
from pallas_lsp.engine.model import Func


def has_star(values) -> bool:
    return any(isinstance(v, StarUnknown) for v in values)


@frozen
class Zip(Value):
    seqs: tuple = ()


@frozen
class Enumerate(Value):
    seq: Value = UNKNOWN


def _builtin_zip(args):
    return Zip(seqs=tuple(a.value for a in args))


def _builtin_enumerate(args):
    return Enumerate(seq=args[0].value) if args else UNKNOWN


def _builtin_len(args):
    v = args[0].value if args else None
    v = tuple_items(v) or v  # a NamedTuple instance is a tuple of its fields
    if isinstance(v, Seq):
        return Const(value=len(v.items))
    return UNKNOWN


def _builtin_tuple(args):
    if args and isinstance(args[0].value, Seq):
        return Seq(items=args[0].value.items)
    if args and isinstance(args[0].value, (Partial, SeqOf)):
        return args[0].value
    if args and isinstance(args[0].value, Iter):
        return join_all(args[0].value.rests())
    return UNKNOWN


def concat_partial(a: Value, b: Value) -> Value:
    """`xs + ys` (or `[*xs, *ys]`) where one side's length is unknown (a
    Partial, or a SeqOf: nothing known but its items' kind): the front of
    the left and the back of the right are still known."""
    def parts(v):
        if isinstance(v, Seq) and v.keys is None:
            return v.items, v.items, True
        if isinstance(v, Partial):
            return v.head, v.tail, False
        if isinstance(v, SeqOf):
            return (), (), False
        return None
    pa, pb = parts(a), parts(b)
    if pa is None or pb is None:
        return UNKNOWN
    if isinstance(b, Seq) and not b.items and isinstance(a, (Partial, SeqOf)):
        return a  # `[*xs]`: the list display adds an empty known part
    if isinstance(a, Seq) and not a.items and isinstance(b, (Partial, SeqOf)):
        return b
    head = pa[0] + pb[0] if pa[2] else pa[0]
    tail = pa[1] + pb[1] if pb[2] else pb[1]
    # Items of the unknown part are like its `elem`, not like the known ones.
    elems = list(pa[0]) + list(pa[1]) + list(pb[0]) + list(pb[1]) \
        + [v.elem for v in (a, b) if isinstance(v, (Partial, SeqOf))]
    # `[buf, *[sem] * n]`: every item after the known front is like the
    # right side's items.
    rest = middle = UNKNOWN
    if pa[2] and len(head) <= MAX_SEQ:
        rest = b.elem if isinstance(b, SeqOf) else b.rest if isinstance(b, Partial) else UNKNOWN
    elif isinstance(a, Partial) and pb[2] and a.rest is not UNKNOWN and len(pb[1]) <= 64:
        # `xs += [c, d]` after a loop grew `xs` (a Partial whose items after
        # its head are alike): c and d join them; the unknown part between
        # the head and the new tail is still those items.
        rest = join_all([a.rest, *pb[1]])
        middle = a.middle if a.middle is not UNKNOWN else a.rest
    return Partial(head=tuple(head[:MAX_SEQ]), tail=tuple(tail[-MAX_SEQ:]),
                   elem=join_all(elems) if len(elems) <= 64 else UNKNOWN, rest=rest,
                   middle=middle if not isinstance(middle, Partial) else UNKNOWN)


def _builtin_iter(args):
    if args and isinstance(args[0].value, (Seq, Partial, SeqOf)):
        v = args[0].value
        if isinstance(v, Seq) and v.keys is not None:
            return UNKNOWN
        return Iter(rest=v)
    return UNKNOWN


def _builtin_unknown(args):
    return UNKNOWN


# The classes of Refs (`isinstance(x, jax.Ref)`).
REF_CLASSES = frozenset({"jax.ref.Ref", "jax.Ref"})


def _builtin_isinstance(args):
    """`isinstance(out_type, (tuple, list))`: False for a value the engine
    knows is no container (a ShapeDtypeStruct, a Ref, a number); True for a
    list or tuple when both are named. Other classes: unknown."""
    if len(args) != 2 or args[1].node is None:
        return UNKNOWN
    if isinstance(args[1].value, Api) and args[1].value.name in REF_CLASSES:
        v = args[0].value
        if isinstance(v, Ref):
            return Const(value=True)
        if isinstance(v, Array) or isinstance(v, Const) and v.value is not None:
            return Const(value=False)
        return UNKNOWN
    cls = args[1].node
    elts = cls.elts if isinstance(cls, ast.Tuple) else [cls]
    if not elts or not all(isinstance(e, ast.Name) and e.id in ("tuple", "list") for e in elts):
        return UNKNOWN
    names = {e.id for e in elts}
    v = args[0].value
    if isinstance(v, (ShapeDtype, Ref, Array, Alloc, Spec, Descriptor)) or (
            isinstance(v, Const) and isinstance(v.value, (type(None), bool, int, float, str))):
        return Const(value=False)
    if isinstance(v, Seq) and v.keys is None and names == {"tuple", "list"}:
        return Const(value=True)
    return UNKNOWN


@frozen
class Range(Value):
    n: int = 0


def _builtin_range(args):
    if len(args) == 1 and isinstance(args[0].value, Const) and isinstance(args[0].value.value, int):
        return Range(n=args[0].value.value)
    return UNKNOWN


def _builtin_const(fn):
    """int / bool / float / abs / max / min on known numbers (`int(has_bias)`
    counts operands); anything else unknown."""
    def apply(args):
        values = [a.value for a in args]
        if not values or not all(isinstance(v, Const) and isinstance(v.value, (bool, int, float))
                                 for v in values):
            return UNKNOWN
        try:
            out = fn(*(v.value for v in values))
        except (TypeError, ValueError, OverflowError):
            return UNKNOWN
        return Const(value=out)
    return apply


MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort"}


BUILTINS = {"zip": _builtin_zip, "enumerate": _builtin_enumerate, "len": _builtin_len,
             "tuple": _builtin_tuple, "list": _builtin_tuple, "range": _builtin_range,
             "iter": _builtin_iter,
             "isinstance": _builtin_isinstance, "print": _builtin_unknown,
             "int": _builtin_const(int), "bool": _builtin_const(bool),
             "float": _builtin_const(float), "abs": _builtin_const(abs),
             "max": _builtin_const(max), "min": _builtin_const(min)}


def truthiness(v: Value) -> bool | None:
    if isinstance(v, Const):
        try:
            return bool(v.value)
        except Exception:
            return None
    if isinstance(v, Seq) and v.origin == VARARGS:
        # A call's `*args`, a tuple: never mutated. (A list may be: the engine
        # does not follow every alias a nested function appends through.)
        return bool(v.items)
    return None


def stored(base: Value, index: Value, value: Value) -> Value:
    """`base[index] = value` for a list or dict the engine holds."""
    key = index.value if isinstance(index, Const) and isinstance(index.value, SIMPLE) else None
    if isinstance(base, Seq) and key is not None:
        if base.keys is not None:
            if key in base.keys:
                i = base.keys.index(key)
                return Seq(items=base.items[:i] + (value,) + base.items[i + 1:], keys=base.keys)
            return Seq(items=base.items + (value,), keys=base.keys + (key,))
        if type(key) is int and -len(base.items) <= key < len(base.items):
            i = key % len(base.items)
            return Seq(items=base.items[:i] + (value,) + base.items[i + 1:])
    # An unknown key: the items are all like the ones seen, and this one.
    old = [base.elem] if isinstance(base, SeqOf) else list(base.items)
    return SeqOf(elem=join_all(old + [value]))


def pattern_matches(pattern: ast.pattern, subject: Value) -> bool | None:
    """Does a `case` pattern match? None when the engine cannot tell."""
    if isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
        return True  # `case _` / `case name`
    known = isinstance(subject, Const) and isinstance(subject.value, SIMPLE)
    if isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Constant):
        if not known:
            return None
        return type(subject.value) is type(pattern.value.value) \
            and subject.value == pattern.value.value
    if isinstance(pattern, ast.MatchSingleton):
        return subject.value is pattern.value if known else None
    if isinstance(pattern, ast.MatchOr):
        results = [pattern_matches(p, subject) for p in pattern.patterns]
        return True if True in results else False if all(r is False for r in results) else None
    return None


def pattern_names(pattern: ast.pattern) -> list[str]:
    return [n.name for n in syntax.walk(pattern)
            if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name] + \
        [n.rest for n in syntax.walk(pattern) if isinstance(n, ast.MatchMapping) and n.rest]


# Builtin types a test may pass as a parameter (`product(structure=[tuple, dict])`)
# and compare by identity (`if structure is dict:`).
BUILTIN_TYPES = {"tuple": tuple, "dict": dict, "list": list, "set": set, "frozenset": frozenset,
                 "int": int, "float": float, "str": str, "bool": bool, "bytes": bytes}


def builtin_type(node: ast.AST, bound) -> type | None:
    """The builtin type a bare name means, when nothing of the user's binds
    that name (`bound(name)`: a binding of it, or None)."""
    if isinstance(node, ast.Name) and node.id in BUILTIN_TYPES and bound(node.id) is None:
        return BUILTIN_TYPES[node.id]
    return None


def is_none(v: Value) -> bool | None:
    if isinstance(v, Const):
        return v.value is None
    if getattr(v, "nullable", False):
        return None
    if isinstance(v, (Ref, Array, Descriptor, Seq, Func, Instance, ClassVal, Given)):
        return False
    return None


MAX_INT_BITS = 256  # constant folding beyond this is not shape arithmetic: Unknown


MAX_SEQ = 4096  # longest list/tuple the engine keeps item by item


SIMPLE = (int, float, str, bool, type(None))


def const_compare(a, b, op) -> Value:
    """Fold comparisons of plain constants (ints, strings, enum members)."""
    if not (isinstance(a, SIMPLE) and isinstance(b, SIMPLE)):
        return UNKNOWN
    try:
        if isinstance(op, (ast.Eq, ast.Is)):
            return Const(value=a == b)
        if isinstance(op, (ast.NotEq, ast.IsNot)):
            return Const(value=a != b)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if isinstance(op, ast.Lt):
                return Const(value=a < b)
            if isinstance(op, ast.LtE):
                return Const(value=a <= b)
            if isinstance(op, ast.Gt):
                return Const(value=a > b)
            if isinstance(op, ast.GtE):
                return Const(value=a >= b)
    except TypeError:
        return UNKNOWN
    return UNKNOWN


_SIMPLE = (str, int, float)
_CONVERSIONS = {ord("s"): str, ord("r"): repr, ord("a"): ascii}


def format_string(parts: list) -> Value:
    """An f-string whose parts are all known: `f"sem_{i}"` with `i` a
    number is the text `"sem_3"` (dict keys of scratch are built so); with
    `i` unknown, a text that starts with `"sem_"`.
    `parts`: texts, or (value, conversion, spec) per formatted field."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value, conversion, spec = part
        if not (isinstance(value, Const) and type(value.value) in _SIMPLE):
            return TextPrefix(prefix="".join(out)) if out else UNKNOWN
        v = value.value
        if conversion in _CONVERSIONS:
            v = _CONVERSIONS[conversion](v)
        try:
            out.append(format(v, spec))
        except (ValueError, TypeError):
            return UNKNOWN
    return Const(value="".join(out))


def const_binop(a, b, op) -> Value:
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return UNKNOWN
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        return UNKNOWN  # e.g. repeated squaring: the product would take forever
    try:
        if isinstance(op, ast.Add):
            return Const(value=a + b)
        if isinstance(op, ast.Sub):
            return Const(value=a - b)
        if isinstance(op, ast.Mult):
            return Const(value=a * b)
        if isinstance(op, ast.FloorDiv):
            return Const(value=a // b)
        if isinstance(op, ast.Mod):
            return Const(value=a % b)
    except (ZeroDivisionError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def wrong_arity(node, args: list, kwargs: dict) -> bool:
    """Too many positional arguments, or a keyword the function does not take."""
    a = node.args
    positional = list(a.posonlyargs) + list(a.args)
    if a.vararg is None and not has_star(args) and len(args) > len(positional):
        return True
    if a.kwarg is None and kwargs:
        names = {p.arg for p in a.args} | {p.arg for p in a.kwonlyargs}
        if any(k not in names for k in kwargs):
            return True
    return False


def args_key(args: list, kwargs: dict) -> tuple:
    """Arguments as a hashable key; instances are mutable, so their write
    counts are part of it."""
    versions = tuple(v.version for v in list(args) + list(kwargs.values())
                     if isinstance(v, Instance))
    return hashable(args), hashable(sorted(kwargs.items())), versions


def hashable(obj):
    """A hashable stand-in for argument values (for memoising calls)."""
    if obj.__class__ is list:  # never hashable: skip the raise and catch
        return tuple([hashable(o) for o in obj])
    try:
        hash(obj)
        return obj
    except TypeError:
        if isinstance(obj, (list, tuple)):
            return tuple(hashable(o) for o in obj)
        return id(obj)
