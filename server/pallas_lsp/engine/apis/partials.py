"""`functools.partial` (and `jax.tree_util.Partial`, a pytree partial, and
`jax.jit(f, ...)`, which calls as `f` does): of a
user function (its bound arguments grow), of an API (`partial(pl.pallas_call,
...)`, a `PartialApi` that binding/decorators.py knows how to apply or call)
or of each option of a Choice."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine.binding.decorators import PartialApi
from pallas_lsp.engine.binding.inherited import InheritedLauncher
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Api, Array, Const, Func, Ref, Seq, Unknown, Value
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import UNKNOWN, Choice

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host

PARTIALS = ("functools.partial", "jax.tree_util.Partial")
# Values that are not something jax.jit could wrap and call.
_NOT_CALLABLE = (Unknown, Const, Array, Ref, Seq)


# Wrappers whose result, called, runs the function with the same arguments
# (`jax.jit(launcher, static_argnames=...)(x, block_rows=12)`).
SAME_CALL = ("jax.jit",)


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if name in SAME_CALL and args and not isinstance(args[0].value, _NOT_CALLABLE):
        return args[0].value  # any callable the engine models (a run_state function too)
    if name not in PARTIALS:
        return None
    if not args:
        return UNKNOWN
    inner = args[0].value
    if isinstance(inner, Func):
        return replace(inner, bound_args=inner.bound_args + tuple(a.value for a in args[1:]),
                       bound_kwargs=inner.bound_kwargs + tuple(
                           (k, a.value) for k, a in kwargs.items()))
    if isinstance(inner, InheritedLauncher):  # `partial(self.pallas_call, ...)`, unseen base
        return inner.partial(args[1:], kwargs)
    if isinstance(inner, Api):
        return PartialApi(api=inner.name, args=tuple(args[1:]), kwargs=tuple(kwargs.items()))
    if isinstance(inner, Choice):
        return Choice(options=tuple(
            host.call_api(name, [Arg(args[0].node, option)] + args[1:], kwargs, node, frame)
            for option in inner.options))
    return UNKNOWN
