"""Pytrees: `jax.tree.map` / `tree_util.tree_map` over lists, dicts and
registered dataclasses of Refs or descriptors, `tree.leaves` / `flatten`
in jax's order, `dataclasses.replace`, and which dataclass fields are
static (configuration, not leaves)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api, backend, syntax
from pallas_lsp.engine.apis.refs import NEW_REF
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Api, Array, Const, Descriptor, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import (UNKNOWN, VARARGS, Alloc, AllocTree, Instance, Partial,
                                      RefTree, SeqOf, TreeDef, is_record, join_all,
                                      pytree_fields)

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if name == "dataclasses.replace" and args \
            and isinstance(args[0].value, Instance) and getattr(args[0].value.cls, "record", False):
        new = Instance(args[0].value.cls)
        new.attrs.update(args[0].value.attrs)
        for k, a in kwargs.items():
            new.attrs[k] = a.value
        return new
    if name == "dataclasses.replace" and args and isinstance(args[0].value, backend.Hint):
        # `dataclasses.replace(mesh, num_cores=2)`: still that kind of mesh
        return args[0].value
    if name in TREE_MAPS:
        return tree_map(host, args, frame, node)
    if name in TREE_LEAVES and args:
        return tree_leaves(args[0].value)
    if name in TREE_FLATTENS and args:
        return Seq(items=(tree_leaves(args[0].value), TreeDef(tree=args[0].value)))
    return None


def tree_map(host: Host, args: list[Arg], frame: Frame, node: ast.Call) -> Value:
    """`jax.tree.map(f, xs, *rest)`: `f` on each leaf of a known list,
    tuple or dict (`jax.tree.map(lambda d: d.start(), copies)`); `f` may
    be an API too (`tree_map(jax.new_ref, operands)`)."""
    if len(args) < 2 or not isinstance(args[0].value, (Func, Api)):
        for a in args:
            host.escape(a.value)
        return UNKNOWN
    fn, trees = args[0].value, [a.value for a in args[1:]]
    # `x_ref, o_ref = jax.tree.map(jax.new_ref, (x, out))`: the operands
    # written out one by one in the tuple are arrays (a subtree would be
    # handed over whole), so each becomes a Ref even when its value is unknown.
    # So are a `*operands` parameter's items (`pl.kernel` look-alikes).
    written_out = isinstance(fn, Api) and fn.name in NEW_REF \
        and (isinstance(args[1].node, (ast.Tuple, ast.List))
             or isinstance(trees[0], Seq) and trees[0].origin == VARARGS)

    def call(leaves: list[Value], one_leaf: bool = False) -> Value:
        if isinstance(fn, Api):
            if leaves[0] is UNKNOWN and (written_out or one_leaf):
                return Ref(origin=f"{fn.name.rsplit('.', 1)[-1]}(...) of an operand",
                           space=Space.ANY)
            # Otherwise an unknown leaf may be a whole subtree: no claim about
            # its structure, only what `fn` makes of every leaf of it.
            if leaves[0] is UNKNOWN:
                space = _like_space(fn.name)
                return AllocTree(space=space) if space is not None else UNKNOWN
            return host.call_api(fn.name, [Arg(None, v) for v in leaves], {}, node, frame)
        result = host.call_func(fn, leaves, {}, frame)
        if leaves[0] is UNKNOWN and not one_leaf and isinstance(result, Ref) \
                and result.sem is None:
            # `fn` makes a Ref of any value: of each leaf of the subtree too.
            return RefTree(space=result.space)
        return result

    if trees[0] is UNKNOWN and len(trees) == 1:  # a tree the engine does not know at all
        out = call([UNKNOWN])
        if isinstance(out, (AllocTree, RefTree)):
            return out
    if not isinstance(trees[0], (Seq, SeqOf, Partial, Descriptor, Ref, Array)) \
            and not is_record(trees[0]):
        for t in trees:
            host.escape(t)
        return UNKNOWN
    return _walk(trees[0], trees[1:], 0, call)


def _like_space(name: str) -> Space | None:
    """`pltpu.SMEM.like` -> SMEM: an allocation maker mapped over leaves."""
    base = api.tail(name).removesuffix(".like")
    if base != api.tail(name) and base in api.ALLOC_SPACES:
        return Space(api.MEMORY_SPACES[base])
    return None


def _leaf(v) -> bool:
    return not isinstance(v, Seq) and not (isinstance(v, Const) and v.value is None) \
        and not is_record(v)


# Module level, not a closure of tree_map: a closure that calls itself is a
# reference cycle, which would keep the interpreter (and the AST) alive until
# the next collection.
def _walk(first, rest, depth, call):
    if is_record(first) and depth < 4:
        # A dataclass pytree: its data fields are mapped, its static
        # fields (configuration) kept.
        out = Instance(first.cls)
        for k, item in first.attrs.items():
            if k in first.cls.static:
                out.attrs[k] = item
                continue
            others = [r.attrs.get(k, UNKNOWN) if isinstance(r, Instance) else UNKNOWN
                      for r in rest]
            if item is UNKNOWN and k in first.cls.leaves:  # annotated as one array
                out.attrs[k] = call([item] + others, True)
                continue
            out.attrs[k] = _walk(item, others, depth + 1, call)
        return out
    if isinstance(first, Seq) and depth < 4:
        items = []
        for i, item in enumerate(first.items):
            others = [r.items[i] if isinstance(r, Seq) and i < len(r.items) else UNKNOWN
                      for r in rest]
            items.append(_walk(item, others, depth + 1, call))
        return replace(first, items=tuple(items))
    if isinstance(first, SeqOf) and _leaf(first.elem):
        return SeqOf(elem=call([first.elem] + [UNKNOWN] * len(rest)))
    if isinstance(first, Partial):
        for item in first.head + first.tail:
            if _leaf(item):
                call([item] + [UNKNOWN] * len(rest))
        return UNKNOWN
    if not _leaf(first):
        return first
    return call([first] + list(rest))


def tree_leaves(v: Value, depth: int = 0) -> Value:
    """`jax.tree.leaves(tree)`: the leaves in jax's order (lists and tuples
    in order, dicts by sorted key, dataclass pytrees by field, static fields
    and None left out). A Seq when the structure is known; SeqOf when only
    the kind of the leaves is; else Unknown."""
    if depth > 6:
        return UNKNOWN
    if isinstance(v, Const) and v.value is None:
        return Seq(items=())
    if isinstance(v, Seq):
        items = v.items
        if v.keys is not None:
            try:
                items = tuple(x for _, x in sorted(zip(v.keys, v.items), key=lambda kv: kv[0]))
            except TypeError:
                return UNKNOWN
        parts = [tree_leaves(x, depth + 1) for x in items]
    elif is_record(v):
        names = pytree_fields(v)
        parts = [Seq(items=(UNKNOWN,)) if f in v.cls.leaves and v.attrs.get(f, UNKNOWN) is UNKNOWN
                 else tree_leaves(v.attrs.get(f, UNKNOWN), depth + 1) for f in names]
    elif isinstance(v, SeqOf):
        inner = tree_leaves(v.elem, depth + 1)
        elems = inner.items if isinstance(inner, Seq) else \
            [inner.elem] if isinstance(inner, SeqOf) else []
        known = join_all(elems) if elems else UNKNOWN
        return SeqOf(elem=known) if isinstance(known, (Ref, Array, Descriptor)) else UNKNOWN
    elif isinstance(v, (Ref, Array, Descriptor, Alloc, Api)):
        # (an API object such as a bare `pltpu.SemaphoreType.DMA` is no
        # container: one leaf)
        return Seq(items=(v,))
    else:
        return UNKNOWN
    if all(isinstance(p, Seq) for p in parts):
        return Seq(items=tuple(x for p in parts for x in p.items))
    if any(p is UNKNOWN for p in parts):
        return UNKNOWN
    elems = [x for p in parts for x in (p.items if isinstance(p, Seq) else (p.elem,))]
    known = join_all(elems)
    return SeqOf(elem=known) if isinstance(known, (Ref, Array, Descriptor)) else UNKNOWN


def static_field(value: ast.expr) -> bool:
    """`dataclasses.field(metadata=dict(static=True))`, `field(static=True)`,
    flax's `struct.field(pytree_node=False)`: not a pytree leaf."""
    if not isinstance(value, ast.Call):
        return False
    for kw in syntax.walk(value):
        if isinstance(kw, ast.keyword) and kw.arg == "static" \
                and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            return True
        if isinstance(kw, ast.keyword) and kw.arg == "pytree_node" \
                and isinstance(kw.value, ast.Constant) and kw.value.value is False:
            return True
        if isinstance(kw, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "static"
                                            and isinstance(x, ast.Constant) and x.value is True
                                            for k, x in zip(kw.keys, kw.values)):
            return True
    return False


