"""BufferedRef subclasses: pipeline hooks (`copy_in`, `wait_out`...) that
a user overrides are kernel code; what jax's BufferedRef hands them is
modelled here, and how a tuple operand is taken apart tells which of its
items are Refs."""
from __future__ import annotations

import ast

from pallas_lsp.engine import syntax
from pallas_lsp.engine.model import Api, Array, Ref, SemKind, Seq, Space, Value
from pallas_lsp.engine.values import UNKNOWN, Instance, Partial


HOOKS = ("copy_in", "copy_out", "wait_in", "wait_out")


SLOTS = ("current_copy_in_slot", "current_copy_out_slot", "current_wait_in_slot",
                   "current_wait_out_slot", "copy_in_slot", "copy_out_slot", "wait_in_slot",
                   "wait_out_slot")


def used_as_ref(func: ast.AST, name: str) -> bool:
    """Is `name` never unpacked, iterated, measured or given non-Ref
    attributes in `func` (a pytree of Refs would be)?"""
    parents: dict[int, ast.AST] = {}
    for node in syntax.walk(func):
        for child in syntax.children(node):
            parents[id(child)] = node
    for node in syntax.walk(func):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) and up.attr not in _REF_ATTRS:
            return False
        if isinstance(up, (ast.Assign, ast.For, ast.comprehension, ast.Starred)) \
                and getattr(up, "value", getattr(up, "iter", None)) is node:
            return False
        if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) \
                and up.func.id in ("len", "iter", "list", "tuple", "isinstance", "zip"):
            return False
        if isinstance(up, ast.Subscript) and up.value is node \
                and isinstance(up.slice, ast.Constant) and isinstance(up.slice.value, int):
            return False  # `src_ref[0]`: the first of several operands, most likely
    return True


def ref_annotation(ann: ast.expr | None) -> bool:
    """No annotation, or one that names a Ref (`jax.Ref`, `pallas_core.TransformedRef`)."""
    if ann is None:
        return True
    text = ast.unparse(ann)
    return "Ref" in text and not any(t in text for t in ("tuple", "Tuple", "Sequence", "list",
                                                         "Any", "dict"))


def ref_tuple_annotation(ann: ast.expr | None) -> list[bool] | None:
    """`tuple[jax.Ref, jax.Ref, Schedule]` -> which items are Refs; None when
    the annotation is not a fixed-length tuple with a Ref in it."""
    if not isinstance(ann, ast.Subscript) or not isinstance(ann.value, (ast.Name, ast.Attribute)):
        return None
    if ast.unparse(ann.value).split(".")[-1] not in ("tuple", "Tuple"):
        return None
    items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    if any(isinstance(i, ast.Constant) for i in items):  # `tuple[Ref, ...]`, `tuple[()]`
        return None
    refs = [isinstance(i, (ast.Name, ast.Attribute))
            and ast.unparse(i).split(".")[-1] in ("Ref", "TransformedRef", "AbstractRef")
            for i in items]
    return refs if any(refs) else None


_REF_ATTRS = ("at", "shape", "dtype", "ndim", "reshape", "bitcast", "T")


_REF_SUFFIXES = ("_ref", "_hbm", "_vmem", "_smem")


def unpacked_refs(func: ast.AST, operand: str) -> tuple[list[bool], bool]:
    """Which items of a tuple operand are Refs, from how `func` takes it
    apart: `a_ref, n = operand` (all of its items: exact, when every such
    unpacking has that length) or `q = operand[0]` (the first ones only). An
    item is a Ref when every name it is bound to is used only as one (see
    used_as_ref) and either has `.at[...]` taken or is named like one
    (`*_ref`, `*_hbm`, ...); anything else stays unknown."""
    slots: dict[int, list[str]] = {}
    lengths: set[int] = set()
    for node in syntax.walk(func):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(value, ast.Name) and value.id == operand \
                and isinstance(target, (ast.Tuple, ast.List)):
            if not all(isinstance(e, ast.Name) for e in target.elts):
                return [], False
            lengths.add(len(target.elts))
            for i, e in enumerate(target.elts):
                slots.setdefault(i, []).append(e.id)
        elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) \
                and value.value.id == operand and isinstance(target, ast.Name) \
                and isinstance(value.slice, ast.Constant) \
                and type(value.slice.value) is int and 0 <= value.slice.value < 16:
            slots.setdefault(value.slice.value, []).append(target.id)
    if not slots:
        return [], False
    dotted = {n.value.id for n in syntax.walk(func) if isinstance(n, ast.Attribute)
              and n.attr == "at" and isinstance(n.value, ast.Name)}
    out = []
    for i in range(max(slots) + 1):
        names = slots.get(i, [])
        out.append(bool(names) and all((n in dotted or n.endswith(_REF_SUFFIXES))
                                       and used_as_ref(func, n) for n in names))
    exact = len(lengths) == 1 and max(slots) + 1 == next(iter(lengths))
    return (out, exact) if any(out) else ([], False)


def is_buffered_ref(value: Value) -> bool:
    return isinstance(value, Api) and value.name.split(".")[-1] in ("BufferedRef",
                                                                    "BufferedRefBase")


def buffered_self(cls, node) -> dict:
    """`self` for a BufferedRef override (`node`, a method of `cls`) run on
    its own: what jax's BufferedRef gives it (its VMEM window, one DMA
    semaphore per buffer, traced slot indices). The other arguments stay
    unknown."""
    params = node.args.posonlyargs + node.args.args if cls is not None else []
    if not params:
        return {}
    inst = Instance(cls)
    name = cls.node.name
    inst.attrs["window_ref"] = Ref(origin=f"{name}.window_ref (the pipeline's VMEM buffers)",
                                   space=Space.VMEM, root=f"{name}.window_ref")
    for attr in ("sem_recvs", "sem_sends"):
        inst.attrs[attr] = Ref(origin=f"{name}.{attr} (one DMA semaphore per buffer)",
                               space=Space.SEMAPHORE, sem=SemKind.DMA, shape=(None,),
                               root=f"{name}.{attr}")
    for attr in SLOTS:
        inst.attrs[attr] = Array(origin=f"{name}.{attr}")
    fixed = {params[0].arg: inst}
    # copy_in(self, src_ref, grid_indices): the operand's Ref in HBM, unless
    # this override is handed something else (it unpacks or iterates it).
    if len(params) >= 2 and ref_annotation(params[1].annotation) \
            and used_as_ref(node, params[1].arg):
        operand = params[1].arg
        fixed[operand] = Ref(origin=f"{operand} (the pipelined operand)", space=Space.ANY,
                             root=f"{name}.{node.name}.{operand}")
    elif len(params) >= 2:
        # `dst_ref: tuple[jax.Ref, jax.Ref, Schedule]`: the items annotated
        # as Refs are Refs (where they live is not said: SMEM or HBM).
        refs = ref_tuple_annotation(params[1].annotation)
        operand = params[1].arg
        exact = refs is not None
        if refs is None:
            # No annotation that says: `a_ref, b_ref = src_ref` or
            # `q_hbm = src_ref[0]`, and what the items are used as.
            refs, exact = unpacked_refs(node, operand)
        if refs:
            items = tuple(Ref(origin=f"{operand}[{i}] (a pipelined operand)",
                              root=f"{name}.{node.name}.{operand}[{i}]") if is_ref else UNKNOWN
                          for i, is_ref in enumerate(refs))
            fixed[operand] = Seq(items=items) if exact else Partial(head=items)
    return fixed
