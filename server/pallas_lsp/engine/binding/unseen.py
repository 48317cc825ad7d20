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
those Refs; what comes before (inputs, outputs, prefetch) stays unknown.

Taken only when all of this holds, so that nothing else is read as a launch:
- the callee is unknown to the engine (not the user's function, not a
  library the engine models);
- `scratch_shapes=` / `scratch_types=` is a list whose every item is an
  allocation (a list the engine cannot count, or one item of something else,
  and the call stays unknown);
- the function given first (or as `kernel=` / `body=` / `f=`) reads as a
  kernel (inherited.kernel_like), has no `*args` and no defaults, and has at
  least as many positional parameters as there are allocations.
The call form `helper(scratch_shapes=..., mesh=...)` that returns a decorator
(`@helper(...)` above the kernel) is taken the same way when applied."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import backend
from pallas_lsp.engine.binding.decorators import Decorator
from pallas_lsp.engine.binding.inherited import kernel_like
from pallas_lsp.engine.binding.launch import (arg_value, bind_and_run, count_required, new_launch,
                                              positional_params)
from pallas_lsp.engine.binding.scratch import scratch_value, to_alloc
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Func, Seq, Value
from pallas_lsp.engine.records import frozen
from pallas_lsp.engine.values import UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost

API = "unseen launcher"
_SCRATCH = ("scratch_shapes", "scratch_types")
_BODY = ("kernel", "body", "f")


def scratch_items(kwargs: dict[str, Arg]) -> list[Value] | None:
    """The allocations the call hands over, when every item is one."""
    arg = next((kwargs[k] for k in _SCRATCH if k in kwargs), None)
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
    if has_vararg or count_required(func, params) != len(params) or len(params) < len(scratch):
        return None
    mesh, cp = arg_value(kwargs.get("mesh")), arg_value(kwargs.get("compiler_params"))
    be = backend.of_launch(mesh, cp) or host.file_backend
    site = new_launch(host, API, node, func, be, scratch=arg_value(
        next((kwargs[k] for k in _SCRATCH if k in kwargs), None)), compiler_params=cp)
    if backend.sparsecore_mesh(mesh):
        site.core = backend.SPARSECORE
    refs = [scratch_value(v, f"scratch #{i} of an unseen launcher") for i, v in enumerate(scratch)]
    bind_and_run(host, site, func, [UNKNOWN] * (len(params) - len(refs)) + refs, {}, frame,
                 params)
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
