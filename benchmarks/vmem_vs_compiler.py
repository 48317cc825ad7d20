"""The scoped VMEM model (server/pallas_lsp/engine/vmem.py) against the TPU
compiler's own figure, per pallas_call, compiled deviceless with libtpu.

For every case: trace it, take each `pallas_call` equation, give the model
what jax itself knows of it (block shapes, array dtypes, index maps,
`pipeline_mode`, memory spaces, scratch), compile that one equation for the
generation and read `used_scoped_memory_configs` from the executable.
The model sees the launch's facts, not the source: how much of them the
editor knows statically is another question (tests/compile/test_vmem_model.py).

    .venv/bin/python benchmarks/vmem_vs_compiler.py [--gen v5e --gen v6e] [--json OUT]

Needs jax[tpu]==0.10.2 (libtpu); no TPU. About a second per compile.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from pallas_lsp.engine import vmem  # noqa: E402

TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
_USED = re.compile(r'"used_scoped_memory_configs":\[\{"memory_space":"1","offset":"\d+",'
                   r'"size":"(\d+)"')
# an array of two or more dims that XLA itself puts in VMEM (memory space 1) around the
# kernel (scalar-prefetch index vectors it also moves there do not count)
_XLA_VMEM = re.compile(r"= \w+\[\d+,[\d,]*\]\{[^}]*S\(1\)\}")
S = jax.ShapeDtypeStruct
F32, BF16, I8, I32 = jnp.float32, jnp.bfloat16, jnp.int8, jnp.int32


# ---------------------------------------------------------------- the model's input


def _steps(grid) -> int | None:
    n = 1
    for d in grid:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _constant_index(closed, grid, n_prefetch: int) -> bool:
    """No output of the index map depends on a grid index whose dimension is
    above one, nor on a scalar-prefetch operand."""
    jaxpr = closed.jaxpr
    moving = {v for i, v in enumerate(jaxpr.invars)
              if i >= len(grid) or not (isinstance(grid[i], int) and grid[i] == 1)}
    for eqn in jaxpr.eqns:
        if any(not hasattr(x, "val") and x in moving for x in eqn.invars):
            moving.update(eqn.outvars)
    return not any(not hasattr(v, "val") and v in moving for v in jaxpr.outvars)


def _block_shape(bm) -> tuple:
    out = []
    for d in bm.block_shape:
        size = getattr(d, "block_size", d)
        # None / Squeezed: the kernel's buffer has no such dimension (the model drops it:
        # a squeezed second-to-last dimension leaves the rows of the one before it)
        out.append(int(size) if isinstance(size, int) else None)
    return tuple(out)


def needs(params) -> list[vmem.Need]:
    """What jax knows of one pallas_call equation, as the model's input."""
    gm = params["grid_mapping"]
    grid = tuple(gm.grid)
    steps = _steps(grid)
    out = []
    n_in = gm.num_inputs
    for i, bm in enumerate(gm.block_mappings):
        space = str(getattr(bm.transformed_block_aval, "memory_space", "default"))
        if space not in ("default", "vmem", "None"):
            continue  # ANY / HBM / SMEM: not scoped VMEM
        block = _block_shape(bm)
        array = tuple(bm.array_aval.shape)
        mode = bm.pipeline_mode
        count = vmem.buffer_count(
            steps=steps, constant_index=_constant_index(bm.index_map_jaxpr, grid,
                                                        gm.num_index_operands),
            buffered=getattr(mode, "buffer_count", None),
            whole_array=tuple(d or 1 for d in block) == array)
        name = f"in[{i}]" if i < n_in else f"out[{i - n_in}]"
        dtype = bm.array_aval.dtype.name
        moved = bool(vmem.xla_moves(array, vmem.ITEMSIZE.get(dtype)))
        out.append(vmem.Need(name, "block", block, dtype, count, moved=moved))
    for i, a in enumerate(gm.scratch_avals):
        if str(getattr(a, "memory_space", "")) == "vmem":
            # counted kept: whether the kernel keeps it is the engine's reading of
            # the body (rules/_scratch_kept.py), which this script does not do
            out.append(vmem.Need(f"scratch[{i}]", "scratch", tuple(a.shape), a.dtype.name, 1,
                                 kept=True))
    return out


