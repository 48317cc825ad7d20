"""What kernels are given: `BlockSpec`s, grid specs, memory-space
allocations (`pltpu.VMEM((8, 128), f32)`, `pltpu.VMEM.like(x)`), semaphore allocations
(`SemaphoreType.DMA((2,))`), `pl.ds` slices, block-dimension markers,
`ShapeDtypeStruct`s and dtypes."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.scratch import like_alloc, memory_alloc, memory_ref, sem_alloc
from pallas_lsp.engine.binding.shapes import SQUEEZED, shape_dtype
from pallas_lsp.engine.binding.specs import block_spec, grid_spec
from pallas_lsp.engine.events import Arg, pick
from pallas_lsp.engine.model import Const, Value
from pallas_lsp.engine.values import UNKNOWN, Pipelining, SliceVal

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host

DTYPES = {d: d for d in ("float32", "bfloat16", "float16", "float64", "int32", "int16",
                         "int8", "int64", "uint32", "uint8", "uint16", "bool_",
                         "float8_e4m3fn", "float8_e5m2", "int4")}


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t == "BlockSpec":
        return block_spec(args, kwargs)
    if t == "Buffered":
        n = pick(args, kwargs, 0, "buffer_count")
        known = n is not None and isinstance(n.value, Const) and type(n.value.value) is int
        return Pipelining(buffers=n.value.value if known else None)
    if t in api.ALLOC_SPACES:
        return memory_alloc(t.split(".")[-1], args, kwargs)
    if t in ("MemoryRef", "tpu_sc.MemoryRef"):
        # pl.MemoryRef(jax.core.ShapedArray(shape, dtype), pl.HOST), or
        # plsc.MemoryRef(shape, dtype, memory_space=pltpu.VMEM, tiling=...)
        return memory_ref(args, kwargs)
    if t.endswith(".like") and t[:-5] in api.ALLOC_SPACES:
        return like_alloc(t[:-5].split(".")[-1], args, kwargs)
    if t in api.SEM_TYPES:
        return sem_alloc(api.SEM_TYPES[t], args)
    if t in ("PrefetchScalarGridSpec", "GridSpec"):
        return grid_spec(args, kwargs)
    if t in ("ds", "dslice", "Slice"):
        size = pick(args, kwargs, 1, "size")
        if size is not None and isinstance(size.value, Const) and isinstance(size.value.value, int):
            start = pick(args, kwargs, 0, "start")
            strided = pick(args, kwargs, 2, "stride") is not None
            known = start is not None and isinstance(start.value, Const) \
                and type(start.value.value) is int and not strided
            return SliceVal(size=size.value.value, start=start.value.value if known else None)
        return SliceVal()
    if t in ("Squeezed", "squeezed"):
        return Const(value=SQUEEZED)
    if t in ("Blocked", "Element", "BoundedSlice"):
        size = pick(args, kwargs, 0, "block_size")
        return size.value if size is not None and isinstance(size.value, Const) else UNKNOWN
    if name in ("jax.ShapeDtypeStruct", "jax.core.ShapedArray"):
        return shape_dtype(args, kwargs)
    if name.startswith("jnp.") and name[4:] in DTYPES:
        return Const(value=DTYPES[name[4:]])
    return None
