"""How Pallas binds kernel parameters: pallas_call (scalar prefetch, inputs,
outputs, scratch), pl.kernel, core_map, emit_pipeline; BlockSpecs, memory
spaces, scratch constructors and `.at[...]` shapes.

Mirrors jax/_src/pallas/pallas_call.py and pallas/core.py as measured on jax
0.10.2 (see shared/reference/semantics.md)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api, backend, standalone
from pallas_lsp.engine.events import Arg, Launch, ScopedAlloc
from pallas_lsp.engine.model import Api, Array, Const, Func, Ref, SemKind, Seq, Shape, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, Alloc, Bound, Choice, GridSpec,
                                      Instance, OperandDecl, Partial, SeqOf, ShapeDtype, SliceVal,
                                      Spec, StarUnknown, is_record, join_all)

if TYPE_CHECKING:
    from pallas_lsp.engine.interp import Frame, Interpreter

SQUEEZED = _SQUEEZED = "__squeezed__"


# ---------------------------------------------------------------- decorators


class Decorator(Value):
    """A value that, applied to a function, runs it (pl.when, pl.loop, ...)."""

    def apply(self, interp: Interpreter, func: Value, node: ast.AST, frame: Frame) -> Value:
        return func


@frozen
class WhenDecorator(Decorator):
    def apply(self, interp, func, node, frame):
        if isinstance(func, Func):
            interp.call_func(func, [], {}, frame)
        elif isinstance(func, Bound) and isinstance(node, ast.Call):
            interp.call_method(func, [], {}, node, frame)  # `pl.when(c)(copy.start)`
        return Const(value=None)


@frozen
class LoopDecorator(Decorator):
    def apply(self, interp, func, node, frame):
        if isinstance(func, Func):
            frame.loop_depth += 1
            try:
                interp.call_func(func, [UNKNOWN], {}, frame)
            finally:
                frame.loop_depth -= 1
        return Const(value=None)


@frozen
class PartialApi(Decorator):
    """functools.partial(<Pallas API>, ...) as a decorator: run_scoped,
    kernel, core_map, pallas_call, emit_pipeline, lax.fori_loop."""

    api: str = ""
    args: tuple = ()
    kwargs: tuple = ()

    def makes_value(self) -> bool:
        """A partial of a constructor (`BlockSpec`, `VMEM`, `ShapeDtypeStruct`,
        `jnp.zeros`...): calling it makes that value. Partials of the APIs
        `apply` knows run a function; the others (`jax.jit`...) wrap one."""
        t = api.tail(self.api)
        return t in api.CONSTRUCTORS or t in api.SEM_TYPES or self.api == "jax.ShapeDtypeStruct" \
            or self.api.startswith("jnp.")

    def apply(self, interp, func, node, frame):
        t = api.tail(self.api)
        kwargs = dict(self.kwargs)
        if t == "run_scoped":
            return run_scoped(interp, func, list(self.args), kwargs, node, frame)
        if t == "kernel" and isinstance(func, Func):
            return pl_kernel(interp, func, kwargs, frame, node)
        if t == "core_map" and isinstance(func, Func):
            return core_map(interp, func, list(self.args), kwargs, frame, node)
        if t == "pallas_call":
            return pallas_call(interp, [Arg(None, func)] + list(self.args), kwargs, node, frame)
        if t == "emit_pipeline" and isinstance(func, Func):
            # `@functools.partial(pltpu.emit_pipeline, grid=..., in_specs=...)`
            return emit_pipeline(interp, [Arg(None, func)] + list(self.args), kwargs, node, frame)
        if self.api == "lax.fori_loop" and len(self.args) == 2 and isinstance(func, Func):
            # `@functools.partial(lax.fori_loop, lo, hi, init_val=...)`: the
            # body runs now, as the loop's `body_fun`.
            return interp.call_api(self.api, list(self.args) + [Arg(None, func)], kwargs, node,
                                   frame)
        return func


@frozen
class SpecClass(Value):
    """A user subclass of `pl.BlockSpec` (`class PatchBlockSpec(BlockSpec)`,
    its own `__init__` calling `super().__init__(...)`): calling it makes the
    BlockSpec that `super().__init__` was given."""

    init: object = None  # the subclass's __init__ (FunctionDef), or None
    scope: object = None
    api: str = "pl.BlockSpec"

    def call(self, interp: Interpreter, args: list[Arg], kwargs: dict[str, Arg], node,
             frame: Frame) -> Value:
        if self.init is None:
            return interp.call_api(self.api, args, kwargs, node, frame)
        holder = SpecHolder(self.api)
        interp.call_func(Func(node=self.init, scope=self.scope), [holder] + [a.value for a in args],
                         {k: a.value for k, a in kwargs.items()}, frame)
        return holder.box.get("spec", UNKNOWN)


class SpecHolder(Value):
    """`self` inside such an `__init__`: `super()` is it again, and
    `super().__init__(...)` (a SpecInit) stores the BlockSpec made."""

    def __init__(self, api_name: str):
        object.__setattr__(self, "origin", "BlockSpec subclass instance")
        object.__setattr__(self, "api", api_name)
        object.__setattr__(self, "box", {})

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


@frozen(eq=False)
class SpecInit(Value):
    holder: object = None

    def call(self, interp: Interpreter, args: list[Arg], kwargs: dict[str, Arg], node,
             frame: Frame) -> Value:
        self.holder.box["spec"] = interp.call_api(self.holder.api, args, kwargs, node, frame)
        return Const(value=None)


@frozen
class WithScoped(Decorator):
    """`@pl.with_scoped(*types, **kw_types)`: calling the function runs it
    under run_scoped, with the call's arguments first."""

    args: tuple = ()
    kwargs: tuple = ()

    def apply(self, interp, func, node, frame):
        return ScopedFunc(func=func, types=self.args, kw_types=self.kwargs, node=node)


