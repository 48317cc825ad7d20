"""Which Pallas API a dotted name denotes, whatever alias the user imported.

Every module path is normalised to a short canonical prefix, so that
`jax.experimental.pallas.tpu.make_async_copy`, `pltpu.make_async_copy` and
`from jax.experimental.pallas.tpu import make_async_copy as mac` all become
`pltpu.make_async_copy`.
"""
from __future__ import annotations

# Longest prefix first: the first match wins.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("jax.experimental.pallas.tpu", "pltpu"),
    ("pl.tpu", "pltpu"),  # attribute chains: jax.experimental.pallas -> pl, then .tpu
    ("jax.experimental.pallas", "pl"),
    ("jax._src.pallas.mosaic.primitives", "pltpu"),
    ("jax._src.pallas.mosaic.core", "pltpu"),
    ("jax._src.pallas.mosaic.helpers", "pltpu"),
    ("jax._src.pallas.mosaic.pipeline", "pltpu"),
    ("jax._src.pallas.mosaic", "pltpu"),
    ("jax._src.pallas.primitives", "pl"),
    ("jax._src.pallas.core", "pl"),
    ("jax._src.pallas.helpers", "pl"),
    ("jax._src.pallas.pallas_call", "pl"),
    ("jax._src.pallas", "pl"),
    ("jax.numpy", "jnp"),
    ("jax._src.lax.control_flow", "lax"),
    ("jax.lax", "lax"),
)


def canonical(dotted: str) -> str:
    short = _CANONICAL.get(dotted)
    if short is None:
        short = _canonical(dotted)
        if len(_CANONICAL) < 50_000:  # names seen in source: bounded, hostile files aside
            _CANONICAL[dotted] = short
    return short


_CANONICAL: dict[str, str] = {}


def _canonical(dotted: str) -> str:
    for prefix, short in _PREFIXES:
        if dotted == prefix:
            return short
        if dotted.startswith(prefix + "."):
            return short + dotted[len(prefix):]
    return dotted


def join(base: str, attr: str) -> str:
    return canonical(f"{base}.{attr}")


def tail(name: str) -> str:
    """`pltpu.make_async_copy` -> `make_async_copy` for pl/pltpu names, else ''."""
    head, _, rest = name.partition(".")
    return rest if head in ("pl", "pltpu") else ""


# --- groups of APIs the interpreter treats specially (by `tail`) -----------

DMA_MAKERS = {"make_async_copy", "async_copy", "make_async_remote_copy",
              "async_remote_copy", "sync_copy"}
SEM_OPS = {"semaphore_signal", "semaphore_wait", "semaphore_read"}
LOADS = {"load"}
STORES = {"store"}
MEMORY_SPACES = {
    "ANY": "ANY", "HBM": "HBM", "VMEM": "VMEM", "SMEM": "SMEM",
    "SEMAPHORE": "SEMAPHORE", "VMEM_SHARED": "VMEM_SHARED", "MemorySpace.VMEM_SHARED": "VMEM_SHARED",
    "MemorySpace.ANY": "ANY", "MemorySpace.HBM": "HBM", "MemorySpace.VMEM": "VMEM",
    "MemorySpace.SMEM": "SMEM", "MemorySpace.SEMAPHORE": "SEMAPHORE",
    "TPUMemorySpace.ANY": "ANY", "TPUMemorySpace.HBM": "HBM",
    "TPUMemorySpace.VMEM": "VMEM", "TPUMemorySpace.SMEM": "SMEM",
    "TPUMemorySpace.SEMAPHORE": "SEMAPHORE",
    "CMEM": "CMEM", "MemorySpace.CMEM": "CMEM", "HOST": "HOST", "MemorySpace.HOST": "HOST",
}
SEM_TYPES = {"SemaphoreType.DMA": "DMA", "SemaphoreType.REGULAR": "regular",
             "SemaphoreType.BARRIER": "barrier"}
# Calls that allocate in a memory space (`pltpu.VMEM((8, 128), f32)`).
ALLOC_SPACES = {"VMEM", "SMEM", "HBM", "ANY", "VMEM_SHARED", "MemorySpace.VMEM", "MemorySpace.SMEM",
                "MemorySpace.HBM", "MemorySpace.ANY", "MemorySpace.VMEM_SHARED", "CMEM",
                "MemorySpace.CMEM", "HOST", "MemorySpace.HOST"}
# Everything apis/allocations.py makes a value of (with SEM_TYPES): what a
# `functools.partial` of it makes when called.
CONSTRUCTORS = ALLOC_SPACES | {"BlockSpec", "PrefetchScalarGridSpec", "GridSpec", "ds", "dslice",
                               "Slice", "Squeezed", "squeezed", "Blocked", "Element",
                               "BoundedSlice"}
