"""JAX control flow around kernel code: `lax.fori_loop` (its body runs
twice, like a Python loop's, to see values carried to the next
iteration), `lax.scan`, `lax.while_loop`, and `lax.cond` / `lax.switch`,
whose branches all run."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine.events import Arg, pick
from pallas_lsp.engine.model import Func, Seq, Value
from pallas_lsp.engine.values import UNKNOWN, join, join_all

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if name == "lax.fori_loop":
        return fori_loop(host, args, kwargs, frame)
    if name == "lax.scan":
        body = pick(args, kwargs, 0, "f")
        init = pick(args, kwargs, 1, "init")
        if body is not None and isinstance(body.value, Func):
            out = host.call_func(body.value, [init.value if init else UNKNOWN, UNKNOWN], {},
                                   frame)
            return Seq(items=(UNKNOWN, UNKNOWN)) if out is not UNKNOWN else UNKNOWN
        return UNKNOWN
    if name == "lax.while_loop":
        body = pick(args, kwargs, 1, "body_fun")
        init = pick(args, kwargs, 2, "init_val")
        cond = pick(args, kwargs, 0, "cond_fun")
        if cond is not None and isinstance(cond.value, Func):
            host.call_func(cond.value, [init.value if init else UNKNOWN], {}, frame)
        if body is not None and isinstance(body.value, Func):
            return host.call_func(body.value, [init.value if init else UNKNOWN], {}, frame)
        return UNKNOWN
    if name == "lax.cond":
        # Any callable branch: a function, or a bound `copy.start`.
        operands = args[3:]
        results = [host.call(a.value, operands, {}, node, frame) for a in args[1:3]]
        return join_all(results) if results else UNKNOWN
    if name == "lax.switch":
        branches = args[1].value if len(args) > 1 else UNKNOWN
        operands = args[2:]
        if isinstance(branches, Seq):
            results = [host.call(b, operands, {}, node, frame) for b in branches.items]
            return join_all(results) if results else UNKNOWN
        for a in args:
            host.escape(a.value)
        return UNKNOWN
    return None


def fori_loop(host: Host, args: list[Arg], kwargs: dict[str, Arg], frame: Frame) -> Value:
    body = pick(args, kwargs, 2, "body_fun")
    init = pick(args, kwargs, 3, "init_val")
    if body is None or not isinstance(body.value, Func):
        return UNKNOWN
    carry = init.value if init is not None else UNKNOWN
    frame.loop_depth += 1
    try:
        out = host.call_func(body.value, [UNKNOWN, carry], {}, frame)
        out2 = host.call_func(body.value, [UNKNOWN, join(carry, out)], {}, frame)
    finally:
        frame.loop_depth -= 1
    return join(join(carry, out), out2)