# Primitives that only move or cast data; any other primitive with a non-scalar result
# is computation the compiler may spill intermediates of (the engine's rule,
# rules/_tpu._computes): such a kernel's figure is a floor.
MOVES_ONLY = {"get", "swap", "load", "store", "convert_element_type", "reshape", "squeeze",
              "broadcast_in_dim", "expand_dims", "transpose", "slice", "dynamic_slice",
              "concatenate", "copy", "copy_p", "pjit", "closed_call"}


def computes(params) -> bool:
    """The kernel's jaxpr (nested bodies too) computes on arrays that are not scalars."""
    def walk(jaxpr) -> bool:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name not in MOVES_ONLY and any(
                    getattr(getattr(v, "aval", None), "shape", ()) for v in eqn.outvars):
                return True
            for p in eqn.params.values():
                for sub in (p if isinstance(p, (list, tuple)) else [p]):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns") and walk(inner):
                        return True
        return False
    return walk(params["jaxpr"])


# ---------------------------------------------------------------- the compiler's figure

_topologies: dict = {}


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:120]


def compiled_vmem(params, avals, gen: str, layouts: bool = False) -> tuple[int | str, bool]:
    """The kernel's scoped VMEM as the executable reports it (or the error),
    and whether XLA put an operand in VMEM itself (a copy into memory space 1
    before the kernel: that operand then needs no pipeline buffer)."""
    from jax._src.pallas.pallas_call import pallas_call_p
    from jax.experimental import topologies
    from jax.experimental.layout import Format, Layout

    if gen == "chip":  # the TPU this runs on: real arrays, the layouts a call gives them
        dev = jax.devices()[0]
        args = [jnp.zeros(a.shape, a.dtype, device=dev) for a in avals]
        try:
            exe = jax.jit(lambda *xs: pallas_call_p.bind(*xs, **params)).lower(*args).compile()
        except Exception as e:  # noqa: BLE001 - reported as the row's result
            return f"error: {_first_line(e)}", False
        return _used(exe)
    if gen not in _topologies:
        _topologies[gen] = topologies.get_topology_desc(platform="tpu",
                                                        topology_name=TOPOLOGIES[gen])
    dev = _topologies[gen].devices[0]
    sharding = jax.sharding.SingleDeviceSharding(dev)

    def row_major(a):
        # Pinned row-major layouts (off by default). Left free, the compiler relayouts
        # some narrow operands into VMEM itself before the kernel (bf16[300,200], flash
        # attention with a 64-wide head), and the kernel then reports less. A v5e chip
        # (`--gen chip`: real arrays, a real call's compile) did exactly that: its
        # figures are the free ones, so the free layouts are what is compared.
        return Format(Layout(tuple(range(len(a.shape)))), sharding) if layouts else sharding

    structs = [S(a.shape, a.dtype, sharding=row_major(a)) for a in avals]
    outs = [row_major(a) for a in params["out_avals"]] if layouts else None
    try:
        with jax.default_device(dev):
            exe = jax.jit(lambda *xs: pallas_call_p.bind(*xs, **params),
                          out_shardings=outs).lower(*structs).compile()
    except Exception as e:  # noqa: BLE001 - reported as the row's result
        return f"error: {_first_line(e)}", False
    return _used(exe)


def _used(exe) -> tuple[int, bool]:
    # The kernel's own line: XLA's copies around it have figures of their own.
    text = (exe.as_text() or "").splitlines()
    lines = [ln for ln in text if 'custom_call_target="tpu_custom_call"' in ln]
    used = [int(x) for ln in lines for x in _USED.findall(ln)]
    in_vmem = any(_XLA_VMEM.search(ln) for ln in text if ln not in lines)
    return (max(used) if used else 0), in_vmem


def launches(fn, args) -> list:
    """(params, input avals) of every pallas_call `fn` binds, in order."""
    closed = jax.make_jaxpr(fn)(*args)
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                found.append((eqn.params, [v.aval for v in eqn.invars]))
                continue
            for p in eqn.params.values():
                for sub in (p if isinstance(p, (list, tuple)) else [p]):
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(closed.jaxpr)
    return found


# ---------------------------------------------------------------- our own kernels


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...].astype(o_ref.dtype)


