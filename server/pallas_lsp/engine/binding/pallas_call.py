"""`pl.pallas_call`: the `PallasCallable` it returns (kernel, specs,
out_shape, scratch, grid, compiler params) and `run_kernel`, which binds
the kernel's parameters as pallas_call does (scalar prefetch, inputs,
outputs, scratch; a dict of scratch as keywords) and runs its body, once
per kernel a launch site is given (bounded per site). Mirrors
jax/_src/pallas/pallas_call.py (jax 0.10.2)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import backend, flow
from pallas_lsp.engine.binding.launch import (arg_value, count_required, positional_params,
                                              refuted, segments_to_args)
from pallas_lsp.engine.binding.scratch import scratch_value
from pallas_lsp.engine.binding.specs import operand_value, top_items
from pallas_lsp.engine.events import Arg, Launch
from pallas_lsp.engine.model import Const, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, Choice, GridSpec, Instance,
                                      OperandDecl, Partial, SeqOf, ShapeDtype, StarUnknown,
                                      is_record, pytree_fields)

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


@frozen
class PallasCallable(Value):
    """The function `pl.pallas_call(kernel, ...)` returns."""

    kernel: Value = UNKNOWN
    num_prefetch: int | None = 0
    in_specs: Value = UNKNOWN
    has_in_specs: bool = False
    out_specs: Value = UNKNOWN
    has_out_specs: bool = False
    out_shape: Value = UNKNOWN
    scratch: Value = UNKNOWN
    node_id: int = 0
    node: object = None  # the pallas_call node
    kernel_arg: object = None  # the node of the kernel argument
    grid: Value = UNKNOWN
    compiler_params: Value | None = None
    backend: Value | None = None  # the `backend=` argument
    # What the call passed, one per operand (a ShapeDtype where its shape or
    # dtype is known, else None); None before the call is seen.
    operands: tuple | None = None
    operand_nodes: tuple = ()  # the call's argument nodes

    def describe(self) -> str:
        return "pallas_call"


def callable_kernel(host: LaunchHost, kernel: Arg | None) -> Arg | None:
    """An instance of the user's class with `__call__` is a kernel too: its
    bound `__call__` (`pl.pallas_call(Kernel(cfg), ...)`)."""
    if kernel is not None and isinstance(kernel.value, Instance):
        method = host.method_value(kernel.value.cls, "__call__", kernel.value)
        if isinstance(method, Func):
            return replace(kernel, value=method)
    return kernel


def pallas_call(host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg],
                node: ast.Call, frame: Frame) -> Value:
    # The kernel is the first parameter: `kernel` (named `f` in older jax).
    named = kwargs.get("kernel") or kwargs.get("f")
    if named is not None:
        args = [named] + list(args)
    kernel = callable_kernel(host, args[0] if args else None)
    out_shape = args[1] if len(args) > 1 else kwargs.get("out_shape")
    gs = kwargs.get("grid_spec")
    if gs is not None and isinstance(gs.value, GridSpec):
        g = gs.value
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN,
                            num_prefetch=g.num_scalar_prefetch, in_specs=g.in_specs,
                            has_in_specs=g.has_in_specs, out_specs=g.out_specs,
                            has_out_specs=g.has_out_specs,
                            out_shape=out_shape.value if out_shape else UNKNOWN,
                            scratch=g.scratch_shapes, node_id=hash((id(node), host.variant)), node=node,
                            kernel_arg=kernel.node if kernel else None)
    elif gs is not None:
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN, num_prefetch=None,
                            node_id=hash((id(node), host.variant)))
    else:
        ins, outs, scr = kwargs.get("in_specs"), kwargs.get("out_specs"), kwargs.get("scratch_shapes")
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN, num_prefetch=0,
                            in_specs=ins.value if ins else UNKNOWN, has_in_specs=ins is not None,
                            out_specs=outs.value if outs else UNKNOWN,
                            has_out_specs=outs is not None,
                            out_shape=out_shape.value if out_shape else UNKNOWN,
                            scratch=scr.value if scr else Seq(), node_id=hash((id(node), host.variant)), node=node,
                            kernel_arg=kernel.node if kernel else None)
    grid = kwargs.get("grid")
    if grid is None and gs is not None and isinstance(gs.value, GridSpec):
        grid = gs.value.grid
    pc = replace(pc, node=node, kernel_arg=kernel.node if kernel else None,
                 grid=grid.value if isinstance(grid, Arg) else (grid or UNKNOWN),
                 compiler_params=arg_value(kwargs.get("compiler_params")),
                 backend=arg_value(kwargs.get("backend")))
    if pc.has_in_specs:
        run_kernel(host, pc, None, frame)
    else:
        host.pending.append((pc, frame))
    return pc


def run_kernel(host: LaunchHost, pc: PallasCallable, n_args: int | None, frame: Frame) -> None:
    """Bind the kernel's parameters as pallas_call does and run its body."""
    # One run per kernel a launch site is given: a shared launcher
    # (`def launch(kernel, ...)`) is called with several kernels, and a kernel
    # partial'd with other constants may take other branches. Bounded per site.
    key = (pc.node_id, _kernel_identity(pc.kernel, host.module_scope, host))
    if key in host.kernels_done:
        return
    # The bound is per def: every kernel a site is given runs (a test base
    # class's `self.pallas_call` wrapper is one site for a hundred tests'
    # kernels), but one def in many guises (partials, closures) at most
    # MAX_KERNELS_PER_SITE times.
    count = (pc.node_id, id(getattr(pc.kernel, "node", None)))
    runs = host.kernel_runs.get(count, 0)
    if runs >= MAX_KERNELS_PER_SITE:
        return
    host.kernel_runs[count] = runs + 1
    host.kernels_done.add(key)
    if isinstance(pc.kernel, Choice):  # `kernel = a if flag else b`: check each
        for i, option in enumerate(pc.kernel.options):
            run_kernel(host, replace(pc, kernel=option, node_id=hash((pc.node_id, i))), n_args,
                       frame)
        return
    kernel = pc.kernel
    be = backend.of_launch(pc.compiler_params, pc.backend) or host.file_backend
    knode = getattr(kernel, "node", None)
    launch = Launch(api="pallas_call", node=pc.node, kernel=getattr(knode, "name", ""),
                    kernel_node=knode, bound=False, backend=be, in_specs=pc.in_specs,
                    out_specs=pc.out_specs, out_shape=pc.out_shape, scratch=pc.scratch,
                    grid=pc.grid, compiler_params=pc.compiler_params,
                    operands=pc.operands, operand_nodes=pc.operand_nodes,
                    variant=getattr(host, "variant_label", ""))
    if backend.sparsecore_mesh(pc.compiler_params):  # kernel_type=KernelType.SC_...
        launch.core = backend.SPARSECORE
    host.events.launches.append(launch)
    if not isinstance(kernel, Func):
        launch.reason = "the kernel is not a function the engine can see"
        return
    if refuted(launch, frame):
        return
    n_pref = pc.num_prefetch
    prefetch = [Ref(origin=f"scalar prefetch operand #{i}", space=Space.SMEM,
                    decl=OperandDecl(pc.node, i, pc.node))
                for i in range(n_pref)] if n_pref is not None else None
    # Inputs: one parameter per top-level in_specs item.
    inputs: list[Value] | None = None
    in_items = top_items(pc.in_specs, pc.has_in_specs)
    if in_items is not None:
        inputs = [operand_value(s, operand(pc, n_pref, i), f"input #{i} (in_specs[{i}])", False)
                  for i, s in enumerate(in_items)]
    elif not pc.has_in_specs and n_args is not None and n_pref is not None:
        inputs = [Ref(origin=f"input #{i} (whole array, no in_specs)", space=Space.VMEM,
                      decl=OperandDecl(pc.node, n_pref + i, pc.node),
                      **whole_array(operand(pc, n_pref, i)))
                  for i in range(n_args - n_pref)]
    # Outputs: one per top-level out_shape item, described by out_specs.
    outputs: list[Value] | None = None
    shapes = top_items(pc.out_shape, pc.out_shape is not UNKNOWN)
    specs = top_items(pc.out_specs, pc.has_out_specs)
    if specs is not None and shapes is not None and len(specs) == 1 and len(shapes) > 1 \
            and not isinstance(pc.out_specs, Seq):
        specs = specs * len(shapes)
    if specs is not None:
        outputs = [operand_value(s, shapes[i] if shapes and i < len(shapes) else None,
                                  f"output #{i} (out_specs[{i}])", True)
                   for i, s in enumerate(specs)]
    elif not pc.has_out_specs and shapes is not None:
        outputs = [operand_value(Const(value=None), s, f"output #{i} (whole array, no out_specs)",
                                  True) for i, s in enumerate(shapes)]
    # Scratch: a dict becomes keyword arguments.
    scratch_pos: list[Value] | None = []
    scratch_kw: dict[str, Value] = {}
    sv = _record_as_tuple(pc.scratch)
    if isinstance(sv, Seq) and sv.keys is not None:
        for k, item in zip(sv.keys, sv.items):
            scratch_kw[str(k)] = scratch_value(item, f"scratch_shapes[{k!r}]")
    elif isinstance(sv, Seq):
        scratch_pos = [scratch_value(item, f"scratch_shapes[{i}]") for i, item in enumerate(sv.items)]
    else:
        scratch_pos = None
    # A scratch list whose length flags decide: its last entries are known.
    scratch_tail = [scratch_value(item, f"scratch_shapes[-{len(sv.tail) - i}]")
                    for i, item in enumerate(sv.tail)] if isinstance(sv, Partial) else []
    positional = positional_params(kernel)
    if positional is None:
        launch.reason = "the kernel is not a function the engine can see"
        return
    params, has_vararg = positional
    params = [p for p in params if p not in scratch_kw]  # a dict's entries arrive as keywords
    segments = [prefetch, inputs, outputs, scratch_pos]
    ins = pc.in_specs
    if inputs is None and isinstance(ins, Partial) and ins.head:
        # `[smem_spec] * 4 + [any_spec] * len(rest)`: the first inputs are
        # known, how many follow is not.
        segments[1:2] = [[operand_value(s, operand(pc, n_pref, i), f"input #{i} (in_specs[{i}])",
                                        False) for i, s in enumerate(ins.head)], None]
    if isinstance(sv, Partial) and sv.head:
        # ... and so are its first ones (`[a, b] + ([c] if flag else [])`).
        segments[-1:] = [[scratch_value(item, f"scratch_shapes[{i}]")
                          for i, item in enumerate(sv.head)], None]
    # The optional entries after those, when they are all alike, are what
    # a `*refs` parameter holds.
    # (Between known first and last entries, the entries a loop added.)
    rest = scratch_value(sv.middle if sv.middle is not UNKNOWN and sv.tail else sv.rest,
                         "scratch_shapes[...]") if isinstance(sv, Partial) else UNKNOWN
    if isinstance(sv, SeqOf) and sv.elem is not UNKNOWN \
            and all(seg is not None for seg in segments[:-1]):
        args, reason = _alike_scratch(segments[:-1], params, count_required(kernel, params),
                                      has_vararg, scratch_value(sv.elem, "scratch_shapes[...]"))
    else:
        args, reason = segments_to_args(segments, params, count_required(kernel, params),
                                         has_vararg, scratch_tail,
                                         StarUnknown(elem=rest) if rest is not UNKNOWN
                                         else STAR_UNKNOWN)
    if args is None:
        launch.reason = reason
        # Another call of the launcher may make countable specs (a caller
        # that passes the flag which adds outputs): let it try.
        host.kernels_done.discard(key)
        return
    name = getattr(kernel.node, "name", "<lambda>")
    host.kernels.append(name)
    origins = {}
    for p, v in zip(params, args):
        if isinstance(v, Value) and v.origin:
            origins[p] = v.origin
    launch.bound = True
    # Launcher variants often bind the same kernel with the same values (a
    # flag that changes only the wrapper): that run would repeat every event.
    same = host.same_kernel_run(kernel, args, scratch_kw, be, frame)
    if same is not None:
        launch.kernel_id = same
        return
    launch.kernel_id = host.kernel_count + 1
    # The run made where the pallas_call is created, before its operands are
    # known, is provisional for hover: a run of the same site with the
    # operands replaces what it recorded (names.py).
    site = id(pc.node)
    before = host.provisional_site
    if pc.operands is not None:
        host.operand_run_sites.add(site)
    elif pc.has_in_specs and before is None:
        host.provisional_site = site
    try:
        host.call_func(kernel, args, scratch_kw, frame, kernel=True, param_origin=origins,
                       call_node=pc.kernel_arg or pc.node, backend_name=be)
    finally:
        host.provisional_site = before