_ARRAY_TYPES = {"Array", "ndarray", "ArrayLike"}


def array_annotation(ann: ast.expr) -> bool:
    """`x: jax.Array` (or `jnp.ndarray`, jaxtyping's `Float[Array, "m n"]`):
    the field holds one array, a single pytree leaf. Says nothing about
    whether it is an array or a Ref (kernels annotate Refs as arrays too)."""
    if isinstance(ann, ast.Subscript):
        # jaxtyping's `Float[Array, "m n"]`: the array type, then a shape string.
        # (`tuple[Array, Array]` is two leaves, so the string is required.)
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else []
        if len(elts) != 2 or not (isinstance(elts[1], ast.Constant)
                                  and isinstance(elts[1].value, str)):
            return False
        ann = elts[0]
    name = ann.attr if isinstance(ann, ast.Attribute) else ann.id if isinstance(ann, ast.Name) \
        else None
    return name in _ARRAY_TYPES


def pytree_registration(value: Value) -> bool:
    """@jax.tree_util.register_dataclass and friends leave the class as it is."""
    return isinstance(value, Api) and value.name.split(".")[-1] in (
        "register_dataclass", "register_pytree_node_class", "register_static")


TREE_LEAVES = ("jax.tree.leaves", "jax.tree_util.tree_leaves", "tree_util.tree_leaves",
                "tree.leaves", "jax._src.tree_util.tree_leaves")


