"""Shapes, dtypes and memory spaces read out of values: `(8, 128)` or
`8, 128` as a shape, `jnp.float32` as a dtype, `pltpu.VMEM` as a space,
`ShapeDtypeStruct`s, and the shape of `ref.at[idx]` / `ref[idx]` (slices,
`pl.ds`, `...`, dropped dimensions). Pure functions of values, shared by
every launcher family."""
from __future__ import annotations

import ast

from pallas_lsp.engine import api
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Api, Array, Const, Ref, Seq, Shape, Space, Value
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.values import ShapeDtype, SliceVal


SQUEEZED = "__squeezed__"


def space_of(value: Value) -> Space | None:
    if isinstance(value, Api):
        name = api.tail(value.name)
        if name in api.MEMORY_SPACES:
            return Space(api.MEMORY_SPACES[name])
    return None


def dtype_of(value: Value) -> str | None:
    if isinstance(value, Api) and value.name.startswith("jnp."):
        name = value.name[4:]
        return "bool" if name == "bool_" else name
    if isinstance(value, Const) and isinstance(value.value, str) and value.value != SQUEEZED:
        return value.value
    return None


def shape_of(values: list[Value]) -> Shape | None:
    """A shape from `(8, 128)` (one Seq/Const) or from `8, 128` (several)."""
    if len(values) == 1:
        v = values[0]
        if isinstance(v, Const) and isinstance(v.value, tuple):
            return tuple(d if isinstance(d, int) else None for d in v.value)
        if isinstance(v, Seq) and v.keys is None:
            return tuple(dim_of(d) for d in v.items)
        if isinstance(v, Const) and isinstance(v.value, int):
            return (v.value,)
        return None
    return tuple(dim_of(d) for d in values)


def dim_of(v: Value) -> int | None:
    if isinstance(v, Const) and isinstance(v.value, int) and not isinstance(v.value, bool):
        return v.value
    return None


def shape_dtype(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("shape")
    dtype_arg = args[1] if len(args) > 1 else kwargs.get("dtype")
    return ShapeDtype(shape=shape_of([shape_arg.value]) if shape_arg else None,
                      dtype=dtype_of(dtype_arg.value) if dtype_arg else None)


def slice_value(lo: Value, hi: Value, has_step: bool) -> Value:
    if has_step:
        return SliceVal()
    lo_v = lo.value if isinstance(lo, Const) else "?"
    hi_v = hi.value if isinstance(hi, Const) else "?"
    if lo_v is None:
        lo_v = 0
    if isinstance(lo_v, int) and isinstance(hi_v, int):
        return SliceVal(size=max(hi_v - lo_v, 0), start=lo_v, py_slice=True)
    if isinstance(lo_v, int) and hi_v is None:
        return _OpenSlice(lo=lo_v)
    return SliceVal()


@frozen
class _OpenSlice(Value):
    """`a:` / `:`: its size depends on the dimension."""

    lo: int = 0


def index_shape(shape: Shape | None, comps: list[Value], slice_node: ast.AST) -> Shape | None:
    """Shape of `ref.at[idx]` / `ref[idx]` given the base shape."""
    if shape is None:
        return None
    ellipses = sum(1 for c in comps if isinstance(c, Const) and c.value is Ellipsis)
    if ellipses > 1:
        return None
    real = len(comps) - ellipses
    if real > len(shape):
        return None
    out: list[int | None] = []
    i = 0
    for c in comps:
        if isinstance(c, Const) and c.value is Ellipsis:
            n = len(shape) - real
            out.extend(shape[i:i + n])
            i += n
            continue
        dim = shape[i] if i < len(shape) else None
        i += 1
        if isinstance(c, SliceVal):
            out.append(c.size)
        elif isinstance(c, _OpenSlice):
            out.append(max(dim - c.lo, 0) if dim is not None else None)
        elif isinstance(c, Const) and isinstance(c.value, int):
            continue
        elif isinstance(c, Array) and c.shape not in (None, ()):
            return None  # an array indexer: result shape is not simple
        elif isinstance(c, Ref):
            return None  # indexed by a Ref of offsets (SparseCore gathers): not simple either
        elif isinstance(c, Seq):
            return None
        else:
            continue  # a dynamic scalar index drops the dimension
    out.extend(shape[i:])
    return tuple(out)


def window_overflow(shape: Shape | None, comps: list[Value]) -> list[tuple[int, str, str]]:
    """The components of `ref.at[idx]` that provably leave `shape`, as
    (component index, JAX's message, kind). Only constant starts and sizes of
    known dimensions count; JAX's own trace-time check skips a start of 0, and
    clamps a Python slice `a:b` to the dimension first (so only a start at or
    past the end fails), so both are judged as JAX does."""
    if shape is None or any(isinstance(c, Const) and c.value is Ellipsis for c in comps) \
            or len(comps) > len(shape):
        return []
    out = []
    for i, (c, dim) in enumerate(zip(comps, shape)):
        if not isinstance(dim, int) or dim <= 0:
            continue
        if isinstance(c, SliceVal) and c.start is not None and c.start > 0:
            start = min(c.start, dim) if c.py_slice else c.start
            if start >= dim:
                out.append((i, f"Out of bound slice: start={start}, dim={dim}.", "slice"))
            elif not c.py_slice and c.size and start + c.size > dim:
                out.append((i, f"Out of bound slice: start={start}, size={c.size}, stride=1, "
                               f"dim={dim}.", "slice"))
        elif isinstance(c, _OpenSlice) and c.lo >= dim:
            out.append((i, f"Out of bound slice: start={dim}, dim={dim}.", "slice"))
        elif isinstance(c, Const) and type(c.value) is int and c.value >= dim:
            out.append((i, f"Out of bound indexer: idx={c.value}, dim={dim}.", "int"))
    return out
