"""Engine-internal values (specs, allocations, views in the making) and the
join used where control flow merges."""
from __future__ import annotations

from dataclasses import field

from pallas_lsp.engine.model import (Api, Array, Const, Descriptor, Func, Ref, SemKind, Seq, Shape,
                                     Space, Unknown, Value)
from pallas_lsp.engine.records import frozen, replace

UNKNOWN = Unknown()


@frozen
class Given(Value):
    """An optional argument that was passed (`bias=None` given an array): not
    None, otherwise as unknown as Unknown. Launcher variants use it."""

    def describe(self) -> str:
        return "a value (not None)"


GIVEN = Given(origin="an optional argument, given")


@frozen
class Spec(Value):
    """pl.BlockSpec(...): memory space and block shape (None dims squeezed)."""

    space: Space | None = None  # None: not given (default VMEM block)
    block_shape: Shape | None = None
    # the block as VMEM holds it: a squeezed dim kept as 1 (it is a row of the tile)
    vmem_shape: Shape | None = None
    nullable: bool = False  # `spec if x is not None else None`
    decl: object = field(default=None, compare=False, repr=False)  # the BlockSpec(...) call
    buffers: int | None = None  # `pipeline_mode=pl.Buffered(n)` with n known (also from a caller)

    def describe(self) -> str:
        return "BlockSpec"


@frozen
class Pipelining(Value):
    """`pl.Buffered(n)`: the buffer count a BlockSpec's pipeline_mode asks for."""

    buffers: int | None = None


@frozen
class Alloc(Value):
    """pltpu.VMEM(shape, dtype), pltpu.SemaphoreType.DMA((2,)), ...: what
    scratch_shapes / run_scoped turn into a Ref."""

    space: Space = Space.UNKNOWN
    shape: Shape | None = None
    dtype: str | None = None
    sem: SemKind | None = None
    nullable: bool = False  # `None if c else pltpu.VMEM(...)`
    decl: object = field(default=None, compare=False, repr=False)  # the allocating call

    def to_ref(self, origin: str, decl: object = None) -> Ref:
        return Ref(origin=origin, space=self.space, shape=self.shape, dtype=self.dtype,
                   sem=self.sem, nullable=self.nullable, decl=self.decl or decl)

    def describe(self) -> str:
        return "allocation"


@frozen
class RefTree(Value):
    """Refs in a pytree whose structure the engine does not know: what
    `jax.tree.map(f, x)` gives over an unknown `x` where `f` makes a Ref of
    any leaf. Handed to a DMA whole, it is Refs; none of its items or windows
    is known (indexing it is no load)."""

    space: Space = Space.UNKNOWN

    def describe(self) -> str:
        where = "" if self.space == Space.UNKNOWN else f" {self.space.value}"
        return f"pytree of{where} Refs"


@frozen
class AllocTree(Value):
    """Allocations in a pytree whose structure is unknown
    (`jax.tree.map(pltpu.SMEM.like, x)` over an unknown `x`): scratch or a
    `run_scoped` makes a RefTree of it."""

    space: Space = Space.UNKNOWN

    def describe(self) -> str:
        return "pytree of allocations"


@frozen
class ShapeDtype(Value):
    """jax.ShapeDtypeStruct(shape, dtype)."""

    shape: Shape | None = None
    dtype: str | None = None
    decl: object = field(default=None, compare=False, repr=False)


@frozen
class SliceVal(Value):
    """pl.ds(start, size) / slice: `size` (and `start`) when constant."""

    size: int | None = None
    start: int | None = None
    py_slice: bool = False  # `a:b`: JAX clamps it to the dimension as Python does


@frozen
class AtProxy(Value):
    """`ref.at`, waiting for its index."""

    ref: Ref = Ref()


@frozen
class TreeDef(Value):
    """The treedef `jax.tree.flatten(tree)` returns: `tree` itself, whose
    structure `.unflatten(leaves)` rebuilds (apis/pytrees.unflatten)."""

    tree: Value = UNKNOWN