@frozen
class ScopedFunc(Value):
    func: Value = UNKNOWN
    types: tuple = ()
    kw_types: tuple = ()
    node: object = None

    def call(self, interp, args: list[Arg], frame):
        func = self.func
        if isinstance(func, Func) and args:
            func = replace(func, bound_args=func.bound_args + tuple(a.value for a in args))
        return run_scoped(interp, func, list(self.types), dict(self.kw_types), self.node, frame)


@frozen
class KernelDecorator(Decorator):
    kwargs: tuple = ()

    def apply(self, interp, func, node, frame):
        if isinstance(func, Func):
            return pl_kernel(interp, func, dict(self.kwargs), frame, node)
        return UNKNOWN


@frozen
class CoreMapDecorator(Decorator):
    args: tuple = ()
    kwargs: tuple = ()

    def apply(self, interp, func, node, frame):
        if isinstance(func, Func):
            return core_map(interp, func, list(self.args), dict(self.kwargs), frame, node)
        return UNKNOWN


# ---------------------------------------------------------------- constructors


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
    if isinstance(value, Const) and isinstance(value.value, str) and value.value != _SQUEEZED:
        return value.value
    return None


def shape_of(values: list[Value]) -> Shape | None:
    """A shape from `(8, 128)` (one Seq/Const) or from `8, 128` (several)."""
    if len(values) == 1:
        v = values[0]
        if isinstance(v, Const) and isinstance(v.value, tuple):
            return tuple(d if isinstance(d, int) else None for d in v.value)
        if isinstance(v, Seq) and v.keys is None:
            return tuple(_dim(d) for d in v.items)
        if isinstance(v, Const) and isinstance(v.value, int):
            return (v.value,)
        return None
    return tuple(_dim(d) for d in values)


def _dim(v: Value) -> int | None:
    if isinstance(v, Const) and isinstance(v.value, int) and not isinstance(v.value, bool):
        return v.value
    return None


