"""What the TPU-only rules (PAL401-PAL404) share: the TPU launches, their
specs paired with the source, and each launch's scoped VMEM as engine/vmem.py
counts it (`launch_vmem`).

What the engine does not know is never guessed: an unknown dtype, shape or
buffer count makes its part a floor (engine/vmem.py) and the total a lower
bound.
"""
from __future__ import annotations

import ast

from pallas_lsp.engine import backend
from pallas_lsp.engine.backend import SPARSECORE
from pallas_lsp.engine.events import Launch
from pallas_lsp.engine.model import Array, Const, Ref, Related, Seq, Space
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.tpu import DEFAULT_SCOPED_VMEM, GENERATIONS, fmt_bytes
from pallas_lsp.engine import vmem
from pallas_lsp.engine.rules._scratch_kept import kept_scratch
from pallas_lsp.engine.values import ShapeDtype, Spec

BLOCK_SPACES = (None, Space.VMEM)


def tpu_launches(events) -> list[Launch]:
    """TensorCore launches: a SparseCore has its own lowering (it sorts, scans,
    adds by DMA and tiles differently), so these rules do not judge it. A
    launch run before its operands were seen is left out where the same
    call with the same specs ran again with them (it knows less)."""
    out = [la for la in events.launches if la.api == "pallas_call" and la.backend == "tpu"
           and la.core != SPARSECORE and la.node is not None]
    seen = {_config(la) for la in out if la.operands is not None}
    return [la for la in out if la.operands is not None or _config(la) not in seen] \
        if seen else out


def _config(la: Launch):
    return (id(la.node), _key(la.in_specs), _key(la.out_specs), _key(la.out_shape),
            _key(la.grid), _key(la.scratch))


def _key(v):
    try:
        hash(v)
    except TypeError:
        return id(v)
    return v


def judged_launches(ctx) -> list[Launch]:
    """The TPU launches a compile rule may judge: those that say they are for a
    TPU. A kernel whose launch, kernel file and launching file never name one
    (no pltpu, no TPU compiler params, not the word) is as likely written for
    a GPU, where these rules do not hold; the trace-time rules still judge it."""
    return [la for la in tpu_launches(ctx.events) if _says_tpu(ctx, la)]


def judged_kernel_ids(ctx, *, sparsecore: bool = False) -> set[int]:
    """The kernels of TensorCore launches that say they are for a TPU (with
    `sparsecore`, SparseCore ones too: for checks of an op both lowerings
    emit, proven on both)."""
    return {la.kernel_id for la in ctx.events.launches
            if la.backend == "tpu" and (sparsecore or la.core != SPARSECORE) and la.kernel_id
            and _says_tpu(ctx, la)}


def _says_tpu(ctx, launch: Launch) -> bool:
    if backend.of_value(launch.compiler_params) == backend.TPU:
        return True
    for node in (launch.node, launch.kernel_node):
        if node is not None and _source_names_tpu(ctx.source_of(node)):
            return True
    return False


def _source_names_tpu(src) -> bool:
    if src.says_tpu is None:
        src.says_tpu = backend.names_tpu(src.text)
    return src.says_tpu


def items(v) -> list | None:
    """The top-level entries of a specs / out_shape / scratch value."""
    if isinstance(v, Seq) and v.keys is None:
        return list(v.items)
    if isinstance(v, (Spec, ShapeDtype)):
        return [v]
    return None


def known_shape(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


# ---------------------------------------------------------------- operands


def input_arrays(launch: Launch, n: int) -> list:
    """What the call passed for each of the `n` in_specs entries: a
    ShapeDtype where the array is known, else None. The scalar-prefetch
    operands come first, so the inputs are the call's last `n`."""
    ops = launch.operands
    if ops is None or len(ops) < n:
        return [None] * n
    return list(ops[len(ops) - n:])


def operand_name(launch: Launch, index: int, n: int, text) -> str:
    """The source text of the call's argument for in_specs[index]."""
    nodes = launch.operand_nodes
    j = len(nodes) - n + index
    node = nodes[j] if 0 <= j < len(nodes) else None
    return text(node) if node is not None else f"input #{index}"


def array_text(sd) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in sd.shape) if sd.shape is not None \
        else "?"
    return f"{sd.dtype or '?'}[{dims}]"