@frozen
class Bound(Value):
    """A method looked up on a value we model (desc.start, ref.bitcast)."""

    obj: Value = UNKNOWN
    name: str = ""


@frozen
class GridSpec(Value):
    """pltpu.PrefetchScalarGridSpec / pl.GridSpec arguments, kept as values."""

    num_scalar_prefetch: int | None = 0
    in_specs: Value = UNKNOWN
    out_specs: Value = UNKNOWN
    scratch_shapes: Value = UNKNOWN
    has_in_specs: bool = False
    has_out_specs: bool = False
    grid: Value = UNKNOWN
    decl: object = field(default=None, compare=False, repr=False)


@frozen
class SeqOf(Value):
    """A list whose length is not known but whose elements are alike, e.g.
    what a helper returns from two branches with lists of different lengths."""

    elem: Value = UNKNOWN

    def describe(self) -> str:
        return f"[{self.elem.describe()}, …]"


@frozen
class Partial(Value):
    """A list whose length is not known but whose first and/or last items
    are: what a list becomes when flags decide how many items it has
    (`refs.pop(0) if rotary else ...`), or `*refs` bound from the front and
    the back. `elem` joins every item seen (for loops over it)."""

    head: tuple = ()
    tail: tuple = ()
    elem: Value = UNKNOWN
    # What each item after the head is, when they all agree (`scratch.append(sem_array)`
    # under a flag: the optional items a `*refs` kernel receives).
    rest: Value = UNKNOWN
    # What each item between the head and the tail is, when known (`*refs`
    # of a `*refs` kernel: inputs, each a Ref, before the outputs and scratch).
    middle: Value = UNKNOWN
    # The head and the tail are different items, the unknown part between
    # them (`*refs` bound from a call's arguments around a `*rest`).
    disjoint: bool = False

    def describe(self) -> str:
        return f"[{', '.join(v.describe() for v in self.head[:3])}, …]"

    def drop_first(self) -> "Partial":
        if self.disjoint and self.head:
            return Partial(head=self.head[1:], tail=self.tail, elem=self.elem,
                           middle=self.middle, disjoint=True)
        # The list may have been exactly `tail` long: dropping its first item
        # may consume tail[0], so only tail[1:] stays certain.
        return Partial(head=self.head[1:], tail=self.tail[1:], elem=self.elem,
                       middle=self.middle if self.head else UNKNOWN)


@frozen
class Iter(Value):
    """`iter(xs)`: what is left to read. `next(it)` rebinds the name.

    `others` are further possible rests: after `a = next(it) if flag else
    None` with an undecided flag the iterator is at one of two places, and
    the next read is one of two items (joined), not Unknown."""

    rest: Value = UNKNOWN
    others: tuple = ()

    def rests(self) -> tuple:
        return (self.rest,) + self.others


MAX_ITER_PLACES = 16  # places an iterator may be at before it is just Unknown


def iter_of(rests) -> "Iter":
    """An iterator at any of `rests` (duplicates dropped)."""
    try:
        rests = tuple(dict.fromkeys(rests))
    except TypeError:  # a value that cannot be hashed: compare instead
        unique: list = []
        for r in rests:
            if not any(r is u or r == u for u in unique):
                unique.append(r)
        rests = tuple(unique)
    if len(rests) > MAX_ITER_PLACES:
        return Iter(rest=UNKNOWN)
    return Iter(rest=rests[0], others=rests[1:])


@frozen
class Choice(Value):
    """One of a few functions (`kernel = a if flag else b`): a pallas_call
    given it analyses each. `nullable`: or None (an optional callback,
    `hook if flag else None`), which only a call that cannot happen would
    receive."""

    options: tuple = ()
    nullable: bool = False

    def describe(self) -> str:
        return " | ".join([o.describe() for o in self.options] + ["None"] * self.nullable)