def _add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _three_two(a_ref, b_ref, c_ref, s_ref, p_ref):
    s_ref[...] = a_ref[...] + b_ref[...] + c_ref[...]
    p_ref[...] = a_ref[...] * b_ref[...]


def _accumulate(x_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...].astype(jnp.float32)

    @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _row_sum(x_ref, o_ref):  # the output block stays resident across the grid
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def _matmul(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _dma_in(x_hbm, o_ref, buf, sem):
    cp = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * buf.shape[0], buf.shape[0])],
                               buf, sem.at[0])
    cp.start()
    cp.wait()
    o_ref[...] = buf[...] * 2


def _gather(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(block, n, dtype, out_dtype=None, imap=None, mode=None, rank_grid=1):
    """A pipelined copy over `n` blocks of rows."""
    shape = ((block[0] or 1) * n,) + tuple(block[1:])
    nd = len(block)
    imap = imap or (lambda i: (i,) + (0,) * (nd - 1))
    kw = {"pipeline_mode": mode} if mode else {}

    def f(x):
        return pl.pallas_call(_copy, out_shape=S(shape, out_dtype or dtype), grid=(n,),
                              in_specs=[pl.BlockSpec(block, imap, **kw)],
                              out_specs=pl.BlockSpec(block, imap))(x)
    return f, [S(shape, dtype)]


def whole(shape, dtype):
    """One step, the whole array as one block (odd shapes: padding)."""
    nd = len(shape)

    def f(x):
        return pl.pallas_call(_copy, out_shape=S(shape, dtype), grid=(1,),
                              in_specs=[pl.BlockSpec(shape, lambda i: (0,) * nd)],
                              out_specs=pl.BlockSpec(shape, lambda i: (0,) * nd))(x)
    return f, [S(shape, dtype)]


def bias_add(rows, cols, n, dtype, mode=None):
    """A moving block plus a block with a constant index map (weights)."""
    kw = {"pipeline_mode": mode} if mode else {}

    def f(x, b):
        return pl.pallas_call(_add, out_shape=S((rows * n, cols), dtype), grid=(n,),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i: (i, 0)),
                                        pl.BlockSpec((rows, cols), lambda i: (0, 0), **kw)],
                              out_specs=pl.BlockSpec((rows, cols), lambda i: (i, 0)))(x, b)
    return f, [S((rows * n, cols), dtype), S((rows, cols), dtype)]


def no_specs(shape, dtype, k=2):
    """No BlockSpecs, no grid: every operand whole in VMEM."""
    def f(x, y):
        return pl.pallas_call(_add, out_shape=S(shape, dtype))(x, y)
    return f, [S(shape, dtype)] * k


def whole_vmem_operand(rows, cols, n):
    """A `BlockSpec(memory_space=VMEM)` operand (whole, once) beside a moving one."""
    def f(x, y):
        return pl.pallas_call(_add, out_shape=S((rows * n, cols), F32), grid=(n,),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i: (i, 0)),
                                        pl.BlockSpec(memory_space=pltpu.VMEM)],
                              out_specs=pl.BlockSpec((rows, cols), lambda i: (i, 0)))(x, y)
    return f, [S((rows * n, cols), F32), S((rows, cols), F32)]


def accumulate(rows, cols, n, dtype, acc_dtype=F32):
    """A reduction over the grid's second axis into a VMEM scratch accumulator."""
    def f(x):
        return pl.pallas_call(_accumulate, out_shape=S((rows * 2, cols), dtype), grid=(2, n),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i, j: (i, j))],
                              out_specs=pl.BlockSpec((rows, cols), lambda i, j: (i, 0)),
                              scratch_shapes=[pltpu.VMEM((rows, cols), acc_dtype)])(x)
    return f, [S((rows * 2, cols * n), dtype)]


def row_sum(rows, cols, n, dtype):
    def f(x):
        return pl.pallas_call(_row_sum, out_shape=S((rows, cols), dtype), grid=(n,),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((rows, cols), lambda i: (0, 0)))(x)
    return f, [S((rows * n, cols), dtype)]


def three_two(rows, cols, n, dtype):
    spec = pl.BlockSpec((rows, cols), lambda i: (i, 0))

    def f(a, b, c):
        return pl.pallas_call(_three_two, out_shape=(S((rows * n, cols), dtype),) * 2,
                              grid=(n,), in_specs=[spec] * 3, out_specs=(spec, spec))(a, b, c)
    return f, [S((rows * n, cols), dtype)] * 3


