"""Scratch and scoped allocations: memory-space allocations
(`pltpu.VMEM((8, 128), f32)`), semaphore allocations
(`SemaphoreType.DMA((2,))`), the Ref each becomes in a kernel's scratch
parameters (`scratch_value`, pytrees of them included), and
`pl.run_scoped` (the body runs with one Ref per allocation; HBM / ANY
allocations are recorded for PAL208)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.shapes import dtype_of, shape_of, space_of
from pallas_lsp.engine.events import Arg, ScopedAlloc
from pallas_lsp.engine.model import Api, Const, Func, SemKind, Seq, Space, Value
from pallas_lsp.engine.values import UNKNOWN, Alloc, AllocTree, Instance, RefTree, Spec, is_record

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


def memory_alloc(space: str, args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("shape")
    dtype_arg = args[1] if len(args) > 1 else kwargs.get("dtype")
    shape = shape_of([shape_arg.value]) if shape_arg is not None else None
    dtype = dtype_of(dtype_arg.value) if dtype_arg is not None else None
    return Alloc(space=Space(space), shape=shape, dtype=dtype)


def memory_ref(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    """`pl.MemoryRef(aval, memory_space)`: an output or scratch buffer of the
    aval's shape and dtype in that space (`pl.HOST` for host memory). The
    SparseCore's `plsc.MemoryRef(shape, dtype, memory_space=..., tiling=...)`
    gives the shape and dtype themselves."""
    first = args[0] if args else kwargs.get("inner_aval") or kwargs.get("shape")
    v = first.value if first is not None else None
    if isinstance(v, (Seq, Const)):  # a shape: (shape, dtype, memory_space=...)
        dtype_arg = args[1] if len(args) > 1 else kwargs.get("dtype")
        where = args[2] if len(args) > 2 else kwargs.get("memory_space")
        shape = shape_of([v])
        dtype = dtype_of(dtype_arg.value) if dtype_arg is not None else None
    else:
        where = args[1] if len(args) > 1 else kwargs.get("memory_space")
        shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    return Alloc(space=(space_of(where.value) if where is not None else None) or Space.UNKNOWN,
                 shape=shape if isinstance(shape, tuple) else None,
                 dtype=dtype if isinstance(dtype, str) else None)


def like_alloc(space: str, args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    """`pltpu.VMEM.like(x)`: a buffer of x's shape and dtype (an array, a
    ShapeDtypeStruct); what the engine does not know of x stays unknown."""
    arg = args[0] if args else kwargs.get("shape_dtype_like")
    v = arg.value if arg is not None else None
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    return Alloc(space=Space(space),
                 shape=shape if isinstance(shape, tuple) else None,
                 dtype=dtype if isinstance(dtype, str) else None)


def sem_alloc(kind: str, args: list[Arg]) -> Value:
    shape = shape_of([args[0].value]) if args else ()
    return Alloc(space=Space.SEMAPHORE, shape=shape, sem=SemKind(kind))


def to_alloc(value: Value) -> Alloc | None:
    if isinstance(value, Alloc):
        return value
    if isinstance(value, Api) and api.tail(value.name) in api.SEM_TYPES:
        return Alloc(space=Space.SEMAPHORE, shape=(), sem=SemKind(api.SEM_TYPES[api.tail(value.name)]),
                     decl=value.decl)
    return None


def scratch_value(v: Value, origin: str) -> Value:
    alloc = to_alloc(v)
    if alloc is not None:
        return alloc.to_ref(origin)
    if isinstance(v, AllocTree):
        return RefTree(space=v.space)
    if isinstance(v, Seq):
        return Seq(items=tuple(scratch_value(x, f"{origin}[{i}]") for i, x in enumerate(v.items)),
                   keys=v.keys, origin=origin)
    if is_record(v):
        return mapped_record(v, lambda x, k: scratch_value(x, f"{origin}.{k}"))
    if isinstance(v, Const) and v.value is None:
        return v  # an empty pytree: the kernel gets None (checked with jax 0.10.2)
    return UNKNOWN


def mapped_record(v: Instance, leaf) -> Instance:
    """The same pytree node with `leaf` applied to each spec / allocation field
    (`LhsRef(value=BlockSpec(...), scale=None)` -> `LhsRef(value=<Ref>, scale=None)`);
    other fields (static configuration) are kept as they are."""
    out = Instance(v.cls)
    for k, x in v.attrs.items():
        out.attrs[k] = leaf(x, k) if isinstance(x, (Spec, Alloc, Seq, Instance)) \
            or to_alloc(x) is not None else x
    return out


def run_scoped(host: LaunchHost, body: Value, types: list[Arg], kw_types: dict[str, Arg],
               node: ast.AST, frame: Frame) -> Value:
    """`pl.run_scoped(body, *types, **kw_types)`: the body runs with one Ref
    per allocation (HBM / ANY allocations are recorded for PAL208)."""
    refs, kw_refs = [], {}
    for a in types:
        refs.append(_scoped_ref(host, a, node))
    for k, a in kw_types.items():
        if k == "collective_axes":
            continue
        kw_refs[k] = _scoped_ref(host, a, node)
    if not isinstance(body, Func):
        return UNKNOWN
    origins = {}
    params = [p.arg for p in list(body.node.args.posonlyargs) + list(body.node.args.args)]
    for i, p in enumerate(params[len(body.bound_args):]):
        if i < len(types):
            origins[p] = f"pl.run_scoped allocation #{i + 1}"
    for k in kw_refs:
        origins[k] = f"pl.run_scoped allocation `{k}`"
    if not frame.kernel:
        # run_scoped only runs inside a kernel, here one whose launch is not
        # seen (a docs snippet "inside a kernel:", a body traced by a test):
        # its body is kernel code, with no claims about the kernel around it.
        host.events.truncated.add(host.kernel_count + 1)
        host.events.standalone.add(host.kernel_count + 1)
        return host.call_func(body, refs, kw_refs, frame, param_origin=origins, kernel=True)
    return host.call_func(body, refs, kw_refs, frame, param_origin=origins)


def _scoped_ref(host: LaunchHost, a: Arg, call_node) -> Value:
    alloc = to_alloc(a.value)
    if alloc is None and isinstance(a.value, Seq):  # a pytree of allocations
        return Seq(items=tuple(_scoped_ref(host, Arg(a.node, v), call_node)
                               for v in a.value.items), keys=a.value.keys)
    if alloc is None and is_record(a.value):  # a dataclass pytree of them
        return mapped_record(a.value, lambda v, _: _scoped_ref(host, Arg(a.node, v), call_node))
    if isinstance(a.value, AllocTree):  # one of unknown structure
        return RefTree(space=a.value.space)
    if alloc is None:
        return UNKNOWN
    if alloc.space in (Space.HBM, Space.ANY) and a.node is not None:
        host.events.scoped.append(ScopedAlloc(kernel_id=host.active_kernel, site=host.active_site,
                                                node=a.node, space=alloc.space.value,
                                                call=call_node))
    line = getattr(call_node, "lineno", 0)
    col = getattr(a.node, "col_offset", 0)
    return alloc.to_ref(f"pl.run_scoped allocation (line {line}, col {col})", a.node)
