"""Ref operations that are API calls: `pl.load` / `pltpu.store` (recorded
as `RefAccess`es like `x[...]`), `pltpu.roll`, and `jax.new_ref` /
`jax.empty_ref`, which make a Ref (outside a kernel, a mutable array a
`core_map` body closes over; inside one, a buffer or semaphore)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.scratch import to_alloc
from pallas_lsp.engine.binding.shapes import space_of
from pallas_lsp.engine.events import Arg, RefAccess, RollCall, pick
from pallas_lsp.engine.model import Array, Const, Ref, SemKind, Space, Value
from pallas_lsp.engine.values import UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host

# Pallas calls that turn an allocation (`pltpu.VMEM(...)`) into a Ref.
ALLOC_REF = {"pl.get_global", "pl.empty_ref_like", "pltpu.get_global", "pltpu.empty_ref_like"}
NEW_REF = {"jax.new_ref", "jax._src.core.new_ref", "jax.empty_ref", "jax.experimental.mutable_array",
           "jax._src.core.mutable_array"}


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if name in NEW_REF:
        space = kwargs.get("memory_space")
        where = Space.ANY if space is None else (space_of(space.value) or Space.UNKNOWN)
        x = args[0].value if args else UNKNOWN
        # `ShapeDtypeStruct((n,), pltpu.SemaphoreType.DMA.dtype)` in SEMAPHORE memory
        sem = _sem_dtype(args[0].node) if args and where == Space.SEMAPHORE else None
        return Ref(origin=f"{name.rsplit('.', 1)[-1]}(...)", space=where,
                   shape=getattr(x, "shape", None), dtype=None if sem else getattr(x, "dtype", None),
                   sem=sem)
    if name in ALLOC_REF:
        # `pl.get_global(pltpu.VMEM_SHARED(shape, dtype))`, `pl.empty_ref_like(
        # pltpu.HBM(shape, dtype))`: a Ref of that allocation.
        alloc = to_alloc(args[0].value) if args else None
        return alloc.to_ref(f"{t}(...)") if alloc is not None else None
    if t in ("load", "store") and name.startswith(("pl.", "pltpu.")):
        ref = pick(args, kwargs, 0, "ref")
        if ref is not None:
            val = pick(args, kwargs, 1, "val") if t == "store" else None
            host.events.accesses.append(RefAccess(
                kernel_id=host.active_kernel, site=host.active_site, kind=t, node=node, ref=ref,
                value=val))
            if t == "load":
                shape = ref.value.shape if isinstance(ref.value, Ref) else None
                return Array(origin="load", shape=shape, decl=getattr(ref.value, "decl", None),
                             dtype=getattr(ref.value, "dtype", None))
        return Const(value=None)
    if t == "roll":
        x = pick(args, kwargs, 0, "x")
        if x is not None:
            host.events.rolls.append(RollCall(
                kernel_id=host.active_kernel, site=host.active_site, node=node, x=x,
                shift=pick(args, kwargs, 1, "shift"), axis=pick(args, kwargs, 2, "axis"),
                stride=kwargs.get("stride"), stride_axis=kwargs.get("stride_axis")))
        return Array(origin="pltpu.roll", shape=getattr(x.value, "shape", None) if x else None)
    return None


def _sem_dtype(node: ast.AST) -> SemKind | None:
    """The semaphore kind named by a ShapeDtypeStruct's dtype
    (`pltpu.SemaphoreType.DMA.dtype`), read from the source."""
    if not (isinstance(node, ast.Call) and len(node.args) > 1):
        return None
    dtype = node.args[1]
    if isinstance(dtype, ast.Attribute) and dtype.attr == "dtype" \
            and isinstance(dtype.value, ast.Attribute) \
            and isinstance(dtype.value.value, ast.Attribute) \
            and dtype.value.value.attr == "SemaphoreType":
        kind = api.SEM_TYPES.get(f"SemaphoreType.{dtype.value.attr}")
        return SemKind(kind) if kind else None
    return None
