"""The scoped VMEM a TPU `pallas_call` needs, counted the way the compiler
counts it (measured with libtpu 0.0.42, jax 0.10.2, deviceless v5e / v6e:
benchmarks/vmem_vs_compiler.py). Pure data in, bytes out: no jax, no AST.

What the compiler reserves, per launch:
* each VMEM block (in_specs / out_specs), its shape padded to the TPU tile
  (`padded_bytes`), times its buffer count (`buffer_count`), at least 1 KiB;
* each operand without a BlockSpec: the whole array, once;
* each VMEM scratch buffer, once (semaphores and SMEM add nothing);
* nothing for an operand XLA lays out in VMEM itself (`xla_moves`: another
  tiling pads it less than row-major); a range from 0 where the array is not
  known but its block is narrower than 128 lanes (`movable`);
* VMEM the compiler spills large intermediate values to: not modelled (0
  here). It follows the compiler's scheduling, not the values' sizes (an f32
  exp-minus-max over (256, 512) spills 0.2 MiB, over (512, 512) nothing), so
  the estimate is a floor for compute-heavy kernels (benchmarks/README.md).

A part whose shape, dtype or buffer count is unknown still has a floor (the
smallest it can be); the total is then a lower bound (`exact` False).
"""
from __future__ import annotations

from pallas_lsp.engine.records import frozen

ITEMSIZE = {"float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
            "uint16": 2, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
            "bool": 4, "float64": 8, "int64": 8, "uint64": 8}