def caller_related(ctx, launch: Launch, sd, name: str) -> tuple:
    """Where the array that decides a finding was made, and in which test
    case (parametrize variant) the launch ran with it."""
    decl = getattr(sd, "decl", None)
    if decl is None:
        return ()
    case = f" ({launch.variant})" if launch.variant else ""
    return (Related(ctx.span(decl), f"{name}: {array_text(sd)} is made here{case}"),)


def kernel_caller(ctx, kernel_id: int, dtypes) -> tuple:
    """Related information for a finding in a kernel that is about a dtype:
    the array of that dtype a launch of the kernel was given, where it was
    made and in which test case."""
    for la in ctx.events.launches:
        if la.kernel_id != kernel_id or not la.operands:
            continue
        for j, sd in enumerate(la.operands):
            if sd is not None and sd.dtype in dtypes and sd.decl is not None:
                node = la.operand_nodes[j] if j < len(la.operand_nodes) else None
                name = ctx.text(node) if node is not None else f"operand #{j}"
                return caller_related(ctx, la, sd, name)
    return ()


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
class LaunchVmem:
    launch: Launch
    estimate: vmem.Estimate
    limits: dict  # generation -> limit in bytes ({} when `vmem_limit_bytes` cannot be told)
    set_limit: int | None  # vmem_limit_bytes, when given
    # The kernel computes (a dot, exp, reduction, sort...): the compiler may add
    # VMEM for intermediates it spills, which is not modelled, so the figure is a floor.
    computes: bool = False

    def total_text(self, at_least: str = "≥ ") -> str:
        """The total in words: a range where XLA may move an operand, else
        marked `at_least` where parts are unknown or spills are not counted."""
        est = self.estimate
        if est.ranged:
            return f"{fmt_bytes(est.floor)} to {fmt_bytes(est.total)}"
        return f"{at_least if self.computes or not est.exact else ''}{fmt_bytes(est.total)}"

    def over(self, gens=GENERATIONS) -> list[str]:
        """The generations of `gens` whose limit the estimate exceeds."""
        return [g for g in gens if g in self.limits and self.estimate.total > self.limits[g]]

    def surely_over(self, gens) -> bool:
        """Over the limit of every generation in `gens`, even at its floor."""
        return bool(gens) and all(g in self.limits and self.estimate.floor > self.limits[g]
                                  for g in gens)


def _grid_dims(launch: Launch) -> list[int | None] | None:
    """The grid's dimensions ([] for no grid; None when it cannot be told)."""
    g = launch.grid
    if isinstance(g, Const) and isinstance(g.value, int):
        return [g.value]
    if isinstance(g, Seq) and g.keys is None:
        return [d.value if isinstance(d, Const) and isinstance(d.value, int) else None
                for d in g.items]
    if g is None or (isinstance(g, Const) and g.value is None) or (
            _keyword(launch.node, "grid") is None and _keyword(launch.node, "grid_spec") is None):
        return []
    return None


def _call_name(node) -> str:
    f = getattr(node, "func", None)
    return getattr(f, "attr", None) or getattr(f, "id", None) or ""


def _arg(call: ast.Call, index: int, name: str):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return call.args[index] if len(call.args) > index else None


def _constant_index(decl, dims: list | None) -> bool | None:
    """Whether a BlockSpec's index map returns the same block at every grid
    step: no index map, or a lambda that uses no grid index whose dimension
    is above one. None when it cannot be told."""
    if not (isinstance(decl, ast.Call) and _call_name(decl) == "BlockSpec"):
        return None
    if any(k.arg is None for k in decl.keywords):
        return None
    imap = _arg(decl, 1, "index_map")
    if imap is None or (isinstance(imap, ast.Constant) and imap.value is None):
        return True
    if not isinstance(imap, ast.Lambda) or dims is None:
        return None
    a = imap.args
    params = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg or a.kwarg or a.kwonlyargs:
        return None
    used = {n.id for n in ast.walk(imap.body) if isinstance(n, ast.Name)}
    for i, p in enumerate(params):
        if p in used and (i >= len(dims) or dims[i] != 1):
            return False  # a grid index that moves (or a scalar-prefetch Ref)
    return True