def _alike_scratch(known: list, params: list[str], required: int, has_vararg: bool,
                   elem: Value) -> tuple[list[Value] | None, str]:
    """Scratch of unknown length whose entries are all alike
    (`[pltpu.SemaphoreType.DMA] * (3 + 2 * n)` with n from a mesh): each
    required parameter after the operands receives one entry (a shorter
    list is JAX's arity error, and then nothing is traced) and `*rest` the
    others. A parameter with a default may be left to it: Unknown."""
    front = [v for seg in known for v in seg]
    if len(front) > len(params) and not has_vararg:
        return None, "the launch binds more parameters than the kernel takes"
    args = front + [elem if i < required else UNKNOWN for i in range(len(front), len(params))]
    if has_vararg:
        args.append(StarUnknown(elem=elem))
    return args, ""


MAX_KERNELS_PER_SITE = 8


def operand(pc: PallasCallable, n_pref: int | None, i: int) -> ShapeDtype | None:
    """The shape and dtype of input `i` (after the scalar-prefetch ones),
    when the call passed an array the engine knows."""
    if pc.operands is None or n_pref is None or n_pref + i >= len(pc.operands):
        return None
    return pc.operands[n_pref + i]


def whole_array(sd: ShapeDtype | None) -> dict:
    """A whole-array input Ref's shape and dtype (no in_specs)."""
    return {} if sd is None else {"shape": sd.shape, "dtype": sd.dtype}


