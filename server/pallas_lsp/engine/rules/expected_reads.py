"""Reads passed to a DMA in a kernel a test expects to fail with another message.

The rules are silent in a kernel a test launches to see it fail
(expected_errors.py), and the syntax floor speaks there only for what the
text alone decides (`x[...]`, `x[:, 0]`). A plain `x[i]` may select a Ref
from a list, so the floor leaves it; but where the engine knows `x` is a Ref,
`x[i]` handed to a DMA is a read, and the DMA fails on it with its own
message (PAL101 when the copy starts, PAL102 / PAL110 / PAL112 likewise),
as plain and stable as the floor's. This layer gives those kinds-based
findings the floor's standing in such kernels: `analyze` keeps one only where
the block names another message or any exception (`expected_floor_finding`).
Only a read counts: a subscript written at the call, or a name bound to one.
"""
from __future__ import annotations

import ast

from pallas_lsp.engine import expected_errors
from pallas_lsp.engine.model import Array
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.rules import (pal101_dma_arg_not_ref, pal102_send_sem_not_ref,
                                     pal110_wait_sem_not_ref, pal112_wait_on_value)
from pallas_lsp.engine.rules._base import Context

_READ_RULES = (pal101_dma_arg_not_ref, pal102_send_sem_not_ref, pal110_wait_sem_not_ref,
               pal112_wait_on_value)


def check(ctx: Context, events):
    """The read findings of the rules above in the expected-to-fail kernels
    of `events` (all the file's events, those kernels included), at a
    subscript written in this file."""
    # Kernels a run-time-only block launches are judged by these rules already.
    ids = expected_errors.expected_kernels(events, trace=True)
    if not ids:
        return
    dmas = [c for c in events.dmas if c.kernel_id in ids and c.node is not None
            and getattr(c.node, "_pl_src", None) is None]
    if not dmas:
        return
    sub = Context(src=ctx.src, events=replace(events, dmas=dmas), sites=ctx.sites)
    reads = {ctx.src.span(arg.node) for c in dmas for arg in _args(c) if _is_read(arg)}
    for rule in _READ_RULES:
        for f in rule.check(sub):
            if f.span in reads:
                yield f


def _args(call):
    for name in ("src", "dst", "sem", "send_sem"):
        arg = getattr(call, name, None)
        if arg is not None and arg.present:
            yield arg


def _is_read(arg) -> bool:
    """`x[i]` written at the call, or a name bound to such a read of a Ref."""
    node = arg.node
    if isinstance(node, ast.Subscript):
        return isinstance(node.ctx, ast.Load)
    return isinstance(node, ast.Name) and isinstance(arg.value, Array) \
        and arg.value.origin.startswith("read of ")
