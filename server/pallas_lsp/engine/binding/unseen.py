"""Launchers the engine cannot see, given a kernel and its scratch.

Application code launches through helpers of its own: a module the checked
files import but do not include (`gather.sparse_core_program(body,
out_types=..., mesh=mesh, scratch_types=[...])`), a method of a base class
from another package, a function imported from a package outside the
project. The helper's body is invisible, but what the call hands it is not:
a function that reads as a kernel and a list of Pallas allocations
(`pltpu.VMEM(...)`, `pltpu.SemaphoreType.DMA((n,))`). Every Pallas launcher
(`pallas_call`, `pl.kernel`, `core_map`, `run_scoped`) gives a kernel its
scratch Refs last, one per allocation, so the kernel's last parameters are
those Refs; what comes before (inputs, outputs, prefetch) is known only as
far as the body's own text tells (a parameter it uses or names as a Ref is
one, standalone.ref_params), as for kernel code no launch reaches.

Taken only when all of this holds, so that nothing else is read as a launch:
- the callee is unknown to the engine (not the user's function, not a
  library the engine models);
- `scratch_shapes=` / `scratch_types=` (or the helper's own `scratch=`,
  `scratch_*=`) is a list or tuple whose every item is an allocation (a list the engine cannot count, or one item of something else,
  and the call stays unknown);
- the function given first (or as `kernel=` / `body=` / `f=`) reads as a
  kernel (inherited.kernel_like) and has no defaults; its last positional
  parameters, or the end of its `*refs`, take the allocations.
The call form `helper(scratch_shapes=..., mesh=...)` that returns a decorator
(`@helper(...)` above the kernel) is taken the same way when applied."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import backend, standalone
from pallas_lsp.engine.binding.decorators import Decorator
from pallas_lsp.engine.binding.inherited import kernel_like
from pallas_lsp.engine.binding.launch import (arg_value, bind_and_run, count_required, new_launch,
                                              positional_params)
from pallas_lsp.engine.binding.scratch import scratch_value, to_alloc
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.values import STAR_UNKNOWN, UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost

API = "unseen launcher"
_BODY = ("kernel", "body", "f")


def _scratch_arg(kwargs: dict[str, Arg]) -> Arg | None:
    """`scratch_shapes=`, `scratch_types=`, a helper's own `scratch=` or `scratch_specs=`."""
    return next((a for k, a in kwargs.items() if k == "scratch" or k.startswith("scratch_")), None)


def scratch_items(kwargs: dict[str, Arg]) -> list[Value] | None:
    """The allocations the call hands over, when every item is one."""
    arg = _scratch_arg(kwargs)
    v = arg_value(arg)
    if not isinstance(v, Seq) or v.keys is not None or not v.items:
        return None
    return list(v.items) if all(to_alloc(x) is not None for x in v.items) else None


def launch(host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg], node: ast.AST,
           frame: Frame) -> Value | None:
    """A call of an unknown callable: bound as a launch when it reads as one
    (see the module docstring); None otherwise (the call stays unknown)."""
    scratch = scratch_items(kwargs)
    if scratch is None:
        return None
    body = next((kwargs[k] for k in _BODY if k in kwargs), None) or (args[0] if args else None)
    if body is None:
        return UnseenLauncher(kwargs=tuple(kwargs.items()))  # `@helper(scratch_shapes=...)`
    return _bind(host, body.value, scratch, kwargs, node, frame)


def _bind(host: LaunchHost, func: Value, scratch: list[Value], kwargs: dict[str, Arg],
          node: ast.AST, frame: Frame) -> Value | None:
    if not isinstance(func, Func) or not kernel_like(func):
        return None
    positional = positional_params(func)
    if positional is None:
        return None
    params, has_vararg = positional
    if count_required(func, params) != len(params) \
            or (not has_vararg and len(params) < len(scratch)):
        return None
    mesh, cp = arg_value(kwargs.get("mesh")), arg_value(kwargs.get("compiler_params"))
    be = backend.of_launch(mesh, cp) or host.file_backend
    site = new_launch(host, API, node, func, be, scratch=arg_value(_scratch_arg(kwargs)),
                      compiler_params=cp)
    if backend.sparsecore_mesh(mesh):
        site.core = backend.SPARSECORE
    refs = [scratch_value(v, f"scratch #{i} of an unseen launcher") for i, v in enumerate(scratch)]
    # The parameters before the scratch: Refs where the body uses or names
    # them as Refs (as for kernel code no launch reaches), else unknown.
    used = set(standalone.ref_params(func.node))
    lead = [Ref(origin=f"{p} (a Ref by its use; launched by a helper not seen)",
                space=Space.UNKNOWN) if p in used else UNKNOWN
            for p in params[:len(params) if has_vararg else len(params) - len(refs)]]
    # `def body(x_ref, *refs)`: the scratch is the end of `*refs`
    args = lead + ([STAR_UNKNOWN] if has_vararg else []) + refs
    bind_and_run(host, site, func, args, {}, frame, params)
    for k, a in kwargs.items():  # what else it was handed goes where the engine cannot see
        if k not in _BODY:
            host.escape(a.value)
    return UNKNOWN


@frozen
class UnseenLauncher(Decorator):
    """`helper(scratch_shapes=[...], mesh=...)` of an unseen helper: applied
    to a function, bound as above."""

    kwargs: tuple = ()

    def apply(self, host, func, node, frame):
        kwargs = dict(self.kwargs)
        out = _bind(host, func, scratch_items(kwargs) or [], kwargs, node, frame)
        if out is None:
            host.escape(func)
            return UNKNOWN
        return out