def spec_buffers(spec: Spec, decl) -> tuple[bool, int | None]:
    """(given, n) of a BlockSpec's `pipeline_mode=pl.Buffered(n)`: n written,
    or evaluated for this launch (a launcher's parameter, a caller's value)."""
    given, n = buffered_mode(decl)
    if given and n is None:
        n = spec.buffers
    return given, n


def buffered_mode(decl) -> tuple[bool, int | None]:
    """(given, n) of `pipeline_mode=pl.Buffered(n)`; n None when not a literal."""
    if not isinstance(decl, ast.Call):
        return False, None
    mode = next((k.value for k in decl.keywords if k.arg == "pipeline_mode"), None)
    if mode is None or (isinstance(mode, ast.Constant) and mode.value is None):
        return False, None
    if isinstance(mode, ast.Call) and _call_name(mode) == "Buffered":
        n = _arg(mode, 0, "buffer_count")
        return True, _int_expr(n) if n is not None else None
    return True, None


def _steps(dims: list | None) -> int | None:
    if dims is None or any(d is None for d in dims):
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def _block_need(launch: Launch, key: str, i: int, n: int, spec: Spec, array: ShapeDtype | None,
                dims: list | None) -> vmem.Need | None:
    label = f"{key}[{i}]" if n > 1 or key == "in_specs" else key
    dtype = array.dtype if array is not None else None
    ashape = array.shape if array is not None and known_shape(array.shape) else None
    # (squeezed dims are not in the Spec's block_shape; None there is unknown)
    decl = spec.decl if spec.decl is not None else spec_node(launch, key, i)
    # A block_shape written but not understood (a name of unknown value, the old
    # `BlockSpec(index_map, block_shape)` order) is unknown, not the whole array.
    written = isinstance(decl, ast.Call) and _call_name(decl) == "BlockSpec" \
        and _arg(decl, 0, "block_shape") is not None
    # as VMEM holds it: a squeezed dim is a row of the tile (engine/vmem.py)
    block = spec.block_shape if spec.block_shape is not None else (None if written else ashape)
    if spec.block_shape is not None and spec.vmem_shape is not None \
            and len(spec.vmem_shape) != len(spec.block_shape):
        block = spec.vmem_shape
    if block is not None and not known_shape(block):
        block = None
    if spec.block_shape is None and isinstance(decl, ast.Call) and _call_name(decl) == "BlockSpec" \
            and _arg(decl, 0, "block_shape") is None:
        whole = True  # BlockSpec(memory_space=...): the whole array
    else:
        whole = None if ashape is None or block is None else tuple(ashape) == tuple(block)
    constant = _constant_index(decl, dims)
    if constant is False and whole is None:
        whole = False  # a block that moves with the grid is not the whole array
    given, n_buf = spec_buffers(spec, decl)
    steps = _steps(dims)
    count = vmem.buffer_count(steps=steps, constant_index=constant,
                              buffered=n_buf if given else None, whole_array=whole)
    if given and n_buf is None and count != 1:
        count = None
    if steps is None and dims is not None and not given and count == 2:
        count = None  # a grid dimension the engine does not know may be 1: one buffer
    why = ("whole array" if whole else "grid of one step" if steps == 1 else
           "constant index map" if constant else f"Buffered({n_buf})" if given and n_buf else
           "double-buffered" if count == 2 else "")
    moved, movable = _xla_layout(ashape, block, dtype)
    return vmem.Need(label, "block", block, dtype, count, _layout_why(why, moved, movable),
                     movable=movable, moved=moved)


