"""Pallas and JAX API calls, one module per family, like astroid's brain/ or
pytype's overlays/: each family module has a `handle(host, name, tail, args,
kwargs, node, frame)` that returns a Value for a call it models and None
for one that is not its own; `FAMILIES` is the registration table (a new
family is one new module and one entry here). A family sees the interpreter
only through host.Host (launchers: host.LaunchHost), never the interpreter
itself. `call` routes a call of a known API (its canonical name, see api.py)
to the first family that claims it. Whatever no family claims escapes its
arguments (the protocol rules then stay silent about descriptors in them)
and returns an Array for `jnp.` / `lax.` numerics, else Unknown."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api, backend
from pallas_lsp.engine.apis import (allocations, arrays, control, dma, kernels, partials, pytrees,
                                    refs, semaphores)
from pallas_lsp.engine.events import Arg, KernelOp
from pallas_lsp.engine.model import Api, Array, Const, Ref, Value
from pallas_lsp.engine.values import UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host

# Tried in this order; each returns None for a call that is not its own.
FAMILIES = (dma.handle, refs.handle, semaphores.handle, kernels.handle, allocations.handle,
            control.handle, pytrees.handle, partials.handle, arrays.handle)


def call(host: Host, name: str, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
         frame: Frame) -> Value:
    t = api.tail(name)
    if t in ("CompilerParams", "TPUCompilerParams") and name.startswith("pltpu.") \
            and _sparsecore_kernel_type(kwargs.get("kernel_type")):
        return backend.Hint(backend=backend.TPU, core=backend.SPARSECORE)
    for family in FAMILIES:
        out = family(host, name, t, args, kwargs, node, frame)
        if out is not None:
            return out
    hint = backend.of_api(name)
    if hint is not None and hint != backend.TPU:
        return backend.Hint(backend=hint)  # GPU compiler params, meshes, ...
    if name.startswith("pl.tpu_sc.") and t.endswith("Mesh"):  # VectorSubcoreMesh, ScalarSubcoreMesh
        return backend.Hint(backend=backend.TPU, core=backend.SPARSECORE)
    if name.startswith(("jnp.", "lax.", "jax.", "pl.", "pltpu.")):
        if frame.kernel_id:
            host.events.kernel_ops.append(KernelOp("call", name, node, tuple(
                a.value for a in args), frame.kernel_id))
        was_opaque = frame.kernel_id in host.events.opaque
        for a in list(args) + list(kwargs.values()):
            host.escape(a.value)
        if name.startswith(("jnp.", "lax.")) and not was_opaque \
                and all(isinstance(a.value, (Ref, Array, Const)) or a.value is UNKNOWN
                        for a in list(args) + list(kwargs.values())):
            # jnp / lax functions read a Ref (`jnp.zeros_like(acc_ref)`), never write it
            host.events.opaque.discard(frame.kernel_id)
        return Array(origin=name) if name.startswith(("jnp.", "lax.")) else UNKNOWN
    for a in list(args) + list(kwargs.values()):
        host.escape(a.value)
    return UNKNOWN


def _sparsecore_kernel_type(arg: Arg | None) -> bool:
    """`kernel_type=pltpu.KernelType.SC_VECTOR_SUBCORE` (or SC_SCALAR_SUBCORE)."""
    v = arg.value if arg is not None else None
    return isinstance(v, Api) and v.name.rpartition(".")[2].startswith("SC_")
