"""Kernels and pipelines: `pallas_call`, `pl.kernel`, `core_map`,
`emit_pipeline`, `run_scoped` / `with_scoped`, `pl.when` / `pl.loop`
decorators and `program_id`. Binding a kernel's parameters is binding/'s
job; this module only routes the calls there."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.decorators import (CoreMapDecorator, KernelDecorator,
                                                  LoopDecorator, RunStateDecorator, WhenDecorator,
                                                  WithScoped)
from pallas_lsp.engine.binding.kernel import pl_kernel
from pallas_lsp.engine.binding.pallas_call import PallasCallable, callable_kernel, pallas_call, run_kernel
from pallas_lsp.engine.binding.pipeline import emit_pipeline
from pallas_lsp.engine.binding.scratch import run_scoped
from pallas_lsp.engine.events import Arg, pick
from pallas_lsp.engine.model import Array, Func, Seq, Value
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import UNKNOWN, Choice, Instance, ShapeDtype, StarUnknown, is_record

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


def handle(host: LaunchHost, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t == "pallas_call":
        return pallas_call(host, args, kwargs, node, frame)
    if t == "kernel":
        if len(args) > 1 and "out_type" not in kwargs and "out_shape" not in kwargs:
            kwargs = {**kwargs, "out_type": args[1]}  # `pl.kernel(body, out_type, mesh=...)`
        body = callable_kernel(host, pick(args, kwargs, 0, "body"))
        if body is not None and isinstance(body.value, Seq) and body.value.items \
                and all(isinstance(b, Func) for b in body.value.items):
            # Several bodies (SparseCore: one per mesh), each bound alike.
            for one in body.value.items:
                pl_kernel(host, one, kwargs, frame, node)
            return UNKNOWN
        if body is not None and isinstance(body.value, Choice):
            # `pl.kernel(body_a if c else body_b, ...)`: each body, bound alike.
            return KernelDecorator(kwargs=tuple(kwargs.items())).apply(host, body.value, node,
                                                                       frame)
        if body is None or not isinstance(body.value, Func):
            return KernelDecorator(kwargs=tuple(kwargs.items()), made_at=node)
        return pl_kernel(host, body.value, kwargs, frame, node)
    if t == "core_map":
        return CoreMapDecorator(args=tuple(args), kwargs=tuple(kwargs.items()), made_at=node)
    if t == "run_scoped":
        body = pick(args, kwargs, 0, "f")
        if body is not None and isinstance(body.value, Func):
            return run_scoped(host, body.value, args[1:], {
                k: v for k, v in kwargs.items() if k not in ("f", "collective_axes")}, node, frame)
        return UNKNOWN
    if t == "with_scoped":
        return WithScoped(args=tuple(args), kwargs=tuple(
            (k, a) for k, a in kwargs.items() if k != "collective_axes"))
    if is_run_state(name):
        # `pl.run_state(f)`: `f` gets Refs when the result is called.
        body = pick(args, kwargs, 0, "f")
        return RunStateDecorator() if body is None else \
            RunStateDecorator().apply(host, body.value, node, frame)
    if t == "when":
        return WhenDecorator()
    if t == "loop":
        return LoopDecorator()
    if t == "emit_pipeline":
        return emit_pipeline(host, args, kwargs, node, frame)
    if t in ("program_id", "num_programs"):
        return Array(origin=t)
    return None


# `run_state` where jax defines it (pl.run_state re-exports it).
RUN_STATE = {"jax._src.state.discharge.run_state", "jax._src.state.discharge.run_state_reference",
             "jax._src.state.run_state"}


def is_run_state(name: str) -> bool:
    """`pl.run_state` / `pltpu.run_state` (any canonical `*.run_state`), or jax's own."""
    return api.tail(name) == "run_state" or name in RUN_STATE


