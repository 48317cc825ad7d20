"""Launchers inherited from a base class the engine cannot see.

Kernel test suites (jax's own among them) derive from a test base class in a
test-utility module that is not part of the project (`ptu.PallasTPUTest`,
`jtu.JaxTestCase` subclasses) and launch through its methods:
`self.pallas_call(kernel, ...)`, `@self.kernel(out_shape=..., mesh=...)`,
`@functools.partial(self.pallas_call, ...)`, `@self.core_map(mesh)`. Such
a method forwards to the Pallas launcher of the same name with a flag or two
of its own (`interpret=`, a backend check). The engine binds it like that
launcher, but only when all of this holds, so that an unrelated method of
the same name is never taken for one:
- the attribute is read through `self` (an instance of the user's class),
  the class and its known bases do not define it, and one of its bases is
  not known (a class the engine follows defines what it defines);
- the method is named exactly `pallas_call`, `kernel` or `core_map`;
- the function it receives is kernel-like: its body names a Pallas API
  (`pl.*`, `pltpu.*`) or writes into one of its parameters (`o_ref[...] = `).
The same holds for a function of that name in a module outside the project
and the libraries the engine knows (`ptu.pallas_call(kernel, ...)` with
`import pallas_test_util as ptu`, `from pallas_test_util import kernel`).
Otherwise the call is unknown, as any call of an unseen method is. Binding
still checks the kernel's arity against the launch (a wrapper that adds
parameters of its own is refused there, with a reason)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine.binding.decorators import Decorator
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Api, Func, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import UNKNOWN, Choice, Instance

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost

# method name -> the Pallas launcher it stands for
LAUNCHERS = {"pallas_call": "pl.pallas_call", "kernel": "pl.kernel", "core_map": "pl.core_map"}


# Modules whose `pallas_call` / `kernel` / `core_map` are not a test utility's.
_KNOWN_ROOTS = {"pl", "pltpu", "plgpu", "plsc", "jax", "jaxlib", "numpy", "np", "jnp",
                "functools", "torch", "triton", "tensorflow", "tf", "cupy", "numba"}


def foreign(name: str) -> bool:
    """An API name of a module outside the libraries the engine knows."""
    head, _, rest = name.partition(".")
    return bool(rest) and head not in _KNOWN_ROOTS


def foreign_launcher(name: str) -> Value | None:
    """`ptu.pallas_call` / `ptu.kernel` / `ptu.core_map` of a module outside
    the project and outside the libraries the engine knows (a test-utility
    module, `import pallas_test_util as ptu`): bound like the unseen base
    class's method of that name, on the same conditions."""
    head, _, rest = name.partition(".")
    if not rest or head in _KNOWN_ROOTS:
        return None
    found = launcher(rest.rpartition(".")[2])
    return replace(found, foreign=True) if found is not None else None


def launcher(name: str) -> Value | None:
    """`self.<name>` of a class with an unknown base, when the name is a launcher's."""
    api_name = LAUNCHERS.get(name)
    return InheritedLauncher(api=api_name) if api_name else None


@frozen
class InheritedLauncher(Decorator):
    """`self.pallas_call` / `self.kernel` / `self.core_map` of an unseen base
    class; `args` / `kwargs` are what a call or `functools.partial` gave it
    before the kernel (the decorator forms)."""

    api: str = ""
    args: tuple = ()
    kwargs: tuple = ()
    # A module's function (`ptu.kernel`), not a method: taken only once given a
    # launch's configuration (a bare `@cute.kernel` of a GPU library is not one).
    foreign: bool = False

    def _configured(self, args: list, kwargs: dict) -> bool:
        if not self.foreign:
            return True
        if self.api == "pl.core_map":
            return bool(args or kwargs)
        if self.api == "pl.kernel":
            return "mesh" in kwargs
        return "out_shape" in kwargs or len(args) > 1  # pallas_call(kernel, out_shape, ...)

    def call(self, host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg], node,
             frame: Frame) -> Value:
        args = list(self.args) + list(args)
        kwargs = {**dict(self.kwargs), **kwargs}
        body = None if self.api == "pl.core_map" else (
            kwargs.get("kernel") or kwargs.get("f") or kwargs.get("body")
            or (args[0] if args else None))
        if body is None:  # `@self.kernel(out_shape=..., mesh=...)`, `@self.core_map(mesh)`
            return replace(self, args=tuple(args), kwargs=tuple(kwargs.items()))
        if not kernel_like(body.value) or not self._configured(args, kwargs):
            return _unknown(host, args, kwargs)
        return host.call_api(self.api, args, kwargs, node, frame)

    def partial(self, args: list[Arg], kwargs: dict[str, Arg]) -> Value:
        """`functools.partial(self.pallas_call, out_shape=...)`."""
        if self.api != "pl.core_map" and args:
            # The kernel is bound now: judged when the partial is called.
            return DeferredLauncher(launcher=self, args=tuple(args), kwargs=tuple(kwargs.items()))
        return replace(self, args=self.args + tuple(args),
                       kwargs=self.kwargs + tuple(kwargs.items()))

    def apply(self, host, func, node, frame):
        if not kernel_like(func) or not self._configured(list(self.args), dict(self.kwargs)):
            host.escape(func)
            return UNKNOWN
        if self.api == "pl.core_map":
            made = host.call_api(self.api, list(self.args), dict(self.kwargs), node, frame)
            return made.apply(host, func, node, frame) if isinstance(made, Decorator) else UNKNOWN
        return host.call_api(self.api, [Arg(None, func)] + list(self.args), dict(self.kwargs),
                             node, frame)


@frozen
class DeferredLauncher(Value):
    """`functools.partial(self.pallas_call, kernel, ...)`: a launcher with its kernel."""

    launcher: InheritedLauncher = None
    args: tuple = ()
    kwargs: tuple = ()

    def call(self, host, args, kwargs, node, frame):
        return self.launcher.call(host, list(self.args) + list(args),
                                  {**dict(self.kwargs), **kwargs}, node, frame)


def _unknown(host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg]) -> Value:
    for a in list(args) + list(kwargs.values()):
        host.escape(a.value)
    return UNKNOWN


def kernel_like(value: Value) -> bool:
    """A function that reads as a Pallas kernel: it names a Pallas API or
    writes into one of its parameters. Each option of a choice must."""
    if isinstance(value, Choice):
        return bool(value.options) and all(kernel_like(o) for o in value.options)
    if isinstance(value, Instance):  # a kernel object: its `__call__`
        node = value.cls.methods.get("__call__")
        return node is not None and _reads_as_kernel(node, value.cls.scope)
    if isinstance(value, Func):
        return _reads_as_kernel(value.node, value.scope)
    return False


def _reads_as_kernel(node: ast.AST, scope) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    a = node.args
    params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    params |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    seen: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                and isinstance(n.value, ast.Name) and n.value.id in params:
            return True
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in params \
                and n.id not in seen:
            seen.add(n.id)
            v = scope.lookup(n.id) if scope is not None and hasattr(scope, "lookup") else None
            if isinstance(v, Api) and v.name.split(".")[0] in ("pl", "pltpu"):
                return True
    return False
