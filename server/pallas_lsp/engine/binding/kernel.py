"""`pl.kernel` and `core_map`: the body gets input Refs, output Refs,
then scratch Refs (pl.kernel; inputs only known when its result is called,
`KernelCallable`), or only the scratch Refs (core_map); the mesh decides
the backend and core (SparseCore meshes)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import backend, standalone
from pallas_lsp.engine.binding.launch import (arg_value, bind_and_run, count_required, new_launch,
                                              positional_params, segments_to_args)
from pallas_lsp.engine.binding.scratch import scratch_value
from pallas_lsp.engine.binding.specs import spec_leaves
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Const, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, Instance, ShapeDtype, StarUnknown,
                                      is_record)

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


def pl_kernel(host: LaunchHost, func: Func, kwargs: dict[str, Arg], frame: Frame,
              node: ast.AST | None = None) -> Value:
    """`pl.kernel(body, out_type=..., mesh=..., scratch_types=...)`: the body
    gets input refs, output refs, then scratch refs. Inputs are only known
    when the result is called, so bind from the end."""
    out = kwargs.get("out_type") or kwargs.get("out_shape")
    scratch = kwargs.get("scratch_types") or kwargs.get("scratch_shapes")
    be = backend.of_launch(arg_value(kwargs.get("mesh")), arg_value(kwargs.get("compiler_params"))) \
        or host.file_backend
    launch = new_launch(host, "kernel", node, func, be, out_shape=arg_value(out),
                     scratch=arg_value(scratch), compiler_params=arg_value(kwargs.get("compiler_params")))
    if backend.sparsecore_mesh(arg_value(kwargs.get("mesh"))):
        launch.core = backend.SPARSECORE
    shapes = spec_leaves(out.value) if out is not None else []
    sv = scratch.value if scratch is not None else Seq()
    positional = positional_params(func)
    if positional is None:
        launch.reason = "the kernel is not a function the engine can see"
        return UNKNOWN
    params, has_vararg = positional
    scratch_kw: dict[str, Value] = {}
    scratch_pos: list[Value] | None = []
    if isinstance(sv, Seq) and sv.keys is not None:
        scratch_kw = {str(k): scratch_value(v, f"scratch_types[{k!r}]") for k, v in zip(sv.keys, sv.items)}
        params = [p for p in params if p not in scratch_kw]  # they arrive as keywords
    elif isinstance(sv, Seq):
        scratch_pos = [scratch_value(v, f"scratch_types[{i}]") for i, v in enumerate(sv.items)]
    else:
        scratch_pos = None
    outputs = None if shapes is None else [
        Ref(origin=f"output #{i} (out_type)", space=Space.UNKNOWN, decl=getattr(s, "decl", None),
            shape=s.shape if isinstance(s, ShapeDtype) else None,
            dtype=s.dtype if isinstance(s, ShapeDtype) else None)
        for i, s in enumerate(shapes)]
    required = count_required(func, params)
    args, reason = segments_to_args([None, outputs, scratch_pos], params, required, has_vararg)
    if outputs is None and scratch_pos == [] and not scratch_kw and not has_vararg \
            and required == len(params) and params:
        # No scratch: every parameter is an input or an output, and the
        # call's operands will say which (handled as below).
        args = [UNKNOWN] * len(params)
    if (args is None or (args and args[0] is STAR_UNKNOWN)) and has_vararg \
            and outputs is not None and scratch_pos is not None:
        # `def wrapped(*refs): body(*refs)` (a decorator's wrapper), or
        # `def body(x_ref, o_ref, *scratch)`: the call's operands say how many
        # inputs lead; outputs and scratch follow.
        kc = KernelCallable(launch=launch, func=func, args=tuple(outputs + scratch_pos),
                            n_in=-1, scratch_kw=tuple(scratch_kw.items()), params=tuple(params))
        host.pending_kernels.append((kc, frame))
        return kc
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
            host.pending_kernels.append((kc, frame))
            return kc
    elif args and args[0] is UNKNOWN:
        # Outputs not counted (`out_shape=x`, an array), scratch counted from
        # the back: the params before the scratch are the inputs, then the
        # outputs. The call's operands say how many are inputs: run then.
        n_open = len(args) - len(scratch_pos or [])
        kc = KernelCallable(launch=launch, func=func, args=tuple(args), n_open=n_open,
                            scratch_kw=tuple(scratch_kw.items()), params=tuple(params))
        host.pending_kernels.append((kc, frame))
        return kc
    bind_and_run(host, launch, func, args, scratch_kw, frame, params)
    return UNKNOWN


@frozen
class KernelCallable(Value):
    """What `pl.kernel(body, ...)` returns when the body takes inputs: called
    with the operands, it runs the body (inputs first, then the outputs and
    scratch counted at the launch)."""

    launch: object = None
    func: Value = UNKNOWN
    args: tuple = ()  # the body's positional values, inputs as plain Refs
    n_in: int = 0  # -1: a `*refs` body, its inputs are as many as the operands (then `args`)
    n_open: int = 0  # inputs and outputs not told apart yet (the operands will)
    scratch_kw: tuple = ()
    params: tuple = ()


def run_pl_kernel(host: LaunchHost, kc: KernelCallable, operands: list[Value] | None,
                  frame: Frame) -> Value:
    """Run a pl.kernel body once; `operands` (the call's arguments, None when
    it was never called) give the inputs their pytree structure."""
    if id(kc.launch) in host.kernels_done:
        return UNKNOWN
    if kc.n_in < 0 and operands is None and kc.params:
        # named parameters before `*scratch`: which are inputs and which
        # outputs depends on the operands, and the result was never called
        kc.launch.reason = "neither the outputs nor the scratch can be counted"
        return UNKNOWN
    host.kernels_done.add(id(kc.launch))
    args = list(kc.args)
    if kc.n_in < 0:
        # Operands not known: `*refs` is known from its end (outputs, scratch).
        # (each input a plain Ref, as for a body with named inputs above)
        lead = [StarUnknown(elem=Ref(origin="an input", space=Space.UNKNOWN))] \
            if operands is None else \
            [_input_tree(v, f"input #{i}", 0) for i, v in enumerate(operands)]
        args = lead + args
    if operands is not None and len(operands) == kc.n_in:
        for i, operand in enumerate(operands):
            if is_record(operand) or isinstance(operand, Seq):  # `kernel((x, idx))`: a tuple of Refs
                args[i] = _input_tree(operand, f"input #{i}", 0)
    elif operands is not None and len(operands) <= kc.n_open:
        for i, operand in enumerate(operands):  # one parameter per operand, its Ref tree
            args[i] = _input_tree(operand, f"input #{i}", 0)
        # The outputs follow, each a Ref or a tree of them: a Ref where named so (`o_hbm`).
        for i in range(len(operands), kc.n_open):
            if i < len(kc.params) and standalone.named_as_ref(kc.params[i]):
                args[i] = Ref(origin=f"output #{i - len(operands)}", space=Space.UNKNOWN)
    bind_and_run(host, kc.launch, kc.func, args, dict(kc.scratch_kw), frame, list(kc.params))
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


def core_map(host: LaunchHost, func: Func, args: list[Arg], kwargs: dict[str, Arg],
             frame: Frame, node: ast.AST | None = None) -> Value:
    mesh = args[0].value if args else arg_value(kwargs.get("mesh"))
    be = backend.of_launch(mesh, arg_value(kwargs.get("compiler_params"))) or host.file_backend
    scratch = kwargs.get("scratch_shapes")
    launch = new_launch(host, "core_map", node, func, be, scratch=arg_value(scratch),
                     compiler_params=arg_value(kwargs.get("compiler_params")))
    if backend.sparsecore_mesh(mesh):
        launch.core = backend.SPARSECORE
    sv = scratch.value if scratch is not None else Seq()
    pos: list[Value] = []
    kw: dict[str, Value] = {}
    if isinstance(sv, Seq) and sv.keys is not None:
        kw = {str(k): scratch_value(v, f"scratch_shapes[{k!r}]") for k, v in zip(sv.keys, sv.items)}
    elif isinstance(sv, Seq):
        pos = [scratch_value(v, f"scratch_shapes[{i}]") for i, v in enumerate(sv.items)]
    else:
        pos = [STAR_UNKNOWN]
    bind_and_run(host, launch, func, pos, kw, frame)
    return Const(value=None)
