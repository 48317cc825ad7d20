"""BlockSpecs and grid specs: `pl.BlockSpec` (block shape and memory
space), `PrefetchScalarGridSpec` / `GridSpec`, user subclasses of
BlockSpec (`SpecClass`), and the Ref a kernel gets for an operand
described by a spec and a ShapeDtypeStruct (`operand_value`, pytrees of
specs included). Mirrors jax/_src/pallas/core.py (jax 0.10.2, see
shared/reference/semantics.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.scratch import mapped_record, to_alloc
from pallas_lsp.engine.binding.shapes import SQUEEZED, dim_of, space_of
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Api, Const, Func, Ref, Seq, Shape, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import (UNKNOWN, GridSpec, Partial, Pipelining, SeqOf, ShapeDtype,
                                     Spec, is_record)

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


@frozen
class SpecClass(Value):
    """A user subclass of `pl.BlockSpec` (`class PatchBlockSpec(BlockSpec)`,
    its own `__init__` calling `super().__init__(...)`): calling it makes the
    BlockSpec that `super().__init__` was given."""

    init: object = None  # the subclass's __init__ (FunctionDef), or None
    scope: object = None
    api: str = "pl.BlockSpec"

    def call(self, host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg], node,
             frame: Frame) -> Value:
        if self.init is None:
            return host.call_api(self.api, args, kwargs, node, frame)
        holder = SpecHolder(self.api)
        host.call_func(Func(node=self.init, scope=self.scope), [holder] + [a.value for a in args],
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

    def call(self, host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg], node,
             frame: Frame) -> Value:
        self.holder.box["spec"] = host.call_api(self.holder.api, args, kwargs, node, frame)
        return Const(value=None)


def block_spec(args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    shape_arg = args[0] if args else kwargs.get("block_shape")
    space_arg = kwargs.get("memory_space")
    space: Space | None = None
    if space_arg is not None:
        space = space_of(space_arg.value) or Space.UNKNOWN
    block: Shape | None = None
    full: Shape | None = None  # squeezed dims as 1
    if shape_arg is not None:
        v = shape_arg.value
        if isinstance(v, Seq) and v.keys is None:
            dims, full_dims = [], []
            for d in v.items:
                if _is_squeezed(d):
                    full_dims.append(1)
                    continue
                if isinstance(d, Api) and api.tail(d.name) in ("Blocked", "Element", "BoundedSlice"):
                    dims.append(None)
                else:
                    dims.append(dim_of(d))
                full_dims.append(dims[-1])
            block, full = tuple(dims), tuple(full_dims)
        elif isinstance(v, Const) and isinstance(v.value, tuple):
            block = tuple(d for d in v.value if d is not None)
            full = tuple(1 if d is None else d for d in v.value)
    mode = kwargs.get("pipeline_mode")
    buffers = mode.value.buffers if mode is not None and isinstance(mode.value, Pipelining) else None
    return Spec(space=space, block_shape=block, vmem_shape=full, buffers=buffers)


def _is_squeezed(d: Value) -> bool:
    if isinstance(d, Const) and (d.value is None or d.value == SQUEEZED):
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


def spec_leaves(v: Value) -> list[Value] | None:
    """Flatten a pytree of specs/shapes; None when its structure is unknown."""
    if isinstance(v, Seq):
        out: list[Value] = []
        for item in v.items:
            sub = spec_leaves(item)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if v is UNKNOWN or isinstance(v, (SeqOf, Partial)):
        return None  # how many is not known
    return [v]


def spec_kinds(v: Value) -> list[Value]:
    """Every spec a pytree of unknown structure may hold (its known items,
    and the one each unknown-length part repeats)."""
    if isinstance(v, Seq):
        return [k for item in v.items for k in spec_kinds(item)]
    if isinstance(v, SeqOf):
        return spec_kinds(v.elem)
    if isinstance(v, Partial):
        return [k for item in v.head + v.tail + (v.elem,) for k in spec_kinds(item)]
    return [v]


def operand_ref(spec: Value, shape_dtype: Value | None, origin: str) -> Ref:
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


def top_items(v: Value, present: bool) -> list[Value] | None:
    """Top-level items of in_specs / out_specs / out_shape: the kernel gets
    one parameter per item (a pytree item arrives as a tuple of Refs)."""
    if not present:
        return None
    if isinstance(v, Seq) and v.keys is None:
        return list(v.items)
    if v is UNKNOWN or isinstance(v, (Seq, SeqOf, Partial)):
        return None  # how many operands (`[spec] * len(xs)`) is not known
    return [v]


def operand_value(spec: Value, shape: Value | None, origin: str, output: bool) -> Value:
    if isinstance(spec, Seq):
        shapes = shape.items if isinstance(shape, Seq) and len(shape.items) == len(spec.items) \
            else [None] * len(spec.items)
        return Seq(items=tuple(operand_value(s, sh, f"{origin}[{i}]", output)
                               for i, (s, sh) in enumerate(zip(spec.items, shapes))),
                   keys=spec.keys, origin=origin)
    if isinstance(spec, Const) and spec.value is None and shape is not None \
            and isinstance(shape, Const) and shape.value is None:
        return Const(value=None)  # an absent operand: the kernel gets None
    if spec is UNKNOWN:
        return UNKNOWN
    if isinstance(spec, SeqOf):  # `[spec for _ in operands]`: a list of Refs, length unknown
        elem = operand_value(spec.elem, None, f"{origin}[i]", output)
        return SeqOf(elem=elem, origin=origin) if elem is not UNKNOWN else UNKNOWN
    if is_record(spec):
        return mapped_record(spec, lambda x, k: operand_value(x, None, f"{origin}.{k}", output))
    if output:
        return _output_ref(spec, shape, origin)
    return operand_ref(spec, shape, origin)


def _output_ref(spec: Value, shape: Value | None, origin: str) -> Value:
    alloc = to_alloc(shape) if shape is not None else None
    if alloc is not None and alloc.sem is not None:
        return alloc.to_ref(origin)
    return operand_ref(spec, shape, origin)