@frozen
class Imported(Value):
    """A name bound by `from m import name` to the user's module `path`;
    read lazily (the module is loaded the first time the name is used)."""

    path: str = ""
    name: str = ""

    def describe(self) -> str:
        return f"imported {self.name}"


@frozen
class ModuleRef(Value):
    """One of the user's modules (`import pkg.mod as m`, `from pkg import mod`)."""

    path: str = ""

    def describe(self) -> str:
        return f"module {self.path}"


@frozen
class OperandDecl:
    """Where a kernel parameter bound to a launch operand comes from: the
    `index`-th argument of the call of the `launch` (pallas_call) node, once
    that call is seen (the kernel is often bound before it); `fallback`
    otherwise."""

    launch: object = None
    index: int = 0
    fallback: object = None


_DECLARED = (Spec, Alloc, ShapeDtype, GridSpec, Descriptor, Ref)


def declared(value: Value, node) -> Value:
    """`value` remembering the call that made it (specs, allocations,
    descriptors: what "go to the spec" jumps to)."""
    if isinstance(value, _DECLARED) and value.decl is None and node is not None:
        # A copy with one field changed (`decl` is not part of the identity
        # and nothing derives from it): `dataclasses.replace` costs 10x more.
        out = object.__new__(type(value))
        out.__dict__.update(value.__dict__)
        object.__setattr__(out, "decl", node)
        return out
    return value


def _same_decl(a: Value, b: Value):
    return a.decl if a.decl is b.decl or a.decl == b.decl else None


MAX_CHOICES = 4
_NULLABLE = (Ref, Spec, Alloc)


