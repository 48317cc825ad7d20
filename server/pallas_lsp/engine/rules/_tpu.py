"""What the TPU-only rules (PAL401-PAL404) share: the TPU launches, their
specs paired with the source, and the scoped VMEM estimate.

Every number here is a lower bound or exact: an unknown block shape makes a
buffer unknown (never guessed), an unknown dtype counts half a byte an
element (the smallest TPU dtype, int4), an unknown grid counts one buffer.
"""
from __future__ import annotations

import ast

from pallas_lsp.engine.backend import SPARSECORE
from pallas_lsp.engine.events import Launch
from pallas_lsp.engine.model import Const, Seq, Space
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.tpu import DEFAULT_GENERATIONS, DEFAULT_SCOPED_VMEM, fmt_bytes  # noqa: F401
from pallas_lsp.engine.values import ShapeDtype, Spec

ITEMSIZE = {"float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
            "uint16": 2, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
            "bool": 4, "float64": 8, "int64": 8}  # bool blocks are int32 in VMEM
BLOCK_SPACES = (None, Space.VMEM)


def tpu_launches(events) -> list[Launch]:
    """TensorCore launches: a SparseCore has its own lowering (it sorts, scans,
    adds by DMA and tiles differently), so these rules do not judge it."""
    return [la for la in events.launches if la.api == "pallas_call" and la.backend == "tpu"
            and la.core != SPARSECORE and la.node is not None]


def tpu_kernel_ids(events) -> set[int]:
    return {la.kernel_id for la in events.launches
            if la.backend == "tpu" and la.core != SPARSECORE and la.kernel_id}


def items(v) -> list | None:
    """The top-level entries of a specs / out_shape / scratch value."""
    if isinstance(v, Seq) and v.keys is None:
        return list(v.items)
    if isinstance(v, (Spec, ShapeDtype)):
        return [v]
    return None