MOVED_WHY = "XLA lays the array out in VMEM itself: nothing here"
MOVABLE_WHY = "XLA may lay the array out in VMEM itself: from 0"


def _layout_why(why: str, moved: bool, movable: bool) -> str:
    if not (moved or movable):
        return why
    return (why + "; " if why else "") + (MOVED_WHY if moved else MOVABLE_WHY)


def _xla_layout(array, block, dtype) -> tuple[bool, bool]:
    """(moved, maybe): XLA lays the array out in VMEM before the kernel
    (vmem.xla_moves), or may: the array or its dtype is not known and the
    block is narrower than 128 lanes, so the array is too."""
    moved = vmem.xla_moves(tuple(array), vmem.ITEMSIZE.get(dtype or "")) \
        if array is not None else None
    if moved is not None:
        return moved, False
    shape = array or block
    return False, bool(shape) and (shape[-1] is None or shape[-1] % vmem.LANES != 0)


def _scratch_params(kernel, n: int) -> list[str] | None:
    """The names of the kernel's last `n` parameters (its scratch buffers),
    when it takes them by position."""
    if not isinstance(kernel, (ast.FunctionDef, ast.AsyncFunctionDef)) or n == 0:
        return None
    a = kernel.args
    params = a.posonlyargs + a.args
    if a.vararg or a.kwonlyargs or len(params) < n:
        return None
    return [p.arg for p in params[len(params) - n:]]


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


_META = ("dtype", "shape", "ndim", "size")


def _reads(node: ast.AST, name: str) -> bool:
    """`node` may read the contents of `name` (its `.dtype` / `.shape` do not)."""
    meta = {id(n.value) for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and n.attr in _META}
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in meta
               for n in ast.walk(node))


def _written_first(kernel, name: str) -> bool:
    """The first top-level statement of the kernel that names `name` writes
    all of it (`name[...] = v`, v not reading it): nothing of it lives from
    one grid step to the next."""
    for stmt in kernel.body:
        if not _mentions(stmt, name):
            continue
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return False
        t = stmt.targets[0]
        return (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == name and isinstance(t.slice, ast.Constant)
                and t.slice.value is Ellipsis and not _reads(stmt.value, name))
    return False


def launch_vmem(launch: Launch, events=None) -> LaunchVmem | None:
    """The scoped VMEM of a TPU pallas_call, part by part; None when its specs
    cannot be told apart. With the analysis' `events`, scratch the kernel
    surely keeps counts in the floor (_scratch_kept.py)."""
    ins, outs = items(launch.in_specs), items(launch.out_specs)
    shapes = items(launch.out_shape)
    if ins is None and _keyword(launch.node, "in_specs") is None:
        ins = []  # no in_specs: each input is a whole array, of a shape not known here
        whole_inputs = True
    else:
        whole_inputs = False
    if outs is None and _keyword(launch.node, "out_specs") is None and shapes is not None:
        outs = [Spec() for _ in shapes]  # no out_specs: whole `out_shape` blocks
    if ins is None or outs is None:
        return None
    dims = _grid_dims(launch)
    needs: list[vmem.Need] = []
    passed = input_arrays(launch, len(ins))
    for key, specs in (("in_specs", ins), ("out_specs", outs)):
        for i, spec in enumerate(specs):
            if spec is None or (isinstance(spec, Const) and spec.value is None):
                continue
            if not isinstance(spec, Spec):
                return None
            if spec.space not in BLOCK_SPACES:
                continue  # ANY / HBM / SMEM: not in scoped VMEM
            array = passed[i] if key == "in_specs" else None
            if key == "out_specs" and shapes is not None and len(shapes) == len(outs) \
                    and isinstance(shapes[i], ShapeDtype):
                array = shapes[i]
            needs.append(_block_need(launch, key, i, len(specs), spec, array, dims))
    if whole_inputs:
        needs.extend(_whole_inputs(launch))
    needs.extend(_scratch_needs(launch, events, _steps(dims)))
    limit = vmem_limit(launch)
    if limit is _MISSING:
        limits, set_limit = {}, None
    elif limit is None:
        limits, set_limit = dict(DEFAULT_SCOPED_VMEM), None
    else:
        limits, set_limit = {g: limit for g in DEFAULT_SCOPED_VMEM}, limit
    return LaunchVmem(launch, vmem.estimate(needs), limits, set_limit,
                      _computes(events, launch.kernel_id) if events is not None else False)