def invoke_pallas_callable(host: LaunchHost, pc: PallasCallable, args: list[Arg],
                           frame: Frame) -> Value:
    """`pl.pallas_call(kernel, ...)(*operands)`: the kernel runs with as many
    operands as the call passes (unknown when one is a `*args` of unknown length)."""
    host.operand_nodes.setdefault(id(pc.node), [a.node for a in args])
    made = {a.value.made_by for a in args if isinstance(a.value, Array) and a.value.made_by}
    if made:
        host.events.fed_by.setdefault(id(pc.node), set()).update(made)
    n_args = len(args) if not any(isinstance(a.value, StarUnknown) for a in args) else None
    known = operand_shapes(args) if n_args is not None else None
    if known is not None:
        nodes = tuple(a.node for a in args)
        earlier = None if _changes_refs(pc, known) else _earlier_launch(host, pc)
        if earlier is not None:
            # The kernel would see the same Refs: the launch is recorded
            # again with its operands (for the block and VMEM rules), not run.
            host.events.launches.append(replace(earlier, operands=known, operand_nodes=nodes,
                                                variant=getattr(host, "variant_label", "")))
            return outputs(pc.out_shape, made_by=id(pc.node))
        # The kernel again, its Refs given the arrays' dtypes and shapes
        # (once per distinct set of operands, a few per launch site).
        runs = host.kernel_runs.get(("operands", pc.node_id), 0)
        if runs < MAX_OPERAND_RUNS:
            host.kernel_runs[("operands", pc.node_id)] = runs + 1
            host.pending[:] = [(p, f) for p, f in host.pending if p is not pc]  # run here
            pc = replace(pc, operands=known, operand_nodes=nodes,
                         node_id=hash((pc.node_id, known, _config(pc))))
    run_kernel(host, pc, n_args, frame)
    return outputs(pc.out_shape, made_by=id(pc.node))


def _changes_refs(pc: PallasCallable, known: tuple) -> bool:
    """Whether the operands give an input Ref something it lacks without
    them: a dtype, or (no in_specs: whole arrays) a shape. Scalar-prefetch
    operands never do."""
    n_pref = pc.num_prefetch
    if n_pref is None:
        return True
    inputs = [sd for sd in known[n_pref:] if sd is not None]
    return any(sd.dtype for sd in inputs) or (not pc.has_in_specs and bool(inputs))


def _earlier_launch(host: LaunchHost, pc: PallasCallable):
    """The launch this call site recorded with these specs and this kernel,
    already run; None when there is none (a shared wrapper's site launches
    other kernels with the same specs)."""
    config = _config(pc)
    knode = getattr(pc.kernel, "node", None)
    for launch in reversed(host.events.launches):
        if launch.node is pc.node and launch.operands is None and launch.bound \
                and launch.kernel_node is knode and _config(launch) == config:
            return launch
    return None


MAX_OPERAND_RUNS = 8


def _config(pc: PallasCallable):
    """What else tells two calls of one launch site apart (a block size the
    caller chose); id() for what cannot be hashed."""
    out = []
    for v in (pc.in_specs, pc.out_specs, pc.out_shape, pc.grid, pc.scratch):
        try:
            out.append(hash(v))
        except TypeError:
            out.append(id(v))
    return tuple(out)


def operand_shapes(args: list[Arg]) -> tuple | None:
    """A ShapeDtype per operand whose shape or dtype is known (else None);
    None when none is."""
    out = tuple(ShapeDtype(shape=a.value.shape, dtype=a.value.dtype, decl=a.value.decl)
                if isinstance(a.value, Array) and (a.value.shape is not None or a.value.dtype)
                and a.value.sem is None else None for a in args)
    return out if any(x is not None for x in out) else None


def outputs(out_shape: Value, depth: int = 0, made_by: int = 0) -> Value:
    """What a pallas_call returns: `out_shape`'s structure (a list, tuple,
    dict or dataclass pytree) with an Array per ShapeDtypeStruct, each
    knowing the call that `made_by` it; anything else (semaphore outputs,
    unknown shapes) is Unknown."""
    if depth > 4:
        return UNKNOWN
    if isinstance(out_shape, ShapeDtype):
        return Array(origin="a pallas_call output", shape=out_shape.shape, dtype=out_shape.dtype,
                     made_by=made_by)
    if isinstance(out_shape, Seq):
        return Seq(items=tuple(outputs(x, depth + 1, made_by) for x in out_shape.items),
                   keys=out_shape.keys)
    if is_record(out_shape):
        out = Instance(out_shape.cls)
        for k, x in out_shape.attrs.items():
            out.attrs[k] = x if k in out_shape.cls.static else outputs(x, depth + 1, made_by)
        return out
    return UNKNOWN