def join(a: Value, b: Value) -> Value:
    """Least upper bound of two values: what a name holds after an if/else
    or a loop. Keeps what both sides agree on, forgets the rest."""
    if a is b or a == b:
        return a
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return UNKNOWN  # no branch below takes one
    if isinstance(a, (Func, Choice)) and isinstance(b, (Func, Choice)):
        options = tuple(dict.fromkeys(_options(a) + _options(b)))
        nullable = getattr(a, "nullable", False) or getattr(b, "nullable", False)
        return Choice(options=options, nullable=nullable) if len(options) <= MAX_CHOICES \
            else UNKNOWN
    # A choice between Pallas APIs (`mem = pltpu.SMEM if c else pltpu.VMEM`):
    # called, each is called and the results joined.
    if isinstance(a, (Api, Choice)) and isinstance(b, (Api, Choice)) \
            and all(isinstance(o, Api) for o in _options(a) + _options(b)):
        options = tuple(dict.fromkeys(_options(a) + _options(b)))
        return Choice(options=options) if len(options) <= MAX_CHOICES else UNKNOWN
    # An optional callback (`hook if flag else None`): called, it is the function.
    if isinstance(a, Const) and a.value is None and isinstance(b, (Func, Choice)):
        return Choice(options=_options(b), nullable=True)
    if isinstance(b, Const) and b.value is None and isinstance(a, (Func, Choice)):
        return Choice(options=_options(a), nullable=True)
    # A module imported in one branch only (`try: from jax.experimental.pallas
    # import tpu as pltpu / except ImportError: pltpu = None`): where it is
    # used, it is that module.
    if isinstance(a, Const) and a.value is None and isinstance(b, Api):
        return b
    if isinstance(b, Const) and b.value is None and isinstance(a, Api):
        return a
    # `d = None` before a loop that assigns a descriptor: treat as optional.
    if isinstance(a, Const) and a.value is None and isinstance(b, Descriptor):
        return b
    if isinstance(b, Const) and b.value is None and isinstance(a, Descriptor):
        return a
    # An optional operand, spec or allocation: what it is when it is there
    # (using None where a Ref is needed fails anyway), marked as nullable so
    # that `x is None` stays undecided.
    if isinstance(a, Const) and a.value is None and isinstance(b, _NULLABLE):
        return replace(b, nullable=True)
    if isinstance(b, Const) and b.value is None and isinstance(a, _NULLABLE):
        return replace(a, nullable=True)
    if isinstance(a, Descriptor) and isinstance(b, Descriptor):
        remote = a.remote if a.remote == b.remote else None
        return Descriptor(origin=a.origin, remote=remote, call_ids=a.call_ids | b.call_ids,
                          decl=_same_decl(a, b))
    if isinstance(a, RefTree) and isinstance(b, (RefTree, Ref)) \
            or isinstance(b, RefTree) and isinstance(a, Ref):
        return RefTree(space=a.space if a.space == b.space else Space.UNKNOWN)
    if isinstance(a, Ref) and isinstance(b, Ref):
        return Ref(origin=a.origin if a.origin == b.origin else "",
                   space=a.space if a.space == b.space else Space.UNKNOWN,
                   shape=a.shape if a.shape == b.shape else _join_shape(a.shape, b.shape),
                   dtype=a.dtype if a.dtype == b.dtype else None,
                   sem=a.sem if a.sem == b.sem else None,
                   view=a.view or b.view,
                   root=a.root if a.root == b.root else "?",
                   nullable=a.nullable or b.nullable, decl=_same_decl(a, b))
    if isinstance(a, Array) and isinstance(b, Array):
        return Array(origin=a.origin if a.origin == b.origin else "",
                     shape=a.shape if a.shape == b.shape else None,
                     dtype=a.dtype if a.dtype == b.dtype else None,
                     sem=a.sem if a.sem == b.sem else None, decl=_same_decl(a, b))
    if isinstance(a, (Spec, Alloc)) and type(a) is type(b) and replace(a, nullable=False) \
            == replace(b, nullable=False):
        return replace(a, nullable=True)
    if isinstance(a, Alloc) and isinstance(b, Alloc) and a.space == b.space and a.sem == b.sem:
        # `pltpu.VMEM(s1) if c else pltpu.VMEM(s2)`: a buffer there either way.
        return Alloc(space=a.space, shape=a.shape if a.shape == b.shape else
                     _join_shape(a.shape, b.shape), dtype=a.dtype if a.dtype == b.dtype else None,
                     sem=a.sem, nullable=a.nullable or b.nullable, decl=_same_decl(a, b))
    if isinstance(a, Alloc) and isinstance(b, Alloc) and a.sem is None and b.sem is None \
            and Space.SEMAPHORE not in (a.space, b.space):
        # `(pltpu.SMEM if c else pltpu.VMEM)(shape, dtype)`: a buffer either way,
        # in a space the engine cannot tell.
        return Alloc(space=Space.UNKNOWN, shape=a.shape if a.shape == b.shape else
                     _join_shape(a.shape, b.shape), dtype=a.dtype if a.dtype == b.dtype else None,
                     nullable=a.nullable or b.nullable, decl=_same_decl(a, b))
    if isinstance(a, Spec) and isinstance(b, Spec):
        # `SMEM if x.size == 1 else HBM`: a Ref either way, its space unknown.
        return Spec(space=a.space if a.space == b.space else Space.UNKNOWN,
                    block_shape=a.block_shape if a.block_shape == b.block_shape else None,
                    vmem_shape=a.vmem_shape if a.vmem_shape == b.vmem_shape else None,
                    nullable=a.nullable or b.nullable, decl=_same_decl(a, b),
                    buffers=a.buffers if a.buffers == b.buffers else None)
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items) \
            and a.keys == b.keys:
        return Seq(items=tuple(join(x, y) for x, y in zip(a.items, b.items)), keys=a.keys)
    if isinstance(a, Seq) and isinstance(b, Seq) and a.keys is not None and b.keys is not None:
        # A dict with a key set in one branch only (`if flag: opts["bias"] = b`):
        # that entry is its value or None, as a keyword parameter defaulting
        # to None receives it.
        none = Const(value=None)
        da, db = dict(zip(a.keys, a.items)), dict(zip(b.keys, b.items))
        keys = tuple(dict.fromkeys(a.keys + b.keys))
        return Seq(items=tuple(join(da.get(k, none), db.get(k, none)) for k in keys), keys=keys)
    if isinstance(a, Iter) and isinstance(b, Iter):
        return iter_of(a.rests() + b.rests())
    if isinstance(a, Instance) and isinstance(b, Instance) and a.cls is b.cls \
            and getattr(a.cls, "record", False):
        # Two versions of a dataclass / NamedTuple value (`dataclasses.replace`
        # in one branch): field by field.
        out = Instance(a.cls)
        for k in list(a.attrs) + [k for k in b.attrs if k not in a.attrs]:
            out.attrs[k] = join(a.attrs.get(k, UNKNOWN), b.attrs.get(k, UNKNOWN))
        return out
    if _partial_like(a) and _partial_like(b) and not (isinstance(a, SeqOf) and isinstance(b, SeqOf)):
        joined = _join_partial(a, b)
        if joined is not None:
            return joined
    if _listlike(a) and _listlike(b):
        return SeqOf(elem=join_all(_elems(a) + _elems(b)))
    return UNKNOWN