# Kernel code after which the compiler was seen to spill intermediates to scoped VMEM
# (benchmarks/README.md): arithmetic on whole blocks (tpu_inference's mhc_post, adds
# and multiplies only: 40 % over the blocks), dots, exp, reductions, sorts. Plain copies,
# casts and index arithmetic on scalars were exact.
_MOVES_ONLY = frozenset({"zeros_like", "ones_like", "full_like", "zeros", "ones", "full",
                         "empty", "astype", "reshape", "broadcast_to", "asarray", "array",
                         "squeeze", "expand_dims", "transpose", "swapaxes"})


def _computes(events, kid: int) -> bool:
    """The kernel does arithmetic on arrays that are not scalars (their shape
    known), or calls a jnp / lax function that is not a copy or a cast."""
    if not kid:
        return False
    for op in events.kernel_ops:
        if op.kernel_id != kid:
            continue
        if op.kind == "call" and op.name.startswith(("jnp.", "lax.")):
            if op.name.rsplit(".", 1)[-1] not in _MOVES_ONLY:
                return True
        elif op.kind in ("binop", "unary") and any(
                isinstance(v, Array) and _not_scalar(v.shape) for v in op.operands):
            return True
    # `acc_ref[...] += x` (an augmented store: no operator event of its own)
    return any(a.kernel_id == kid and a.kind == "swap" and a.value is not None
               and isinstance(a.value.value, Array) and a.value.value.origin == "arithmetic"
               and isinstance(a.ref.value, Ref) and _not_scalar(a.ref.value.shape)
               for a in events.accesses)


def _not_scalar(shape) -> bool:
    """A known shape with a dimension over 1."""
    return shape is not None and any(isinstance(d, int) and d > 1 for d in shape)


def _scratch_leaves(value, path: str) -> list:
    """(root, allocation) of each leaf of a scratch list, nested lists too
    (`[[pltpu.VMEM(...)] * k]`); the root is the one the kernel's Ref gets."""
    if isinstance(value, Seq) and value.keys is None:
        return [leaf for i, v in enumerate(value.items)
                for leaf in _scratch_leaves(v, f"{path}[{i}]")]
    return [(path, value)]


def _scratch_needs(launch: Launch, events, steps: int | None) -> list:
    scratch = items(launch.scratch) or []
    names = _scratch_params(launch.kernel_node, len(scratch))
    kept = kept_scratch(events, launch, steps) if events is not None else {}
    out = []
    for i, top in enumerate(scratch):
        for root, alloc in _scratch_leaves(top, f"scratch_shapes[{i}]"):
            if getattr(alloc, "space", None) != Space.VMEM:
                continue  # semaphores, SMEM: not in scoped VMEM
            shape = getattr(alloc, "shape", None)
            shape = tuple(shape) if known_shape(shape) else None
            dtype = getattr(alloc, "dtype", None)
            label = "scratch" + root[len("scratch_shapes"):] + (f" {names[i]}" if names else "")
            if root in kept:
                out.append(vmem.Need(label, "scratch", shape, dtype, 1, kept[root], kept=True))
            elif names and root == f"scratch_shapes[{i}]" \
                    and _written_first(launch.kernel_node, names[i]):
                # Measured: a buffer filled and read back within each step is not kept.
                out.append(vmem.Need(label, "scratch", shape, dtype, 0,
                                     "written before read in each step: dropped"))
            else:
                out.append(vmem.Need(label, "scratch", shape, dtype, 1, "scratch"))
    return out