def matmul(bm, bk, bn, dtype, size=2048):
    def f(x, y):
        return pl.pallas_call(
            _matmul, out_shape=S((size, size), dtype),
            grid=(size // bm, size // bn, size // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                      pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)])(x, y)
    return f, [S((size, size), dtype)] * 2


def dma_in(rows, cols, n):
    """An ANY operand copied by hand into a VMEM scratch (kept: a DMA target)."""
    def f(x):
        return pl.pallas_call(_dma_in, out_shape=S((rows * n, cols), F32), grid=(n,),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec((rows, cols), lambda i: (i, 0)),
                              scratch_shapes=[pltpu.VMEM((rows, cols), F32),
                                              pltpu.SemaphoreType.DMA((1,))])(x)
    return f, [S((rows * n, cols), F32)]


def gather(rows, cols, n):
    """PrefetchScalarGridSpec: an index map that reads a scalar-prefetch operand."""
    def f(idx, x):
        gs = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(n,),
            in_specs=[pl.BlockSpec((rows, cols), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((rows, cols), lambda i, idx: (i, 0)))
        return pl.pallas_call(_gather, out_shape=S((rows * n, cols), F32), grid_spec=gs)(idx, x)
    return f, [S((n,), I32), S((rows * n, cols), F32)]


def two_d_grid(rows, cols, n, m):
    """Grid (n, m), a block that moves only along the first axis."""
    def f(x):
        return pl.pallas_call(_copy, out_shape=S((rows * n, cols), F32), grid=(n, m),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i, j: (i, 0))],
                              out_specs=pl.BlockSpec((rows, cols), lambda i, j: (i, 0)))(x)
    return f, [S((rows * n, cols), F32)]


def raised_limit(rows, cols, n):
    """Over the default limit, compiled with `vmem_limit_bytes` raised."""
    def f(x):
        return pl.pallas_call(_copy, out_shape=S((rows * n, cols), F32), grid=(n,),
                              in_specs=[pl.BlockSpec((rows, cols), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((rows, cols), lambda i: (i, 0)),
                              compiler_params=pltpu.CompilerParams(
                                  vmem_limit_bytes=100 * 1024 * 1024))(x)
    return f, [S((rows * n, cols), F32)]


def window(array, block, imap, grid, dtype, mode=None):
    """A copy of `array` through one block shape (squeezed dims, few rows)."""
    kw = {"pipeline_mode": mode} if mode else {}

    def f(x):
        return pl.pallas_call(_copy, out_shape=S(array, dtype), grid=grid,
                              in_specs=[pl.BlockSpec(block, imap, **kw)],
                              out_specs=pl.BlockSpec(block, imap))(x)
    return f, [S(array, dtype)]


def _carry(x_ref, o_ref, s_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        s_ref[...] = jnp.zeros_like(s_ref)

    s_ref[...] += x_ref[...]
    o_ref[...] = s_ref[...]


def small_scratch(n):
    """One-row f32 blocks and a one-row scratch carried across the grid."""
    def f(x):
        return pl.pallas_call(_carry, out_shape=S((n, 1, 128), F32), grid=(n,),
                              in_specs=[pl.BlockSpec((1, 1, 128), lambda i: (i, 0, 0))],
                              out_specs=pl.BlockSpec((1, 1, 128), lambda i: (i, 0, 0)),
                              scratch_shapes=[pltpu.VMEM((1, 1, 128), F32)])(x)
    return f, [S((n, 1, 128), F32)]


OWN = {
    "copy f32 (8,128) x4": lambda: copy((8, 128), 4, F32),
    "copy f32 (256,512) x4": lambda: copy((256, 512), 4, F32),
    "copy f32 (512,1024) x4": lambda: copy((512, 1024), 4, F32),
    "copy f32 (24,384) x8": lambda: copy((24, 384), 8, F32),
    "copy f32 (8,1000) x4 (lanes padded)": lambda: copy((8, 1000), 4, F32),
    "copy bf16 (16,256) x4": lambda: copy((16, 256), 4, BF16),
    "copy bf16 (24,256) x4": lambda: copy((24, 256), 4, BF16),
    "copy bf16 (512,512) x4": lambda: copy((512, 512), 4, BF16),
    "copy int8 (32,128) x4": lambda: copy((32, 128), 4, I8),
    "copy int8 (256,512) x4": lambda: copy((256, 512), 4, I8),
    "copy int32 (64,384) x2": lambda: copy((64, 384), 2, I32),
    "copy f32->bf16 (128,256) x4": lambda: copy((128, 256), 4, F32, BF16),
    "copy 1-D f32 (1024,) x4": lambda: copy((1024,), 4, F32),
    "copy 3-D f32 (None,256,128) x4": lambda: copy((None, 256, 128), 4, F32,
                                                   imap=lambda i: (i, 0, 0)),
    "copy 3-D bf16 (2,64,256) x4": lambda: copy((2, 64, 256), 4, BF16),
    "copy f32 Buffered(1) (256,512) x4": lambda: copy((256, 512), 4, F32, mode=pl.Buffered(1)),
    "copy f32 Buffered(2) (256,512) x4": lambda: copy((256, 512), 4, F32, mode=pl.Buffered(2)),
    "whole f32 (200,300)": lambda: whole((200, 300), F32),
    "whole bf16 (12,100)": lambda: whole((12, 100), BF16),
    "whole int8 (33,130)": lambda: whole((33, 130), I8),
    "whole f32 (5,1000)": lambda: whole((5, 1000), F32),
    "whole f32 (4,8,128)": lambda: whole((4, 8, 128), F32),
    "bias add f32, constant index map": lambda: bias_add(256, 512, 4, F32),
    "bias add bf16, constant + Buffered(1)": lambda: bias_add(256, 512, 4, BF16,
                                                              mode=pl.Buffered(1)),
    "no BlockSpecs f32 (64,512)": lambda: no_specs((64, 512), F32),
    "no BlockSpecs bf16 (300,200)": lambda: no_specs((300, 200), BF16),
    "BlockSpec(memory_space=VMEM) operand": lambda: whole_vmem_operand(64, 512, 4),
    "accumulate f32 scratch (128,512)": lambda: accumulate(128, 512, 4, F32),
    "accumulate bf16 in, f32 scratch (256,256)": lambda: accumulate(256, 256, 4, BF16),
    "row sum, resident output": lambda: row_sum(128, 512, 8, F32),
    "3 in / 2 out f32 (128,256)": lambda: three_two(128, 256, 4, F32),
    "3 in / 2 out bf16 (64,512)": lambda: three_two(64, 512, 4, BF16),
    "ANY operand DMA'd into VMEM scratch": lambda: dma_in(256, 512, 4),
    "scalar prefetch gather": lambda: gather(64, 256, 8),
    "grid (4,3), block moves on axis 0": lambda: two_d_grid(128, 256, 4, 3),
    "grid (1,4), block moves on axis 0 (constant)": lambda: two_d_grid(128, 256, 1, 4),
    "vmem_limit_bytes raised, 24 MiB blocks": lambda: raised_limit(1536, 1024, 4),
    "squeezed rows f32 (None,1,None,128)": lambda: window(
        (2, 16, 1, 128), (None, 1, None, 128), lambda i: (0, i, 0, 0), (16,), F32),
    "squeezed rows bf16 (4,None,128)": lambda: window(
        (16, 1, 128), (4, None, 128), lambda i: (i, 0, 0), (4,), BF16),
    "one row f32 (4,1,256)": lambda: window((16, 1, 256), (4, 1, 256), lambda i: (i, 0, 0),
                                           (4,), F32),
    "two rows int8 (4,2,128)": lambda: window((16, 2, 128), (4, 2, 128), lambda i: (i, 0, 0),
                                             (4,), I8),
    "whole f32 (1,1024)": lambda: whole((1, 1024), F32),
    "whole bf16 (2,1024)": lambda: whole((2, 1024), BF16),
    "1-D f32 (128,) x4, 1 KiB a block": lambda: window((512,), (128,), lambda i: (i,), (4,), F32),
    "Buffered(1) f32 (1,1,128), 1 KiB a block": lambda: window(
        (4, 1, 128), (1, 1, 128), lambda i: (i, 0, 0), (4,), F32, mode=pl.Buffered(1)),
    "one-row scratch carried, no minimum": lambda: small_scratch(4),
    "matmul f32 128^3": lambda: matmul(128, 128, 128, F32),
    "matmul f32 512x256x512": lambda: matmul(512, 256, 512, F32),
    "matmul bf16 256^3": lambda: matmul(256, 256, 256, BF16),
    "matmul bf16 1024x256x256": lambda: matmul(1024, 256, 256, BF16),
    "matmul bf16 512^3": lambda: matmul(512, 512, 512, BF16),
}


# ---------------------------------------------------------------- third-party kernels


def _jax_ops():
    """jax's own TPU kernels (jax/experimental/pallas/ops/tpu), called with
    concrete shapes through their public wrappers."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    from jax.experimental.pallas.ops.tpu import matmul as mm
    from jax.experimental.pallas.ops.tpu.megablox.gmm import gmm

    cases = {}

    def flash(b, h, s, d, dtype, bs, causal=False):
        blocks = fa.BlockSizes(block_q=bs, block_k_major=bs, block_k=bs, block_b=1,
                               block_q_major_dkv=bs, block_k_major_dkv=bs, block_k_dkv=bs,
                               block_q_dkv=bs, block_k_major_dq=bs, block_k_dq=bs, block_q_dq=bs)
        q = S((b, h, s, d), dtype)

        def fwd(q, k, v):
            return fa.flash_attention(q, k, v, causal=causal, block_sizes=blocks)

        def bwd(q, k, v):
            return jax.grad(lambda *a: fwd(*a).astype(jnp.float32).sum(), argnums=(0, 1, 2))(
                q, k, v)
        return fwd, bwd, [q, q, q]

    for (b, h, s, d, dtype, bs, causal) in [(1, 2, 1024, 128, BF16, 256, False),
                                            (2, 4, 2048, 128, F32, 512, True),
                                            (1, 8, 512, 64, BF16, 128, False)]:
        fwd, bwd, args = flash(b, h, s, d, dtype, bs, causal)
        tag = f"jax flash_attention {jnp.dtype(dtype).name} s{s} d{d} blk{bs}"
        cases[tag + " fwd"] = (lambda fwd=fwd, args=args: (fwd, args))
        cases[tag + " bwd"] = (lambda bwd=bwd, args=args: (bwd, args))
    for (m, k, n, dtype, blk) in [(1024, 1024, 1024, F32, (256, 256)),
                                  (2048, 512, 2048, BF16, (512, 512))]:
        cases[f"jax matmul {jnp.dtype(dtype).name} {m}x{k}x{n} blk{blk}"] = (
            lambda m=m, k=k, n=n, dtype=dtype, blk=blk:
            (lambda x, y: mm.matmul(x, y, block_shape=blk), [S((m, k), dtype), S((k, n), dtype)]))
    for (m, k, n, g, dtype, tiling) in [(512, 256, 512, 4, BF16, (128, 128, 128)),
                                        (1024, 512, 256, 8, F32, (256, 256, 128))]:
        def gmm_case(m=m, k=k, n=n, g=g, dtype=dtype, tiling=tiling):
            def f(lhs, rhs, sizes):
                return gmm(lhs, rhs, sizes, tiling=tiling)
            return f, [S((m, k), dtype), S((g, k, n), dtype), S((g,), jnp.int32)]
        cases[f"jax megablox gmm {jnp.dtype(dtype).name} {m}x{k}x{n} g{g}"] = gmm_case
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as pa

    for (b, hq, hkv, d, pages, page, per_seq, per_block, dtype) in [
            (4, 8, 2, 128, 64, 16, 8, 4, BF16), (2, 16, 16, 128, 128, 32, 16, 8, F32)]:
        def paged(b=b, hq=hq, hkv=hkv, d=d, pages=pages, page=page, per_seq=per_seq,
                  per_block=per_block, dtype=dtype):
            def f(q, k, v, lengths, idx):
                return pa.paged_attention(q, k, v, lengths, idx,
                                          pages_per_compute_block=per_block)
            kv = S((hkv, pages, page, d), dtype)
            return f, [S((b, hq, d), dtype), kv, kv, S((b,), jnp.int32),
                       S((b, per_seq), jnp.int32)]
        cases[f"jax paged_attention {jnp.dtype(dtype).name} b{b} hq{hq} hkv{hkv} "
              f"page{page} blk{per_block}"] = paged
    return cases


TP_CACHE = Path(os.environ.get("PALLAS_LSP_TP_CACHE", "/work/tp_cache"))


def _load(rel: str):
    """A third-party kernel module read in place (never copied into this repo)."""
    import importlib.util

    path = TP_CACHE / rel
    spec = importlib.util.spec_from_file_location("tp_" + path.stem + str(abs(hash(rel))), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _third_party():
    """Kernels of other projects (/work/tp_cache) whose files import only jax,
    called through their own entry points with concrete shapes; and jax's
    random-bits kernels. Left out when the cache is not there."""
    cases = {}
    if not TP_CACHE.is_dir():
        return cases
    topk = "tokamax/tokamax/_src/ops/router_topk/pallas_mosaic_tpu_kernel.py"
    for rows, experts, k in [(1024, 64, 8), (4096, 256, 8)]:
        cases[f"tokamax router_topk f32 {rows}x{experts} top{k}"] = (
            lambda rows=rows, experts=experts, k=k: (
                lambda x: _load(topk).select(x, k), [S((rows, experts), F32)]))
    post = "tpu_inference/tpu_inference/kernels/experimental/deepseek_v4/mhc/post_kernel.py"
    for tokens, hidden, hc, tb in [(256, 1024, 4, 64), (512, 2048, 4, 32)]:
        cases[f"tpu_inference mhc_post bf16 t{tokens} h{hidden} hc{hc} tb{tb}"] = (
            lambda tokens=tokens, hidden=hidden, hc=hc, tb=tb: (
                lambda x, r, p, c: _load(post).mhc_post_2d(x, r, p, c, token_block_size=tb),
                [S((tokens, hidden), BF16), S((tokens, hc * hidden), BF16),
                 S((tokens, hc, 1), F32), S((tokens, hc, hc), F32)]))
    tri = "tpu_inference/tpu_inference/kernels/gdn/triangle_solver.py"
    for n, d, blk in [(256, 64, 64), (128, 128, 32)]:
        cases[f"tpu_inference newton_schulz_inverse f32 {n}x{d}x{d} blk{blk}"] = (
            lambda n=n, d=d, blk=blk: (
                lambda a: _load(tri).newton_schulz_inverse_pallas(a, block_size=blk),
                [S((n, d, d), F32)]))
        cases[f"tpu_inference triangular_inverse f32 {n}x{d}x{d} blk{blk}"] = (
            lambda n=n, d=d, blk=blk: (
                lambda a: _load(tri).decompose_triangular_matrix_inverse_pallas(
                    a, n_block_size=blk), [S((n, d, d), F32)]))
    from jax.experimental.pallas.ops.tpu.random import philox, threefry

    for shape, blk in [((256, 512), (128, 256)), ((1024, 1024), (256, 512))]:
        cases[f"jax philox bits {shape} blk{blk}"] = (
            lambda shape=shape, blk=blk: (
                lambda key: philox.philox_4x32_kernel(key, shape, shape, blk),
                [S((2,), jnp.uint32)]))
        cases[f"jax threefry bits {shape} blk{blk}"] = (
            lambda shape=shape, blk=blk: (
                lambda key: threefry.threefry_2x32_count(key, shape, shape, blk),
                [S((2,), jnp.uint32)]))
    return cases


# ---------------------------------------------------------------- report


def measure(cases: dict, gens) -> list[dict]:
    rows = []
    for name, make in cases.items():
        try:
            fn, args = make()
            found = launches(fn, args)
        except Exception as e:  # noqa: BLE001
            rows.append({"case": name, "error": f"trace: {_first_line(e)}"})
            print(f"| {name} | trace: {_first_line(e)} |", flush=True)
            continue
        for k, (params, avals) in enumerate(found):
            try:
                est = vmem.estimate(needs(params))
            except Exception as e:  # noqa: BLE001 - a jax structure the script does not read
                rows.append({"case": name, "error": f"model input: {_first_line(e)}"})
                print(f"| {name} | model input: {_first_line(e)} |", flush=True)
                continue
            row = {"case": name + (f" #{k + 1}" if len(found) > 1 else ""),
                   "kernel": str(params.get("name") or ""), "estimate": est.total,
                   "low": est.floor, "floor": computes(params),
                   "group": "own" if name in OWN else "third-party"}
            for gen in gens:
                row[gen], in_vmem = compiled_vmem(params, avals, gen)
                row["xla_vmem_operand"] = row.get("xla_vmem_operand", False) or in_vmem
            rows.append(row)
            print(_line(row, gens), flush=True)
    return rows


def _ratio(row, gen):
    used = row.get(gen)
    return row["estimate"] / used if isinstance(used, int) and used else None


def verdict(row, gen) -> str | None:
    """How the model's figure compares with the compiler's: `within` 5 %
    (a point), `in range` (a range, for an operand XLA may move, that holds
    the figure, 5 % either side), `floor held` (a kernel that computes: the
    figure is a floor, stated so, and the compiler needs more), `under`
    (a point below 90 %), `short` (a point under by 5-10 %), `over` (above by
    more than 5 %); None when the compiler refused."""
    used = row.get(gen)
    if not isinstance(used, int):
        return None
    hi, lo = row["estimate"], row.get("low", row["estimate"])
    if lo < hi:
        if lo * 0.95 <= used <= hi * 1.05:
            return "in range"
    elif abs(hi - used) <= 0.05 * used:
        return "within"
    if row.get("floor") and lo <= used:
        return "floor held"
    if hi < 0.9 * used:
        return "under"
    return "short" if hi < used else "over"


def _line(row, gens) -> str:
    est = f"{row['estimate']:,}"
    if row.get("low", row["estimate"]) < row["estimate"]:
        est = f"{row['low']:,} to {est}"
    cells = [row["case"] + (" (a)" if row.get("xla_vmem_operand") else ""), est]
    for gen in gens:
        used, r = row.get(gen), _ratio(row, gen)
        cells += [f"{used:,}" if isinstance(used, int) else str(used),
                  (f"{100 * (r - 1):+.1f} %" if r is not None else "-")
                  + {"in range": " (range)", "floor held": " (floor)"}.get(
                      verdict(row, gen) or "", "")]
    return "| " + " | ".join(cells) + " |"


def summary(rows, gens) -> list[str]:
    """Per generation and group: a point figure counts when within 5 % of the
    compiler's; a range (operands XLA may move) counts apart, when it holds
    the compiler's figure. A figure of 0 counts (the old ratio skipped it)."""
    out = []
    for gen in gens:
        for label, keep in (("all", lambda row: True),
                            ("own", lambda row: row.get("group") == "own"),
                            ("third-party", lambda row: row.get("group") == "third-party")):
            mine = [row for row in rows if keep(row) and "estimate" in row]
            kinds = [verdict(row, gen) for row in mine]
            n = sum(k is not None for k in kinds)
            if not n:
                continue
            within, ranged = kinds.count("within"), kinds.count("in range")
            points = sum(1 for row, k in zip(mine, kinds)
                         if k is not None and row.get("low", row["estimate"]) == row["estimate"])
            errs = sorted(abs(r - 1) for r in (_ratio(row, gen) for row in mine) if r is not None)
            floors = kinds.count("floor held")
            out.append(f"{gen}, {label}: {n} launches (+{kinds.count(None)} the compiler "
                       f"refused); within 5 %: {within} ({100 * within / n:.0f} %); a range "
                       f"holding the figure: {ranged} of {n - points}; within or in range: "
                       f"{within + ranged} "
                       f"({100 * (within + ranged) / n:.0f} %); a stated floor the compiler "
                       f"exceeds (spills): {floors}; a point below 90 % of the compiler: "
                       f"{kinds.count('under')}; over by more than 5 %: {kinds.count('over')}; "
                       f"median |error| of the top {100 * statistics.median(errs):.1f} %")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gen", action="append", choices=sorted(TOPOLOGIES) + ["chip"],
                    help="a generation to compile for without a TPU, or `chip`: the TPU "
                         "this runs on, with real arrays (checks the pinned layouts)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--only", help="cases whose name contains this")
    args = ap.parse_args(argv)
    gens = args.gen or ["v5e"]
    cases = dict(OWN, **_jax_ops(), **_third_party())
    if args.only:
        cases = {k: v for k, v in cases.items() if args.only in k}
    head = ["case", "estimate"] + [c for g in gens for c in (f"{g} compiler", f"{g} error")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows = measure(cases, gens)
    print()
    for line in summary(rows, gens):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
