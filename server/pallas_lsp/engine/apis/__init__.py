"""Pallas and JAX API calls, one module per family; `call` routes a call
of a known API (its canonical name, see api.py) to the family that models
it. Whatever no family claims escapes its arguments (the protocol rules
then stay silent about descriptors in them) and returns an Array for
`jnp.` / `lax.` numerics, else Unknown."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api, backend, binding
from pallas_lsp.engine.apis import allocations, control, dma, kernels, pytrees, refs, semaphores
from pallas_lsp.engine.events import Arg, KernelOp
from pallas_lsp.engine.model import Api, Array, Func, Value
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import UNKNOWN, Choice

if TYPE_CHECKING:
    from pallas_lsp.engine.interp import Frame, Interpreter

# Tried in this order; each returns None for a call that is not its own.
FAMILIES = (dma.handle, refs.handle, semaphores.handle, kernels.handle, allocations.handle,
            control.handle, pytrees.handle)


def call(interp: Interpreter, name: str, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
         frame: Frame) -> Value:
    t = api.tail(name)
    for family in FAMILIES:
        out = family(interp, name, t, args, kwargs, node, frame)
        if out is not None:
            return out
    if name in ("functools.partial", "jax.tree_util.Partial"):  # the latter: a pytree partial
        return _partial(interp, name, args, kwargs, node, frame)
    hint = backend.of_api(name)
    if hint is not None and hint != backend.TPU:
        return backend.Hint(backend=hint)  # GPU compiler params, meshes, ...
    if name.startswith("pl.tpu_sc.") and t.endswith("Mesh"):  # VectorSubcoreMesh, ScalarSubcoreMesh
        return backend.Hint(backend=backend.TPU, core=backend.SPARSECORE)
    if name.startswith(("jnp.", "lax.", "jax.", "pl.", "pltpu.")):
        if frame.kernel_id:
            interp.events.kernel_ops.append(KernelOp("call", name, node, tuple(
                a.value for a in args), frame.kernel_id))
        for a in list(args) + list(kwargs.values()):
            interp.escape(a.value)
        return Array(origin=name) if name.startswith(("jnp.", "lax.")) else UNKNOWN
    for a in list(args) + list(kwargs.values()):
        interp.escape(a.value)
    return UNKNOWN


def _partial(interp: Interpreter, name: str, args: list[Arg], kwargs: dict[str, Arg],
             node: ast.Call, frame: Frame) -> Value:
    """`functools.partial(f, ...)` of a function, of an API (`partial(pl.pallas_call,
    ...)`) or of each option of a Choice."""
    if not args:
        return UNKNOWN
    inner = args[0].value
    if isinstance(inner, Func):
        return replace(inner, bound_args=inner.bound_args + tuple(a.value for a in args[1:]),
                       bound_kwargs=inner.bound_kwargs + tuple(
                           (k, a.value) for k, a in kwargs.items()))
    if isinstance(inner, Api):
        return binding.PartialApi(api=inner.name, args=tuple(args[1:]),
                                  kwargs=tuple(kwargs.items()))
    if isinstance(inner, Choice):
        return Choice(options=tuple(
            call(interp, name, [Arg(args[0].node, option)] + args[1:], kwargs, node, frame)
            for option in inner.options))
    return UNKNOWN