def _whole_inputs(launch: Launch) -> list:
    """No in_specs: each operand is a whole array in VMEM, once; known
    when the call's arrays are (all of them)."""
    ops = launch.operands
    if ops and _keyword(launch.node, "grid_spec") is None and all(sd is not None and known_shape(sd.shape) and sd.dtype for sd in ops):
        out = []
        for i, sd in enumerate(ops):
            moved, movable = _xla_layout(tuple(sd.shape), None, sd.dtype)
            out.append(vmem.Need(f"input #{i}", "operand", tuple(sd.shape), sd.dtype, 1,
                                 _layout_why("no in_specs: whole array, once", moved, movable),
                                 movable=movable, moved=moved))
        return out
    return [vmem.Need("inputs", "operand", None, None, 1, "no in_specs: each whole, once")]


def vmem_rows(events) -> list[LaunchVmem]:
    """One LaunchVmem per TPU pallas_call and distinct estimate (variants of a
    launcher that give the same figures are shown once)."""
    out, seen = [], set()
    for launch in tpu_launches(events):
        lv = launch_vmem(launch, events)
        if lv is None:
            continue
        key = (id(launch.node), lv.estimate, tuple(sorted(lv.limits.items())))
        if key not in seen:
            seen.add(key)
            out.append(lv)
    return out


def _shape_text(p: vmem.Part) -> str:
    if p.shape is None:
        return "?"
    dt = p.dtype or "?"
    return f"{dt}[{', '.join(str(d) for d in p.shape)}]"


def hover_rows(events, span_of) -> list:
    """(span of each TPU pallas_call's name, markdown of its VMEM estimate),
    once per launch site: its variants' distinct figures one after another."""
    by_span: dict = {}
    for lv in vmem_rows(events):
        node = lv.launch.node
        span = span_of(node.func if isinstance(node, ast.Call) else node)
        tables = by_span.setdefault(span, [])
        table = markdown_table(lv)
        if table not in tables:  # the same launch seen again (a variant, another pass)
            tables.append(table)
    out = []
    for span, tables in by_span.items():
        sections = []
        for k, table in enumerate(tables):
            title = "**Scoped VMEM estimate**" + (f" (variant {k + 1} of {len(tables)})"
                                                  if len(tables) > 1 else "")
            sections.append("\n".join([title + " (pallas-lsp, counted as the TPU compiler "
                                       "does)", ""] + table))
        out.append((span, "\n\n".join(sections)))
    return out


def markdown_table(lv: LaunchVmem) -> list[str]:
    est = lv.estimate
    lines = ["| part | block | buffers | bytes |", "|---|---|---|---|"]
    for p in est.parts:
        count = "?" if p.count is None else str(p.count)
        if p.why:
            count += f" ({p.why})"
        size = fmt_bytes(p.bytes) if p.exact else f"≥ {fmt_bytes(p.bytes)}"
        lines.append(f"| `{p.name}` | {_shape_text(p)} | {count} | {size} |")
    at_least = "" if est.exact else "≥ "
    lines.append("")
    if lv.limits:
        limits = ", ".join(f"{g} {fmt_bytes(lv.limits[g])}" for g in GENERATIONS
                           if g in lv.limits)
        origin = "vmem_limit_bytes" if lv.set_limit else "default scoped limits"
        over = lv.over()
        lines.append(f"Total {lv.total_text()}; {origin}: {limits}"
                     + (f"; over on {', '.join(over)}" if over else "") + ".")
    else:
        lines.append(f"Total {at_least}{fmt_bytes(est.total)}; the limit "
                     "(`vmem_limit_bytes`) is not known.")
    if not est.exact:
        lines.append("(≥: an input's dtype or shape, or a buffer count, is not known here; "
                     "`pallas-lsp run --compile` reports the compiler's figure.)")
    if lv.computes:
        lines.append(SPILL_NOTE)
    return lines


SPILL_NOTE = ("(The kernel computes: the compiler may add VMEM for intermediates it spills, "
              "which is not counted here.)")
