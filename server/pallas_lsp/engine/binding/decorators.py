"""Values that run a function when applied to it: `pl.when`, `pl.loop`,
`functools.partial(<launcher>, ...)`, `pl.with_scoped`, `pl.kernel(...)`,
`core_map(...)` and `run_state` used as decorators. Each routes to its
launcher family's module."""
from __future__ import annotations

import ast
from dataclasses import field
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.binding.kernel import core_map, pl_kernel
from pallas_lsp.engine.binding.pallas_call import pallas_call
from pallas_lsp.engine.binding.pipeline import emit_pipeline
from pallas_lsp.engine.binding.scratch import run_scoped
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Array, Const, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import UNKNOWN, Bound, Choice, SeqOf, ShapeDtype

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


class Decorator(Value):
    """A value that, applied to a function, runs it (pl.when, pl.loop, ...)."""

    def apply(self, host: LaunchHost, func: Value, node: ast.AST, frame: Frame) -> Value:
        return func


@frozen
class WhenDecorator(Decorator):
    def apply(self, host, func, node, frame):
        if isinstance(func, Func):
            host.call_func(func, [], {}, frame)
        elif isinstance(func, Bound) and isinstance(node, ast.Call):
            host.call_method(func, [], {}, node, frame)  # `pl.when(c)(copy.start)`
        return Const(value=None)


@frozen
class LoopDecorator(Decorator):
    def apply(self, host, func, node, frame):
        if isinstance(func, Func):
            frame.loop_depth += 1
            try:
                host.call_func(func, [UNKNOWN], {}, frame)
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

    def apply(self, host, func, node, frame):
        t = api.tail(self.api)
        kwargs = dict(self.kwargs)
        if t == "run_scoped":
            return run_scoped(host, func, list(self.args), kwargs, node, frame)
        if t == "kernel" and isinstance(func, Func):
            return pl_kernel(host, func, kwargs, frame, node)
        if t == "core_map" and isinstance(func, Func):
            return core_map(host, func, list(self.args), kwargs, frame, node)
        if t == "pallas_call":
            return pallas_call(host, [Arg(None, func)] + list(self.args), kwargs, node, frame)
        if t == "emit_pipeline" and isinstance(func, Func):
            # `@functools.partial(pltpu.emit_pipeline, grid=..., in_specs=...)`
            return emit_pipeline(host, [Arg(None, func)] + list(self.args), kwargs, node, frame)
        if self.api == "lax.fori_loop" and len(self.args) == 2 and isinstance(func, Func):
            # `@functools.partial(lax.fori_loop, lo, hi, init_val=...)`: the
            # body runs now, as the loop's `body_fun`.
            return host.call_api(self.api, list(self.args) + [Arg(None, func)], kwargs, node,
                                   frame)
        return func


@frozen
class WithScoped(Decorator):
    """`@pl.with_scoped(*types, **kw_types)`: calling the function runs it
    under run_scoped, with the call's arguments first."""

    args: tuple = ()
    kwargs: tuple = ()

    def apply(self, host, func, node, frame):
        return ScopedFunc(func=func, types=self.args, kw_types=self.kwargs, node=node)


@frozen
class ScopedFunc(Value):
    func: Value = UNKNOWN
    types: tuple = ()
    kw_types: tuple = ()
    node: object = None

    def call(self, host, args: list[Arg], frame):
        func = self.func
        if isinstance(func, Func) and args:
            func = replace(func, bound_args=func.bound_args + tuple(a.value for a in args))
        return run_scoped(host, func, list(self.types), dict(self.kw_types), self.node, frame)


def _factory_applied(host: LaunchHost, made_at) -> None:
    """`run = pl.core_map(mesh)` then `@run`: the call that made the decorator
    launches what it is applied to (coverage lists it as that launch)."""
    if made_at is not None:
        host.events.factory_nodes.add(id(made_at))


@frozen
class KernelDecorator(Decorator):
    kwargs: tuple = ()
    made_at: object = field(default=None, compare=False, repr=False)  # the pl.kernel(...) call

    def apply(self, host, func, node, frame):
        _factory_applied(host, self.made_at)
        if isinstance(func, Func):
            return pl_kernel(host, func, dict(self.kwargs), frame, node)
        if isinstance(func, Choice) and func.options \
                and all(isinstance(f, Func) for f in func.options):
            # One body of a few (`body_a if fast else body_b`): each is bound;
            # calling the result runs the ones that wait for their operands.
            made = [pl_kernel(host, f, dict(self.kwargs), frame, node) for f in func.options]
            waiting = tuple(m for m in made if m is not UNKNOWN)
            return Choice(options=waiting) if waiting else UNKNOWN
        return UNKNOWN


@frozen
class CoreMapDecorator(Decorator):
    args: tuple = ()
    kwargs: tuple = ()
    made_at: object = field(default=None, compare=False, repr=False)  # the core_map(...) call

    def apply(self, host, func, node, frame):
        _factory_applied(host, self.made_at)
        if isinstance(func, Func):
            return core_map(host, func, list(self.args), dict(self.kwargs), frame, node)
        if isinstance(func, Choice) and func.options \
                and all(isinstance(f, Func) for f in func.options):
            for f in func.options:  # `core_map(mesh)(body_a if c else body_b)`
                core_map(host, f, list(self.args), dict(self.kwargs), frame, node)
            return Const(value=None)
        return UNKNOWN


@frozen
class RunStateDecorator(Decorator):
    """`run_state` (`pl.run_state`, `jax._src.state.discharge.run_state`)
    applied to a function: a callable taking the initial state."""

    def apply(self, host, func, node, frame):
        return StateFunc(func=func, node=node) if isinstance(func, Func) else UNKNOWN


@frozen
class StateFunc(Value):
    """`run_state(f)`: called with an initial value, `f` runs on one Ref per
    leaf of it (a tuple of arrays: a tuple of Refs), and the call returns
    the final values, the same structure of arrays."""

    func: Value = UNKNOWN
    node: object = None

    def call(self, host, args: list[Arg], frame):
        init = args[0].value if len(args) == 1 else UNKNOWN
        refs = state_refs(init, "run_state")
        if refs is UNKNOWN:
            # One Ref, or a tuple of them: of unknown structure.
            refs = SeqOf(elem=Ref(origin="a run_state Ref", space=Space.UNKNOWN))
        if isinstance(self.func, Func):
            host.call_func(self.func, [refs], {}, frame, kernel=False)
        return state_values(init)


def state_refs(init: Value, origin: str, depth: int = 0) -> Value:
    """The Refs run_state gives its function for `init`: one per leaf."""
    if depth > 4:
        return UNKNOWN
    if isinstance(init, Seq):
        items = tuple(state_refs(v, f"{origin}[{k if init.keys is not None else i}]", depth + 1)
                      for i, (k, v) in enumerate(zip(init.keys or [None] * len(init.items),
                                                     init.items)))
        if any(v is UNKNOWN for v in items):
            return UNKNOWN
        return Seq(items=items, keys=init.keys)
    if isinstance(init, (Array, ShapeDtype)):
        return Ref(origin=f"{origin} (a run_state Ref)", space=Space.UNKNOWN,
                   shape=init.shape, dtype=init.dtype)
    return UNKNOWN


def state_values(init: Value, depth: int = 0) -> Value:
    if depth > 4:
        return UNKNOWN
    if isinstance(init, Seq):
        return Seq(items=tuple(state_values(v, depth + 1) for v in init.items), keys=init.keys)
    if isinstance(init, (Array, ShapeDtype)):
        return Array(origin="a run_state result", shape=init.shape, dtype=init.dtype)
    return UNKNOWN