def _kernel_identity(kernel: Value, module_scope=None, host=None):
    """Which function, the constants partial() bound to it and, for a kernel
    defined inside a launcher, the functions its closure holds (a shared
    `launch(kernel=...)` wraps each user kernel in its own `wrapper(...)`
    that calls `kernel(...)`, one kernel per closure) and the constants it
    reads from it (`build(mode)` run per mode: `if mode == ...` in the
    kernel picks another branch)."""
    if not isinstance(kernel, Func):
        return id(kernel) if isinstance(kernel, Choice) else None
    bound = list(enumerate(kernel.bound_args)) + list(kernel.bound_kwargs)
    consts = tuple((k, c) for k, v in bound if (c := _const_key(v)) is not None)
    scope = kernel.scope
    if scope is None or scope is module_scope:
        return (id(kernel.node), consts)
    funcs = tuple(sorted((name, id(v.node)) for name, v in getattr(scope, "vars", {}).items()
                         if isinstance(v, Func)))
    return (id(kernel.node), consts, funcs, _closed_refs(scope, module_scope),
            _closed_consts(kernel, host))


def _closed_consts(kernel: Func, host) -> tuple:
    """The constants a nested kernel's branch tests read from its enclosing
    functions (a constant that only sizes things leaves the same code run)."""
    names = host.branch_free.get(id(kernel.node)) if host is not None else None
    if names is None:
        names = flow.branch_free_names(kernel.node)
        if host is not None:
            host.branch_free[id(kernel.node)] = names
    if not names or not hasattr(kernel.scope, "vars"):
        return ()
    values = flow.closure_values((kernel.scope.parent, kernel.scope.vars), names)
    return tuple((n, v.value) for n, v in zip(names, values)
                 if isinstance(v, Const) and _hashable(v.value))