def _partial_like(v: Value) -> bool:
    return (isinstance(v, Seq) and v.keys is None) or isinstance(v, Partial)


def _join_partial(a: Value, b: Value) -> Value | None:
    """Two lists of different lengths: keep the first and last items they
    share (those are certain whichever list it is)."""
    ha, ta = (a.items, a.items) if isinstance(a, Seq) else (a.head, a.tail)
    hb, tb = (b.items, b.items) if isinstance(b, Seq) else (b.head, b.tail)
    head = []
    for x, y in zip(ha, hb):
        if x != y:
            break
        head.append(x)
    tail = []
    for x, y in zip(reversed(ta), reversed(tb)):
        if x != y:
            break
        tail.append(x)
    tail.reverse()
    # (a Partial's unknown part is as its `elem` says, or unknown)
    elems = list(ha) + list(ta) + list(hb) + list(tb) + [v.elem for v in (a, b)
                                                         if isinstance(v, Partial)]
    elem = join_all(elems) if len(elems) <= 64 else UNKNOWN
    if not head and not tail:
        return None
    extra = [x for v, h in ((a, ha), (b, hb)) if isinstance(v, Seq) for x in h[len(head):]]
    extra += [v.rest for v in (a, b) if isinstance(v, Partial)]
    rest = join_all(extra) if extra and len(extra) <= 64 else UNKNOWN
    return Partial(head=tuple(head), tail=tuple(tail),
                   elem=elem if not isinstance(elem, Partial) else UNKNOWN,
                   rest=rest if not isinstance(rest, Partial) else UNKNOWN)


def _options(v: Value) -> tuple:
    return v.options if isinstance(v, Choice) else (v,)


def _listlike(v: Value) -> bool:
    # An empty dict too: `d = {}` then `d[k] = ...` with keys the engine
    # cannot tell is a collection of like values (SeqOf). So is a list grown
    # in a loop of unknown length (`xs += [a, b]`: a Partial) met with the
    # list before the loop, when they share no first or last item.
    return (isinstance(v, Seq) and (v.keys is None or not v.items)) \
        or isinstance(v, SeqOf) or (isinstance(v, Partial) and v.elem is not UNKNOWN)


def _elems(v: Value) -> list:
    return list(v.items) if isinstance(v, Seq) else [v.elem]


def _join_shape(a: Shape | None, b: Shape | None) -> Shape | None:
    # Semaphore arrays of different lengths are still non-scalar: keep rank.
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def join_all(values) -> Value:
    values = list(values)
    if not values:
        return UNKNOWN
    out = values[0]
    for v in values[1:]:
        out = join(out, v)
    return out