def memory_alloc(space: str, args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("shape")
    dtype_arg = args[1] if len(args) > 1 else kwargs.get("dtype")
    shape = shape_of([shape_arg.value]) if shape_arg is not None else None
    dtype = dtype_of(dtype_arg.value) if dtype_arg is not None else None
    return Alloc(space=Space(space), shape=shape, dtype=dtype)


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


def block_spec(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("block_shape")
    space_arg = kwargs.get("memory_space")
    space: Space | None = None
    if space_arg is not None:
        space = space_of(space_arg.value) or Space.UNKNOWN
    block: Shape | None = None
    if shape_arg is not None:
        v = shape_arg.value
        if isinstance(v, Seq) and v.keys is None:
            dims = []
            for d in v.items:
                if _is_squeezed(d):
                    continue
                if isinstance(d, Api) and api.tail(d.name) in ("Blocked", "Element", "BoundedSlice"):
                    dims.append(None)
                    continue
                dims.append(_dim(d))
            block = tuple(dims)
        elif isinstance(v, Const) and isinstance(v.value, tuple):
            block = tuple(d for d in v.value if d is not None)
    return Spec(space=space, block_shape=block)


def _is_squeezed(d: Value) -> bool:
    if isinstance(d, Const) and (d.value is None or d.value == _SQUEEZED):
        return True
    return isinstance(d, Api) and api.tail(d.name) in ("squeezed", "Squeezed")


def grid_spec(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    n = kwargs.get("num_scalar_prefetch") or (args[0] if args else None)
    n_val = n.value.value if n is not None and isinstance(n.value, Const) else (0 if n is None else None)
    if not isinstance(n_val, int):
        n_val = None
    ins = kwargs.get("in_specs")
    outs = kwargs.get("out_specs")
    scratch = kwargs.get("scratch_shapes")
    grid = kwargs.get("grid")
    return GridSpec(num_scalar_prefetch=n_val, grid=grid.value if grid is not None else UNKNOWN,
                    in_specs=ins.value if ins is not None else UNKNOWN,
                    out_specs=outs.value if outs is not None else UNKNOWN,
                    scratch_shapes=scratch.value if scratch is not None else Seq(),
                    has_in_specs=ins is not None, has_out_specs=outs is not None)


def shape_dtype(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("shape")
    dtype_arg = args[1] if len(args) > 1 else kwargs.get("dtype")
    return ShapeDtype(shape=shape_of([shape_arg.value]) if shape_arg else None,
                      dtype=dtype_of(dtype_arg.value) if dtype_arg else None)


# ---------------------------------------------------------------- indexing


def slice_value(lo: Value, hi: Value, has_step: bool) -> Value:
    if has_step:
        return SliceVal()
    lo_v = lo.value if isinstance(lo, Const) else "?"
    hi_v = hi.value if isinstance(hi, Const) else "?"
    if lo_v is None:
        lo_v = 0
    if isinstance(lo_v, int) and isinstance(hi_v, int):
        return SliceVal(size=max(hi_v - lo_v, 0))
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


# ---------------------------------------------------------------- kernels


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

    def describe(self) -> str:
        return "pallas_call"


def callable_kernel(interp: Interpreter, kernel: Arg | None) -> Arg | None:
    """An instance of the user's class with `__call__` is a kernel too: its
    bound `__call__` (`pl.pallas_call(Kernel(cfg), ...)`)."""
    if kernel is not None and isinstance(kernel.value, Instance):
        method = interp.method_value(kernel.value.cls, "__call__", kernel.value)
        if isinstance(method, Func):
            return replace(kernel, value=method)
    return kernel


def pallas_call(interp: Interpreter, args: list[Arg], kwargs: dict[str, Arg],
                node: ast.Call, frame: Frame) -> Value:
    # The kernel is the first parameter: `kernel` (named `f` in older jax).
    named = kwargs.get("kernel") or kwargs.get("f")
    if named is not None:
        args = [named] + list(args)
    kernel = callable_kernel(interp, args[0] if args else None)
    out_shape = args[1] if len(args) > 1 else kwargs.get("out_shape")
    gs = kwargs.get("grid_spec")
    if gs is not None and isinstance(gs.value, GridSpec):
        g = gs.value
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN,
                            num_prefetch=g.num_scalar_prefetch, in_specs=g.in_specs,
                            has_in_specs=g.has_in_specs, out_specs=g.out_specs,
                            has_out_specs=g.has_out_specs,
                            out_shape=out_shape.value if out_shape else UNKNOWN,
                            scratch=g.scratch_shapes, node_id=hash((id(node), interp.variant)), node=node,
                            kernel_arg=kernel.node if kernel else None)
    elif gs is not None:
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN, num_prefetch=None,
                            node_id=hash((id(node), interp.variant)))
    else:
        ins, outs, scr = kwargs.get("in_specs"), kwargs.get("out_specs"), kwargs.get("scratch_shapes")
        pc = PallasCallable(kernel=kernel.value if kernel else UNKNOWN, num_prefetch=0,
                            in_specs=ins.value if ins else UNKNOWN, has_in_specs=ins is not None,
                            out_specs=outs.value if outs else UNKNOWN,
                            has_out_specs=outs is not None,
                            out_shape=out_shape.value if out_shape else UNKNOWN,
                            scratch=scr.value if scr else Seq(), node_id=hash((id(node), interp.variant)), node=node,
                            kernel_arg=kernel.node if kernel else None)
    grid = kwargs.get("grid")
    if grid is None and gs is not None and isinstance(gs.value, GridSpec):
        grid = gs.value.grid
    pc = replace(pc, node=node, kernel_arg=kernel.node if kernel else None,
                 grid=grid.value if isinstance(grid, Arg) else (grid or UNKNOWN),
                 compiler_params=_value(kwargs.get("compiler_params")),
                 backend=_value(kwargs.get("backend")))
    if pc.has_in_specs:
        run_kernel(interp, pc, None, frame)
    else:
        interp.pending.append((pc, frame))
    return pc


def _value(arg: Arg | None) -> Value | None:
    return arg.value if arg is not None else None


def _leaves(v: Value) -> list[Value] | None:
    """Flatten a pytree of specs/shapes; None when its structure is unknown."""
    if isinstance(v, Seq):
        out: list[Value] = []
        for item in v.items:
            sub = _leaves(item)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if v is UNKNOWN or isinstance(v, (SeqOf, Partial)):
        return None  # how many is not known
    return [v]


def _spec_kinds(v: Value) -> list[Value]:
    """Every spec a pytree of unknown structure may hold (its known items,
    and the one each unknown-length part repeats)."""
    if isinstance(v, Seq):
        return [k for item in v.items for k in _spec_kinds(item)]
    if isinstance(v, SeqOf):
        return _spec_kinds(v.elem)
    if isinstance(v, Partial):
        return [k for item in v.head + v.tail + (v.elem,) for k in _spec_kinds(item)]
    return [v]


def _operand_ref(spec: Value, shape_dtype: Value | None, origin: str) -> Ref:
    ref = _operand_ref_of(spec, shape_dtype, origin)
    decl = getattr(spec, "decl", None) or getattr(shape_dtype, "decl", None)
    return replace(ref, decl=decl) if decl is not None else ref


def _operand_ref_of(spec: Value, shape_dtype: Value | None, origin: str) -> Ref:
    shape = dtype = None
    if isinstance(shape_dtype, ShapeDtype):
        shape, dtype = shape_dtype.shape, shape_dtype.dtype
    if isinstance(spec, Spec):
        space = spec.space if spec.space is not None else Space.VMEM
        if space == Space.UNKNOWN:  # specs joined from two branches: a block or the array
            return Ref(origin=origin, space=space, shape=spec.block_shape, dtype=dtype)
        if spec.block_shape is not None and space not in (Space.ANY, Space.HBM):
            shape = spec.block_shape
        elif space not in (Space.ANY, Space.HBM) and spec.space is not None and spec.block_shape is None:
            pass  # whole array in that space
        return Ref(origin=origin, space=space, shape=shape, dtype=dtype)
    if isinstance(spec, Const) and spec.value is None:
        return Ref(origin=origin, space=Space.VMEM, shape=shape, dtype=dtype)
    return Ref(origin=origin, space=Space.UNKNOWN)


def _scratch_value(v: Value, origin: str) -> Value:
    alloc = to_alloc(v)
    if alloc is not None:
        return alloc.to_ref(origin)
    if isinstance(v, Seq):
        return Seq(items=tuple(_scratch_value(x, f"{origin}[{i}]") for i, x in enumerate(v.items)),
                   keys=v.keys, origin=origin)
    if is_record(v):
        return _mapped_record(v, lambda x, k: _scratch_value(x, f"{origin}.{k}"))
    if isinstance(v, Const) and v.value is None:
        return v  # an empty pytree: the kernel gets None (checked with jax 0.10.2)
    return UNKNOWN


def _mapped_record(v: Instance, leaf) -> Instance:
    """The same pytree node with `leaf` applied to each spec / allocation field
    (`LhsRef(value=BlockSpec(...), scale=None)` -> `LhsRef(value=<Ref>, scale=None)`);
    other fields (static configuration) are kept as they are."""
    out = Instance(v.cls)
    for k, x in v.attrs.items():
        out.attrs[k] = leaf(x, k) if isinstance(x, (Spec, Alloc, Seq, Instance)) \
            or to_alloc(x) is not None else x
    return out


def _top_items(v: Value, present: bool) -> list[Value] | None:
    """Top-level items of in_specs / out_specs / out_shape: the kernel gets
    one parameter per item (a pytree item arrives as a tuple of Refs)."""
    if not present:
        return None
    if isinstance(v, Seq) and v.keys is None:
        return list(v.items)
    if v is UNKNOWN or isinstance(v, Seq):
        return None
    return [v]


def _operand_value(spec: Value, shape: Value | None, origin: str, output: bool) -> Value:
    if isinstance(spec, Seq):
        shapes = shape.items if isinstance(shape, Seq) and len(shape.items) == len(spec.items) \
            else [None] * len(spec.items)
        return Seq(items=tuple(_operand_value(s, sh, f"{origin}[{i}]", output)
                               for i, (s, sh) in enumerate(zip(spec.items, shapes))),
                   keys=spec.keys, origin=origin)
    if isinstance(spec, Const) and spec.value is None and shape is not None \
            and isinstance(shape, Const) and shape.value is None:
        return Const(value=None)  # an absent operand: the kernel gets None
    if spec is UNKNOWN:
        return UNKNOWN
    if isinstance(spec, SeqOf):  # `[spec for _ in operands]`: a list of Refs, length unknown
        elem = _operand_value(spec.elem, None, f"{origin}[i]", output)
        return SeqOf(elem=elem, origin=origin) if elem is not UNKNOWN else UNKNOWN
    if is_record(spec):
        return _mapped_record(spec, lambda x, k: _operand_value(x, None, f"{origin}.{k}", output))
    if output:
        return _output_ref(spec, shape, origin)
    return _operand_ref(spec, shape, origin)


def _segments_to_args(segments: list[list[Value] | None], params: list[str], required: int,
                      has_vararg: bool, tail: list[Value] = (),
                      star: Value = STAR_UNKNOWN) -> tuple[list[Value] | None, str]:
    """Lay the kernel's parameter segments (prefetch, inputs, outputs,
    scratch; None = count unknown) onto its positional parameters. Known
    segments bind from the front up to the first unknown one, and from the
    back after the last unknown one when the signature leaves no doubt (no
    `*args`, no defaults). Returns (args, reason when nothing binds)."""
    if all(seg is not None for seg in segments):
        args = [v for seg in segments for v in seg]
        if not has_vararg and not (required <= len(args) <= len(params)):
            return None, (f"the kernel takes {len(params)} positional parameters but the "
                          f"launch binds {len(args)}")
        return args, ""
    first = next(i for i, seg in enumerate(segments) if seg is None)
    last = max(i for i, seg in enumerate(segments) if seg is None)
    front = [v for seg in segments[:first] for v in seg]
    back = [v for seg in segments[last + 1:] for v in seg]
    if segments[-1] is None and tail:
        back = list(tail)  # the known last scratch entries
    if has_vararg and len(front) >= len(params):
        return front + [star] + back, ""  # `*refs` knows its first and last items
    if has_vararg or required != len(params) or not back:
        if len(front) > len(params) and not has_vararg:
            return None, "the launch binds more parameters than the kernel takes"
        return front + [STAR_UNKNOWN], ""
    middle = len(params) - len(front) - len(back)
    if middle < 0:
        return None, "the launch binds more parameters than the kernel takes"
    return front + [UNKNOWN] * middle + back, ""


def run_kernel(interp: Interpreter, pc: PallasCallable, n_args: int | None, frame: Frame) -> None:
    """Bind the kernel's parameters as pallas_call does and run its body."""
    # One run per kernel a launch site is given: a shared launcher
    # (`def launch(kernel, ...)`) is called with several kernels, and a kernel
    # partial'd with other constants may take other branches. Bounded per site.
    key = (pc.node_id, _kernel_identity(pc.kernel, interp.module_scope))
    if key in interp.kernels_done:
        return
    runs = interp.kernel_runs.get(pc.node_id, 0)
    if runs >= MAX_KERNELS_PER_SITE:
        return
    interp.kernel_runs[pc.node_id] = runs + 1
    interp.kernels_done.add(key)
    if isinstance(pc.kernel, Choice):  # `kernel = a if flag else b`: check each
        for i, option in enumerate(pc.kernel.options):
            run_kernel(interp, replace(pc, kernel=option, node_id=hash((pc.node_id, i))), n_args,
                       frame)
        return
    kernel = pc.kernel
    be = backend.of_launch(pc.compiler_params, pc.backend) or interp.file_backend
    knode = getattr(kernel, "node", None)
    launch = Launch(api="pallas_call", node=pc.node, kernel=getattr(knode, "name", ""),
                    kernel_node=knode, bound=False, backend=be, in_specs=pc.in_specs,
                    out_specs=pc.out_specs, out_shape=pc.out_shape, scratch=pc.scratch,
                    grid=pc.grid, compiler_params=pc.compiler_params)
    interp.events.launches.append(launch)
    if not isinstance(kernel, Func):
        launch.reason = "the kernel is not a function the engine can see"
        return
    n_pref = pc.num_prefetch
    prefetch = [Ref(origin=f"scalar prefetch operand #{i}", space=Space.SMEM,
                    decl=OperandDecl(pc.node, i, pc.node))
                for i in range(n_pref)] if n_pref is not None else None
    # Inputs: one parameter per top-level in_specs item.
    inputs: list[Value] | None = None
    in_items = _top_items(pc.in_specs, pc.has_in_specs)
    if in_items is not None:
        inputs = [_operand_value(s, None, f"input #{i} (in_specs[{i}])", False)
                  for i, s in enumerate(in_items)]
    elif not pc.has_in_specs and n_args is not None and n_pref is not None:
        inputs = [Ref(origin=f"input #{i} (whole array, no in_specs)", space=Space.VMEM,
                      decl=OperandDecl(pc.node, n_pref + i, pc.node))
                  for i in range(n_args - n_pref)]
    # Outputs: one per top-level out_shape item, described by out_specs.
    outputs: list[Value] | None = None
    shapes = _top_items(pc.out_shape, pc.out_shape is not UNKNOWN)
    specs = _top_items(pc.out_specs, pc.has_out_specs)
    if specs is not None and shapes is not None and len(specs) == 1 and len(shapes) > 1 \
            and not isinstance(pc.out_specs, Seq):
        specs = specs * len(shapes)
    if specs is not None:
        outputs = [_operand_value(s, shapes[i] if shapes and i < len(shapes) else None,
                                  f"output #{i} (out_specs[{i}])", True)
                   for i, s in enumerate(specs)]
    elif not pc.has_out_specs and shapes is not None:
        outputs = [_operand_value(Const(value=None), s, f"output #{i} (whole array, no out_specs)",
                                  True) for i, s in enumerate(shapes)]
    # Scratch: a dict becomes keyword arguments.
    scratch_pos: list[Value] | None = []
    scratch_kw: dict[str, Value] = {}
    sv = pc.scratch
    if isinstance(sv, Seq) and sv.keys is not None:
        for k, item in zip(sv.keys, sv.items):
            scratch_kw[str(k)] = _scratch_value(item, f"scratch_shapes[{k!r}]")
    elif isinstance(sv, Seq):
        scratch_pos = [_scratch_value(item, f"scratch_shapes[{i}]") for i, item in enumerate(sv.items)]
    else:
        scratch_pos = None
    # A scratch list whose length flags decide: its last entries are known.
    scratch_tail = [_scratch_value(item, f"scratch_shapes[-{len(sv.tail) - i}]")
                    for i, item in enumerate(sv.tail)] if isinstance(sv, Partial) else []
    positional = _positional_params(kernel)
    if positional is None:
        launch.reason = "the kernel is not a function the engine can see"
        return
    params, has_vararg = positional
    params = [p for p in params if p not in scratch_kw]  # a dict's entries arrive as keywords
    segments = [prefetch, inputs, outputs, scratch_pos]
    if isinstance(sv, Partial) and sv.head:
        # ... and so are its first ones (`[a, b] + ([c] if flag else [])`).
        segments[-1:] = [[_scratch_value(item, f"scratch_shapes[{i}]")
                          for i, item in enumerate(sv.head)], None]
    # The optional entries after those, when they are all alike, are what
    # a `*refs` parameter holds.
    rest = _scratch_value(sv.rest, "scratch_shapes[...]") if isinstance(sv, Partial) else UNKNOWN
    args, reason = _segments_to_args(segments, params, _required(kernel, params), has_vararg,
                                     scratch_tail, StarUnknown(elem=rest) if rest is not UNKNOWN
                                     else STAR_UNKNOWN)
    if args is None:
        launch.reason = reason
        # Another call of the launcher may make countable specs (a caller
        # that passes the flag which adds outputs): let it try.
        interp.kernels_done.discard(key)
        return
    name = getattr(kernel.node, "name", "<lambda>")
    interp.kernels.append(name)
    origins = {}
    for p, v in zip(params, args):
        if isinstance(v, Value) and v.origin:
            origins[p] = v.origin
    launch.bound = True
    # Launcher variants often bind the same kernel with the same values (a
    # flag that changes only the wrapper): that run would repeat every event.
    same = interp.same_kernel_run(kernel, args, scratch_kw, be, frame)
    if same is not None:
        launch.kernel_id = same
        return
    launch.kernel_id = interp._kernel_count + 1
    interp.call_func(kernel, args, scratch_kw, frame, kernel=True, param_origin=origins,
                     call_node=pc.kernel_arg or pc.node, backend_name=be)


MAX_KERNELS_PER_SITE = 8


def _kernel_identity(kernel: Value, module_scope=None):
    """Which function, the constants partial() bound to it and, for a kernel
    defined inside a launcher, the functions its closure holds: a shared
    `launch(kernel=...)` wraps each user kernel in its own `wrapper(...)`
    that calls `kernel(...)`, one kernel per closure."""
    if not isinstance(kernel, Func):
        return id(kernel) if isinstance(kernel, Choice) else None
    bound = list(enumerate(kernel.bound_args)) + list(kernel.bound_kwargs)
    consts = tuple((k, c) for k, v in bound if (c := _const_key(v)) is not None)
    scope = kernel.scope
    if scope is None or scope is module_scope:
        return (id(kernel.node), consts)
    funcs = tuple(sorted((name, id(v.node)) for name, v in getattr(scope, "vars", {}).items()
                         if isinstance(v, Func)))
    return (id(kernel.node), consts, funcs)


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


def _output_ref(spec: Value, shape: Value | None, origin: str) -> Value:
    alloc = to_alloc(shape) if shape is not None else None
    if alloc is not None and alloc.sem is not None:
        return alloc.to_ref(origin)
    return _operand_ref(spec, shape, origin)


def _required(func: Func, params: list[str]) -> int:
    """How many of `params` have no default value."""
    a = func.node.args
    positional = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    defaults = positional[len(positional) - len(a.defaults):] if a.defaults else []
    return sum(1 for p in params if p not in defaults)


def _positional_params(func: Func):
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    a = node.args
    names = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    names = names[len(func.bound_args):]
    bound_kw = {k for k, _ in func.bound_kwargs}
    names = [n for n in names if n not in bound_kw]
    return names, a.vararg is not None


def _launch(interp: Interpreter, api_name: str, node, func: Value, be: str, **values) -> Launch:
    knode = getattr(func, "node", None)
    launch = Launch(api=api_name, node=node, kernel=getattr(knode, "name", ""),
                    kernel_node=knode, bound=False, backend=be, **values)
    interp.events.launches.append(launch)
    return launch


def _bind_and_run(interp: Interpreter, launch: Launch, func: Func, args: list[Value],
                  kw: dict[str, Value], frame: Frame, params: list[str] | None = None) -> None:
    launch.bound = True
    launch.kernel_id = interp._kernel_count + 1 if not frame.kernel_id else frame.kernel_id
    interp.kernels.append(getattr(func.node, "name", "<lambda>"))
    origins = {p: v.origin for p, v in zip(params or [], args) if isinstance(v, Value) and v.origin}
    interp.call_func(func, args, kw, frame, kernel=True, param_origin=origins,
                     call_node=launch.node, backend_name=launch.backend)


def pl_kernel(interp: Interpreter, func: Func, kwargs: dict[str, Arg], frame: Frame,
              node: ast.AST | None = None) -> Value:
    """`pl.kernel(body, out_type=..., mesh=..., scratch_types=...)`: the body
    gets input refs, output refs, then scratch refs. Inputs are only known
    when the result is called, so bind from the end."""
    out = kwargs.get("out_type") or kwargs.get("out_shape")
    scratch = kwargs.get("scratch_types") or kwargs.get("scratch_shapes")
    be = backend.of_launch(_value(kwargs.get("mesh")), _value(kwargs.get("compiler_params"))) \
        or interp.file_backend
    launch = _launch(interp, "kernel", node, func, be, out_shape=_value(out),
                     scratch=_value(scratch), compiler_params=_value(kwargs.get("compiler_params")))
    if backend.sparsecore_mesh(_value(kwargs.get("mesh"))):
        launch.core = backend.SPARSECORE
    shapes = _leaves(out.value) if out is not None else []
    sv = scratch.value if scratch is not None else Seq()
    positional = _positional_params(func)
    if positional is None:
        launch.reason = "the kernel is not a function the engine can see"
        return UNKNOWN
    params, has_vararg = positional
    scratch_kw: dict[str, Value] = {}
    scratch_pos: list[Value] | None = []
    if isinstance(sv, Seq) and sv.keys is not None:
        scratch_kw = {str(k): _scratch_value(v, f"scratch_types[{k!r}]") for k, v in zip(sv.keys, sv.items)}
        params = [p for p in params if p not in scratch_kw]  # they arrive as keywords
    elif isinstance(sv, Seq):
        scratch_pos = [_scratch_value(v, f"scratch_types[{i}]") for i, v in enumerate(sv.items)]
    else:
        scratch_pos = None
    outputs = None if shapes is None else [
        Ref(origin=f"output #{i} (out_type)", space=Space.UNKNOWN, decl=getattr(s, "decl", None),
            shape=s.shape if isinstance(s, ShapeDtype) else None,
            dtype=s.dtype if isinstance(s, ShapeDtype) else None)
        for i, s in enumerate(shapes)]
    required = _required(func, params)
    args, reason = _segments_to_args([None, outputs, scratch_pos], params, required, has_vararg)
    if outputs is None and scratch_pos == [] and not scratch_kw and not has_vararg \
            and required == len(params) and params:
        # No scratch: every parameter is an input or an output, and the
        # call's operands will say which (handled as below).
        args = [UNKNOWN] * len(params)
    if args is None or (args and args[0] is STAR_UNKNOWN):
        launch.reason = reason or "neither the outputs nor the scratch can be counted"
        return UNKNOWN
    if outputs is not None:  # then everything before the outputs is an input Ref
        n_in = len(args) - len(outputs) - len(scratch_pos or [])
        args = [Ref(origin=f"input #{i}", space=Space.UNKNOWN) for i in range(n_in)] + args[n_in:]
        if n_in:
            # The inputs' structure (a dataclass of arrays arrives as the same
            # dataclass of Refs) is known when the result is called: run then.
            kc = KernelCallable(launch=launch, func=func, args=tuple(args), n_in=n_in,
                                scratch_kw=tuple(scratch_kw.items()), params=tuple(params))
            interp.pending_kernels.append((kc, frame))
            return kc
    elif args and args[0] is UNKNOWN:
        # Outputs not counted (`out_shape=x`, an array), scratch counted from
        # the back: the params before the scratch are the inputs, then the
        # outputs. The call's operands say how many are inputs: run then.
        n_open = len(args) - len(scratch_pos or [])
        kc = KernelCallable(launch=launch, func=func, args=tuple(args), n_open=n_open,
                            scratch_kw=tuple(scratch_kw.items()), params=tuple(params))
        interp.pending_kernels.append((kc, frame))
        return kc
    _bind_and_run(interp, launch, func, args, scratch_kw, frame, params)
    return UNKNOWN


@frozen
class KernelCallable(Value):
    """What `pl.kernel(body, ...)` returns when the body takes inputs: called
    with the operands, it runs the body (inputs first, then the outputs and
    scratch counted at the launch)."""

    launch: object = None
    func: Value = UNKNOWN
    args: tuple = ()  # the body's positional values, inputs as plain Refs
    n_in: int = 0
    n_open: int = 0  # inputs and outputs not told apart yet (the operands will)
    scratch_kw: tuple = ()
    params: tuple = ()


def run_pl_kernel(interp: Interpreter, kc: KernelCallable, operands: list[Value] | None,
                  frame: Frame) -> Value:
    """Run a pl.kernel body once; `operands` (the call's arguments, None when
    it was never called) give the inputs their pytree structure."""
    if id(kc.launch) in interp.kernels_done:
        return UNKNOWN
    interp.kernels_done.add(id(kc.launch))
    args = list(kc.args)
    if operands is not None and len(operands) == kc.n_in:
        for i, operand in enumerate(operands):
            if is_record(operand):
                args[i] = _input_tree(operand, f"input #{i}", 0)
    elif operands is not None and len(operands) <= kc.n_open:
        for i, operand in enumerate(operands):  # one parameter per operand, its Ref tree
            args[i] = _input_tree(operand, f"input #{i}", 0)
        # The outputs follow, each a Ref or a tree of them: a Ref where named so (`o_hbm`).
        for i in range(len(operands), kc.n_open):
            if i < len(kc.params) and standalone.named_as_ref(kc.params[i]):
                args[i] = Ref(origin=f"output #{i - len(operands)}", space=Space.UNKNOWN)
    _bind_and_run(interp, kc.launch, kc.func, args, dict(kc.scratch_kw), frame, list(kc.params))
    return UNKNOWN


def _input_tree(v: Value, origin: str, depth: int) -> Value:
    """A kernel input as the body sees it: every array leaf of a dataclass
    pytree is a Ref; static fields and None stay as they are."""
    if isinstance(v, Const) and v.value is None:
        return v
    if is_record(v) and depth < 4:
        out = Instance(v.cls)
        for k, x in v.attrs.items():
            out.attrs[k] = x if k in v.cls.static else _input_tree(x, f"{origin}.{k}", depth + 1)
        return out
    if isinstance(v, Seq) and depth < 4:
        return replace(v, items=tuple(_input_tree(x, f"{origin}[{i}]", depth + 1)
                                      for i, x in enumerate(v.items)))
    return Ref(origin=origin, space=Space.UNKNOWN)


def core_map(interp: Interpreter, func: Func, args: list[Arg], kwargs: dict[str, Arg],
             frame: Frame, node: ast.AST | None = None) -> Value:
    mesh = args[0].value if args else _value(kwargs.get("mesh"))
    be = backend.of_launch(mesh, _value(kwargs.get("compiler_params"))) or interp.file_backend
    scratch = kwargs.get("scratch_shapes")
    launch = _launch(interp, "core_map", node, func, be, scratch=_value(scratch),
                     compiler_params=_value(kwargs.get("compiler_params")))
    if backend.sparsecore_mesh(mesh):
        launch.core = backend.SPARSECORE
    sv = scratch.value if scratch is not None else Seq()
    pos: list[Value] = []
    kw: dict[str, Value] = {}
    if isinstance(sv, Seq) and sv.keys is not None:
        kw = {str(k): _scratch_value(v, f"scratch_shapes[{k!r}]") for k, v in zip(sv.keys, sv.items)}
    elif isinstance(sv, Seq):
        pos = [_scratch_value(v, f"scratch_shapes[{i}]") for i, v in enumerate(sv.items)]
    else:
        pos = [STAR_UNKNOWN]
    _bind_and_run(interp, launch, func, pos, kw, frame)
    return Const(value=None)


@frozen
class PipelineCallable(Value):
    """What `pltpu.emit_pipeline(body, ...)` returns: called with the
    operands (and `scratches=`), it runs the body on one block per spec."""

    body: Value = UNKNOWN
    blocks: tuple | None = ()  # one Ref per in/out spec leaf; None: unknown
    node: object = None
    node_id: int = 0
    block_elem: Value = UNKNOWN  # blocks None: what every block is, if that is known


def emit_pipeline(interp: Interpreter, args: list[Arg], kwargs: dict[str, Arg],
                  node: ast.Call, frame: Frame) -> Value:
    """The body of `pltpu.emit_pipeline(body, grid=..., in_specs=..., out_specs=...)`
    gets one VMEM block Ref per in/out spec, then the `scratches=` given to
    the pipeline when it is called."""
    body = args[0] if args else kwargs.get("body")
    if body is None or not isinstance(body.value, Func):
        return UNKNOWN
    refs: list[Value] | None = []
    kinds: list[Value] = []  # every block the specs may give, when they cannot be counted
    for key in ("in_specs", "out_specs"):
        spec = kwargs.get(key)
        if spec is None:
            continue
        # One body argument per top-level spec (jax normalises a single spec
        # to a tuple of one); a nested item gives a pytree of blocks.
        v = spec.value
        items = list(v.items) if isinstance(v, Seq) and v.keys is None else \
            None if isinstance(v, (SeqOf, Partial)) or (isinstance(v, Seq) and v.keys) else [v]
        if items is None:
            refs = None
        for i, s in enumerate(items if items is not None else _spec_kinds(v)):
            block = _block_tree(s, f"pipeline block ({key}[{i}])", 0)
            kinds.append(block)
            if refs is not None:
                refs.append(block)
    elem = join_all(kinds) if refs is None and kinds else UNKNOWN
    pipe = PipelineCallable(body=body.value, blocks=tuple(refs) if refs is not None else None,
                            node=node, node_id=hash((id(node), interp.variant)),
                            block_elem=elem if isinstance(elem, Ref) else UNKNOWN)
    interp.pending_pipelines.append((pipe, frame))
    return pipe


def _block_tree(s: Value, origin: str, depth: int) -> Value:
    """The block(s) a pipeline body gets for one spec pytree."""
    if isinstance(s, Seq) and s.keys is None and depth < 4:
        return replace(s, items=tuple(_block_tree(x, f"{origin}[{i}]", depth + 1)
                                      for i, x in enumerate(s.items)))
    if is_record(s) and depth < 4:
        return _mapped_record(s, lambda x, k: _block_tree(x, f"{origin}.{k}", depth + 1))
    return _block_ref(s, origin)


def _block_ref(s: Value, origin: str) -> Value:
    """A pipeline block: VMEM of the block shape; an optional spec (None
    when an operand is absent) gives None."""
    if isinstance(s, Const) and s.value is None:
        return Const(value=None)
    if not isinstance(s, Spec):
        return UNKNOWN
    ref = _operand_ref(s, None, origin)
    if s.space is None:
        ref = Ref(origin=ref.origin, space=Space.VMEM, shape=s.block_shape, decl=ref.decl)
    return ref


def run_pipeline(interp: Interpreter, pipe: PipelineCallable, kwargs: dict[str, Arg] | None,
                 frame: Frame) -> Value:
    # Once per kernel: a pipeline seen while its kernel function ran on its
    # own (no kernel) must still run when that function is launched.
    key = (pipe.node_id, frame.kernel_id)
    if key in interp.kernels_done:
        return Const(value=None)
    interp.kernels_done.add(key)
    launch = _launch(interp, "emit_pipeline", pipe.node, pipe.body, interp.file_backend)
    if frame.kernel_id:
        launch.backend = interp.kernel_backend.get(frame.kernel_id, interp.file_backend)
    scratch = (kwargs or {}).get("scratches")
    tail: list[Value]
    if scratch is None and kwargs is not None:
        tail = []
    elif scratch is not None and isinstance(scratch.value, Seq) and scratch.value.keys is None:
        tail = list(scratch.value.items)
    else:
        tail = [STAR_UNKNOWN]
    blocks = pipe.blocks
    if blocks is None:
        # Specs of unknown number but one kind (`tuple(BlockSpec(...) for s
        # in range(n))`): a `*refs` body still knows what each block is.
        a = pipe.body.node.args
        if pipe.block_elem is UNKNOWN or a.vararg is None or a.posonlyargs or a.args:
            launch.reason = "the pipeline's in_specs / out_specs cannot be counted"
            interp.call_func(pipe.body, [], {}, frame, unknown_params=True, kernel=frame.kernel)
            return Const(value=None)
        blocks = (StarUnknown(elem=pipe.block_elem),)
    launch.bound = True
    interp.call_func(pipe.body, list(blocks) + tail, {}, frame, kernel=True,
                     call_node=pipe.node)
    return Const(value=None)


def run_scoped(interp: Interpreter, body: Value, types: list[Arg], kw_types: dict[str, Arg],
               node: ast.AST, frame: Frame) -> Value:
    """`pl.run_scoped(body, *types, **kw_types)`: the body runs with one Ref
    per allocation (HBM / ANY allocations are recorded for PAL208)."""
    refs, kw_refs = [], {}
    for a in types:
        refs.append(_scoped_ref(interp, a, node))
    for k, a in kw_types.items():
        if k == "collective_axes":
            continue
        kw_refs[k] = _scoped_ref(interp, a, node)
    if not isinstance(body, Func):
        return UNKNOWN
    origins = {}
    params = [p.arg for p in list(body.node.args.posonlyargs) + list(body.node.args.args)]
    for i, p in enumerate(params[len(body.bound_args):]):
        if i < len(types):
            origins[p] = f"pl.run_scoped allocation #{i + 1}"
    for k in kw_refs:
        origins[k] = f"pl.run_scoped allocation `{k}`"
    return interp.call_func(body, refs, kw_refs, frame, param_origin=origins)


def _scoped_ref(interp: Interpreter, a: Arg, call_node) -> Value:
    alloc = to_alloc(a.value)
    if alloc is None and isinstance(a.value, Seq):  # a pytree of allocations
        return Seq(items=tuple(_scoped_ref(interp, Arg(a.node, v), call_node)
                               for v in a.value.items), keys=a.value.keys)
    if alloc is None and is_record(a.value):  # a dataclass pytree of them
        return _mapped_record(a.value, lambda v, _: _scoped_ref(interp, Arg(a.node, v), call_node))
    if alloc is None:
        return UNKNOWN
    if alloc.space in (Space.HBM, Space.ANY) and a.node is not None:
        interp.events.scoped.append(ScopedAlloc(kernel_id=interp._kernel_id, site=interp._site,
                                                node=a.node, space=alloc.space.value,
                                                call=call_node))
    line = getattr(call_node, "lineno", 0)
    col = getattr(a.node, "col_offset", 0)
    return alloc.to_ref(f"pl.run_scoped allocation (line {line}, col {col})", a.node)