# bool blocks are int32 in VMEM. 4-bit types were not measured: they count as unknown.
LANES = 128
SUBLANES = 8
WORD = 4  # bytes a sublane holds per lane: narrower types pack 2 (16-bit) or 4 (8-bit) rows
MIN_BLOCK_BYTES = 1024  # a block's buffers take at least 1 KiB together (measured: an f32
# (1, 128) block, 512 bytes, reserves 1 KiB alone and 1 KiB double-buffered); scratch does not


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def tile_rows(rows: int, itemsize: int) -> int:
    """The rows VMEM gives a buffer whose second-to-last dimension is `rows`:
    a multiple of 8 from 8 rows up (for every dtype: bf16 and int8 are not
    padded to 16 / 32); below 8, the next power of two, but at least the rows
    one 32-bit sublane packs (f32 1, bf16 2, int8 4). These are the tiles XLA
    lays the operand out in (f32[16,1,128] is T(1,128), bf16[16,2,128]
    T(2,128)): measured on v5e and v6e, the same for both."""
    if rows >= SUBLANES:
        return _round_up(rows, SUBLANES)
    return max(_pow2_at_least(rows), max(1, WORD // itemsize))


def padded_bytes(shape: tuple, itemsize: int) -> int:
    """One buffer of `shape` as VMEM holds it: the last dim padded to 128
    lanes, the second-to-last to `tile_rows`. A squeezed dimension (None)
    keeps its place as one row: a `(None, 4, None, 128)` f32 block of an
    f32[b, h, 1, 128] array is four (1, 128) tiles, 2 KiB, where a (4, 128)
    bf16 block would be 1 KiB (measured on jax's paged attention). A 1-D
    buffer is padded to 128 elements."""
    dims = [1 if d is None else d for d in shape] or [1]
    if len(dims) == 1:
        return _round_up(dims[0], LANES) * itemsize
    *lead, rows, lanes = dims
    n = tile_rows(rows, itemsize) * _round_up(lanes, LANES) * itemsize
    for d in lead:
        n *= d
    return n


def xla_moves(array: tuple | None, itemsize: int | None) -> bool | None:
    """Whether XLA lays the array out in VMEM itself before the kernel (then
    the kernel reserves nothing for it): when tiling two other dimensions
    than the last two pads it to strictly fewer bytes (f32[256,64]: 64 KiB
    as (64, 256) where row-major is 128 KiB; f32[200,300] ties: stays).
    Measured on 34 arrays of 2 and 3 dims, f32 and bf16, up to 13 MB
    (deviceless v5e, layouts left to the compiler as a real call's are).
    None when the array or its dtype is not known."""
    if array is None or not itemsize or any(not isinstance(d, int) for d in array):
        return None
    if len(array) < 2:
        return False  # (1-D arrays were not measured; they are not moved here)

    def padded(i: int, j: int) -> int:
        n = tile_rows(array[i], itemsize) * _round_up(array[j], LANES)
        for k, d in enumerate(array):
            if k not in (i, j):
                n *= d
        return n

    last = len(array) - 1
    row_major = padded(last - 1, last)
    return any(padded(i, j) < row_major for i in range(len(array))
               for j in range(len(array)) if i != j)


def buffer_count(*, steps: int | None, constant_index: bool | None, buffered: int | None,
                 whole_array: bool | None) -> int | None:
    """How many buffers the pipeline gives a block: one when the grid has one
    step, the index map is constant, the block is the whole array (even with
    an explicit `Buffered(2)`) or `Buffered(1)`; `n` for `Buffered(n)`; two
    otherwise (also when the grid's size is known only at run time). None
    when it depends on something unknown."""
    if steps == 1 or constant_index or whole_array or buffered == 1:
        return 1
    if buffered is not None:
        return buffered
    if constant_index is False and whole_array is False:
        return 2  # a block that moves: two, also on a grid sized at run time
    if steps is None or constant_index is None or whole_array is None:
        return None
    return 2


@frozen
class Need:
    """What the model is told about one buffer."""

    name: str  # "in_specs[0] x_ref", "scratch[1]", "operand 2 (no BlockSpec)"
    kind: str  # block | operand | scratch
    shape: tuple | None  # None: unknown
    dtype: str | None  # None: unknown
    count: int | None  # buffers; None: unknown (1 or more)
    why: str = ""  # why that count, in words
    kept: bool = False  # scratch the compiler surely keeps (rules/_scratch_kept.py)
    movable: bool = False  # the array unknown, XLA may lay it out in VMEM: from 0
    moved: bool = False  # XLA lays the array out in VMEM itself (`xla_moves`): nothing


@frozen
class Part:
    name: str
    kind: str
    shape: tuple | None
    dtype: str | None
    bytes_each: int | None  # one buffer, padded; None when shape or dtype is unknown
    count: int | None
    bytes: int  # what it adds (the floor when unknown)
    floor: int  # the least it can add: scratch 0 unless known kept, since the compiler
    # drops a buffer that is written and read back within one grid step (measured)
    exact: bool
    why: str
    moved: bool = False  # the Need's flags, kept for whoever re-estimates it
    movable: bool = False
    kept: bool = False


@frozen
class Estimate:
    parts: tuple
    internal: int  # compiler-internal scratch counted (0: not modelled)
    total: int  # the estimate (a floor when not exact)
    floor: int  # the least the compiler can need (what PAL404 judges)
    exact: bool

    @property
    def ranged(self) -> bool:
        """Known parts whose figure is a range (an operand XLA may move)."""
        return any(p.floor < p.bytes and p.kind != "scratch" for p in self.parts)


def part(need: Need) -> Part:
    shape_known = need.shape is not None and all(isinstance(d, int) or d is None
                                                 for d in need.shape)
    size = ITEMSIZE.get(need.dtype or "")
    each = padded_bytes(tuple(need.shape), size) if shape_known and size else None
    if each is not None and need.count is not None:
        nbytes, exact = each * need.count, True
    else:  # a floor: half a byte an element (int4, the smallest TPU dtype), one buffer
        # when the count is unknown, nothing for an unknown shape
        one = each if each is not None else (
            padded_bytes(tuple(need.shape), 1) // 2 if shape_known else 0)
        nbytes, exact = one * (need.count or 1), False
    if need.kind != "scratch" and nbytes:
        nbytes = max(nbytes, MIN_BLOCK_BYTES)
    if need.moved:
        nbytes = 0
    floor = 0 if (need.kind == "scratch" and not need.kept) or need.movable else nbytes
    return Part(need.name, need.kind, need.shape, need.dtype, each, need.count, nbytes, floor,
                exact, need.why, need.moved, need.movable, need.kept)


def estimate(needs: list[Need], internal: int = 0) -> Estimate:
    parts = tuple(part(n) for n in needs)
    total = sum(p.bytes for p in parts) + internal
    floor = sum(p.floor for p in parts) + internal
    return Estimate(parts, internal, total, floor, all(p.exact for p in parts))