def _closed_refs(scope, module_scope) -> tuple:
    """The names of the closure (enclosing function scopes) holding Refs: a
    launcher first run with unknown arguments, then called with Refs
    (`run_state(body)`, whose body hands its Refs to the launcher), gives its
    kernel a closure the first run did not know; that run is another kernel."""
    out = []
    while scope is not None and scope is not module_scope:
        out.extend(name for name, v in getattr(scope, "vars", {}).items() if isinstance(v, Ref))
        scope = getattr(scope, "parent", None)
    return tuple(sorted(out))


def _const_key(v: Value, depth: int = 0):
    """A hashable summary of what is constant in a bound value: a Const's
    value; for a config object (`partial(kernel, cfg=cfg)`), its constant
    fields, so that two configs that differ in a mode are two kernels."""
    if isinstance(v, Const):
        return v.value if _hashable(v.value) else None
    if isinstance(v, Instance) and depth < 2:
        fields = tuple(sorted((k, c) for k, x in v.attrs.items()
                              if (c := _const_key(x, depth + 1)) is not None))
        return ("instance", id(v.cls), fields) if fields else None
    return None


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _record_as_tuple(v: Value) -> Value:
    """Scratch given as a NamedTuple (or a dataclass pytree) of allocations,
    `Scratch(buf=pltpu.VMEM(...), sem=...)`: JAX flattens it by field, so
    the kernel receives the fields in their declared order. A field holding
    a nested structure is not followed (its leaves would shift the rest)."""
    if not is_record(v):
        return v
    names = pytree_fields(v)
    items = tuple(v.attrs.get(f, UNKNOWN) for f in names)
    if not names or any(isinstance(x, (Seq, Instance)) for x in items):
        return UNKNOWN
    return Seq(items=items)