def known_shape(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


# ---------------------------------------------------------------- source


def _keyword(call: ast.AST, name: str) -> ast.AST | None:
    if not isinstance(call, ast.Call):
        return None
    for k in call.keywords:
        if k.arg == name:
            return k.value
    for k in call.keywords:  # grid_spec=pltpu.PrefetchScalarGridSpec(..., in_specs=...)
        if k.arg == "grid_spec" and isinstance(k.value, ast.Call):
            found = _keyword(k.value, name)
            if found is not None:
                return found
    return None


def spec_node(launch: Launch, key: str, index: int) -> ast.AST:
    """The source of entry `index` of `in_specs` / `out_specs` (the list
    element when it is a literal list, else the keyword's value, else the
    pallas_call)."""
    node = _keyword(launch.node, key)
    if node is None:
        return launch.node
    if isinstance(node, (ast.List, ast.Tuple)):
        if 0 <= index < len(node.elts) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return node.elts[index]
        return node
    return node


def _int_expr(node: ast.AST) -> int | None:
    """A literal integer expression (`48 * 1024 * 1024`, `1 << 25`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp):
        a, b = _int_expr(node.left), _int_expr(node.right)
        if a is None or b is None:
            return None
        op = type(node.op)
        if op is ast.Mult:
            return a * b
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.LShift and 0 <= b < 64:
            return a << b
        if op is ast.FloorDiv and b:
            return a // b
    return None


_MISSING = object()


def vmem_limit(launch: Launch):
    """`vmem_limit_bytes` when the call sets it with a literal; None when it
    does not set it (the default applies); _MISSING when it cannot be told."""
    cp = _keyword(launch.node, "compiler_params")
    if cp is None or (isinstance(cp, ast.Constant) and cp.value is None):
        return None
    if isinstance(cp, ast.Call) and (getattr(cp.func, "attr", None) or
                                     getattr(cp.func, "id", None)) in ("CompilerParams",
                                                                       "TPUCompilerParams"):
        if any(k.arg is None for k in cp.keywords):
            return _MISSING  # **kwargs
        for k in cp.keywords:
            if k.arg == "vmem_limit_bytes":
                value = _int_expr(k.value)
                return value if value is not None else _MISSING
        return None
    return _MISSING


# ---------------------------------------------------------------- VMEM


@frozen
class Buffer:
    label: str  # "in_specs[0]", "out_specs", "scratch[1]"
    shape: tuple
    dtype: str | None
    bytes: int  # one buffer, padded (a lower bound when dtype is None)
    count: int  # 2 when double-buffered
    counted: bool  # in the scoped limit (blocks) or not (scratch)


@frozen
class VmemEstimate:
    buffers: tuple[Buffer, ...]
    total: int  # what counts against the scoped limit
    exact: bool  # every dtype known and every block counted
    limits: dict  # generation -> limit in bytes
    set_limit: int | None  # vmem_limit_bytes, when given


def _padded(shape: tuple, dtype: str | None) -> int:
    dims = list(shape) or [1]
    if len(dims) >= 1:
        dims[-1] = -(-dims[-1] // 128) * 128
    if len(dims) >= 2:
        dims[-2] = -(-dims[-2] // 8) * 8
    n = 1
    for d in dims:
        n *= d
    size = ITEMSIZE.get(dtype or "")
    return n * size if size else n // 2


def _grid_steps(launch: Launch) -> int | None:
    g = launch.grid
    if isinstance(g, Const) and isinstance(g.value, int):
        return g.value
    if isinstance(g, Seq) and g.keys is None:
        n = 1
        for d in g.items:
            if not (isinstance(d, Const) and isinstance(d.value, int)):
                return None
            n *= d.value
        return n
    return None


def _buffers_of(node: ast.AST) -> int | None:
    """A literal BlockSpec's buffer count: None unless it is a plain
    `BlockSpec(...)` call without `pipeline_mode`."""
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
            == "BlockSpec" and not any(k.arg in ("pipeline_mode", None) for k in node.keywords):
        return 2
    return None


def vmem_estimate(launch: Launch) -> VmemEstimate | None:
    """The scoped VMEM of a TPU pallas_call, or None when a VMEM block's shape
    is unknown."""
    ins, outs = items(launch.in_specs), items(launch.out_specs)
    shapes = items(launch.out_shape)
    whole_inputs = ins is None and _keyword(launch.node, "in_specs") is None
    if whole_inputs:
        ins = []  # no in_specs: each input is one whole-array block, of a shape not known here
    if outs is None and _keyword(launch.node, "out_specs") is None and shapes is not None:
        outs = [Spec() for _ in shapes]  # no out_specs: whole `out_shape` blocks
    if ins is None or outs is None:
        return None
    steps = _grid_steps(launch)
    if steps is None and _keyword(launch.node, "grid") is None \
            and _keyword(launch.node, "grid_spec") is None:
        steps = 1  # no grid: one step
    buffers: list[Buffer] = []
    exact = steps is not None and not whole_inputs
    for key, specs in (("in_specs", ins), ("out_specs", outs)):
        for i, spec in enumerate(specs):
            if spec is None or (isinstance(spec, Const) and spec.value is None):
                continue
            if not isinstance(spec, Spec):
                return None
            if spec.space not in BLOCK_SPACES:
                continue
            block = spec.block_shape
            dtype = array = None
            if key == "out_specs" and shapes is not None and len(shapes) == len(outs) \
                    and isinstance(shapes[i], ShapeDtype):
                dtype, array = shapes[i].dtype, shapes[i].shape
                if block is None:
                    block = array
            if block is None:
                return None  # the whole array, of a shape we may not know
            block = tuple(1 if d is None else d for d in block)  # squeezed dims
            if not known_shape(block):
                return None
            node = spec_node(launch, key, i)
            # Measured: a block that is the whole array has one buffer, any other
            # block two once the grid has several steps. An input's array shape is
            # not known here: one buffer (a lower bound).
            count = 1
            if steps is not None and steps > 1:
                whole = known_shape(array) and tuple(array) == block
                if array is None or not known_shape(array):
                    exact = False
                elif not whole:
                    count = _buffers_of(node) or 1
                    exact = exact and count == 2
            if dtype is None:
                exact = False
            label = f"{key}[{i}]" if len(specs) > 1 or key == "in_specs" else key
            buffers.append(Buffer(label, block, dtype, _padded(block, dtype), count, True))
    for i, alloc in enumerate(items(launch.scratch) or []):
        shape, dtype = getattr(alloc, "shape", None), getattr(alloc, "dtype", None)
        space = getattr(alloc, "space", None)
        if space == Space.VMEM and known_shape(shape):
            # Not counted (a lower bound): the compiler keeps a DMA's destination but
            # removes a buffer that is written and read back within a step (measured).
            buffers.append(Buffer(f"scratch[{i}]", tuple(shape), dtype, _padded(tuple(shape), dtype),
                                  1, False))
            exact = False
    total = sum(b.bytes * b.count for b in buffers if b.counted)
    limit = vmem_limit(launch)
    if limit is _MISSING:
        limits, set_limit = {}, None
    elif limit is None:
        limits, set_limit = dict(DEFAULT_SCOPED_VMEM), None
    else:
        limits, set_limit = {g: limit for g in DEFAULT_SCOPED_VMEM}, limit
    return VmemEstimate(tuple(buffers), total, exact, limits, set_limit)


def over_everywhere(est: VmemEstimate, gens=DEFAULT_GENERATIONS) -> bool:
    return bool(est.limits) and all(g in est.limits and est.total > est.limits[g] for g in gens)



def hover_rows(events, span_of) -> list:
    """(span of each TPU pallas_call's name, markdown of its VMEM estimate),
    for the hover."""
    from pallas_lsp.engine.tpu import GENERATIONS

    out = []
    for launch in tpu_launches(events):
        est = vmem_estimate(launch)
        if est is None:
            continue
        node = launch.node.func if isinstance(launch.node, ast.Call) else launch.node
        lines = ["**Scoped VMEM estimate** (pallas-lsp; blocks padded to (8, 128) tiles)", "",
                 "| buffer | block | dtype | bytes | copies |", "|---|---|---|---|---|"]
        for b in est.buffers:
            size = fmt_bytes(b.bytes) if b.dtype else f"≥ {fmt_bytes(b.bytes)}"
            copies = str(b.count) if b.counted else "scratch: not counted (the compiler may drop it)"
            lines.append(f"| `{b.label}` | {tuple(b.shape)} | {b.dtype or '?'} | {size} | {copies} |")
        at_least = "" if est.exact else "≥ "
        lines.append("")
        if est.limits:
            limits = ", ".join(f"{g} {fmt_bytes(est.limits[g])}" for g in GENERATIONS
                               if g in est.limits)
            origin = "vmem_limit_bytes" if est.set_limit else "default scoped limits"
            over = [g for g in GENERATIONS if g in est.limits and est.total > est.limits[g]]
            lines.append(f"Total {at_least}{fmt_bytes(est.total)}; {origin}: {limits}"
                         + (f"; over on {', '.join(over)}" if over else "") + ".")
        else:
            lines.append(f"Total {at_least}{fmt_bytes(est.total)}; the limit "
                         "(`vmem_limit_bytes`) is not known.")
        if not est.exact:
            lines.append("(≥: an input's dtype or shape, the grid, or whether the compiler keeps "
                         "a scratch buffer is not known here; `pallas-lsp run --compile` reports "
                         "the compiler's number.)")
        out.append((span_of(node), "\n".join(lines)))
    return out