TREE_FLATTENS = ("jax.tree.flatten", "jax.tree_util.tree_flatten", "tree_util.tree_flatten",
                  "tree.flatten", "jax._src.tree_util.tree_flatten")


TREE_MAPS = ("jax.tree.map", "jax.tree_util.tree_map", "tree_util.tree_map", "tree.map",
              "jax._src.tree_util.tree_map")


def unflatten(tree: Value, leaves: Value) -> Value:
    """`treedef.unflatten(leaves)`: `tree`'s structure (lists, tuples, dicts,
    dataclass pytrees; None stays None) with `leaves` put back in jax's leaf
    order, as `tree_leaves` takes them out. Unknown when the leaves are not
    known one by one or do not fill the structure exactly."""
    items = leaves.items if isinstance(leaves, Seq) and leaves.keys is None else None
    if items is None or tree_leaves(tree) is UNKNOWN:
        return UNKNOWN
    it = iter(items)
    out = _refill(tree, it, 0)
    if out is None or next(it, None) is not None:
        return UNKNOWN
    return out


def _refill(v: Value, it, depth: int) -> Value | None:
    if depth > 6:
        return None
    if isinstance(v, Const) and v.value is None:
        return v
    if isinstance(v, Seq):
        if v.keys is None:
            parts = [_refill(x, it, depth + 1) for x in v.items]
            return None if any(p is None for p in parts) else Seq(items=tuple(parts))
        order = sorted(range(len(v.keys)), key=lambda i: v.keys[i])
        parts = {i: _refill(v.items[i], it, depth + 1) for i in order}
        if any(p is None for p in parts.values()):
            return None
        return Seq(items=tuple(parts[i] for i in range(len(v.keys))), keys=v.keys)
    if is_record(v):
        new = Instance(v.cls)
        new.attrs.update(v.attrs)
        names = pytree_fields(v)
        for f in names:
            part = _refill(v.attrs.get(f, UNKNOWN), it, depth + 1)
            if part is None:
                return None
            new.attrs[f] = part
        return new
    return next(it, None)  # a leaf