def tuple_items(v: Value) -> Seq | None:
    """A NamedTuple instance as the tuple it also is (fields in order), for
    iterating, unpacking and `*args`; None for anything else."""
    if not (isinstance(v, Instance) and getattr(v.cls, "tuple_like", False)):
        return None
    return Seq(items=tuple(v.attrs.get(f, UNKNOWN) for f in v.cls.fields))


def pytree_fields(v: "Instance") -> list[str]:
    """A record's fields that are pytree children, in jax's order (declared
    order; static fields left out)."""
    return [f for f in v.cls.fields if f not in v.cls.static] \
        or [k for k in v.attrs if k not in v.cls.static]


def is_record(v: Value) -> bool:
    """An instance of the file's own dataclass / NamedTuple (a pytree node)."""
    return isinstance(v, Instance) and getattr(v.cls, "record", False)


def as_view(ref: Ref, shape: Shape | None, origin: str) -> Ref:
    return replace(ref, shape=shape, view=True, origin=origin)


class ClassVal(Value):
    """A class defined in the file that the engine can instantiate: plain
    classes, @dataclass and NamedTuple. Identity semantics."""

    def __init__(self, node, scope, methods: dict, fields: tuple, record: bool):
        object.__setattr__(self, "origin", f"class {node.name}")
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "methods", methods)  # name -> FunctionDef
        object.__setattr__(self, "fields", fields)  # dataclass / NamedTuple field order
        object.__setattr__(self, "record", record)  # fields come from the call's arguments
        object.__setattr__(self, "kinds", {})  # method name -> method | static | class | property
        object.__setattr__(self, "defaults", {})  # record field -> its literal default
        object.__setattr__(self, "static", frozenset())  # fields that are not pytree leaves
        object.__setattr__(self, "leaves", frozenset())  # fields annotated as one array (a leaf)
        # method name -> the scope it was defined in, for methods inherited
        # from a base class (perhaps of another module); else `scope`.
        object.__setattr__(self, "method_scopes", {})
        # Some bases are not known (a library's TestCase): an attribute not
        # found on the class may still exist (Unknown, never an error).
        object.__setattr__(self, "open", False)
        # A NamedTuple: its instances are also tuples of their fields.
        object.__setattr__(self, "tuple_like", False)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def describe(self) -> str:
        return self.origin


_WRITES = [0]  # attribute writes on any instance (a loop pass that made none can stop)


def instance_writes() -> int:
    return _WRITES[0]


class _VersionedDict(dict):
    """Counts writes, so calls on an unchanged instance can be memoised."""

    version = 0

    def __setitem__(self, key, value):
        self.version += 1
        _WRITES[0] += 1
        super().__setitem__(key, value)


class Instance(Value):
    """An instance of a ClassVal. Its attributes are mutable (self.x = ...),
    so it compares by identity and calls involving it are never memoised."""

    def __init__(self, cls: ClassVal):
        object.__setattr__(self, "origin", f"{cls.node.name} instance")
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "attrs", _VersionedDict())

    @property
    def version(self) -> int:
        return self.attrs.version

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def describe(self) -> str:
        return self.origin


@frozen
class TextPrefix(Value):
    """A string of which only the start is known: `f"sem_{i}"` with `i`
    unknown. As a dict key it picks among the keys that start so."""

    prefix: str = ""


@frozen
class StarUnknown(Value):
    """A `*args` whose length is not known; `elem` is what each of its items
    is, when that is known (`*blocks` of a pipeline's computed specs)."""

    elem: Value = UNKNOWN


STAR_UNKNOWN = StarUnknown()
# The origin of the tuple a `*args` parameter holds: each item is one
# positional argument of the call (tree_map(new_ref, args) relies on it).
VARARGS = "the positional arguments of a call (*args)"



@frozen
class SuperCell(Value):
    """What `super()` needs inside a method of the user's class (Python
    keeps it in the `__class__` cell): the class whose method runs, and the
    instance it runs on."""

    cls: object = None
    obj: Value = UNKNOWN
