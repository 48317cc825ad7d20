"""What every rule gets (a Context) and the small helpers they share."""
from __future__ import annotations

import ast
import weakref
from dataclasses import field
from typing import Iterable

from pallas_lsp.engine.events import Arg, DmaCall, Events
from pallas_lsp.engine.model import (Array, Const, Edit, Finding, Fix, Ref, Related, SemKind,
                                     Severity, Span, fmt_shape)
from pallas_lsp.engine.records import record
from pallas_lsp.engine.source import Source


@record
class Context:
    src: Source
    events: Events
    # id(node in another file) -> the call in the analysed file through
    # which the kernel reached it (interp.Interpreter.sites).
    sites: dict = field(default_factory=dict)
    # span in another file -> span of that call here (filled by `span`).
    via: dict = field(default_factory=dict)
    current: object = None  # the event a rule is looking at (see _Tracked)

    def __post_init__(self):
        # Rules loop over these lists; knowing which event a rule is on tells
        # which call in this file led to a finding in another file.
        for name in ("dmas", "sem_ops", "accesses", "scoped", "rolls", "windows"):
            setattr(self.events, name, _Tracked(getattr(self.events, name), self))

    def source_of(self, node: ast.AST) -> Source:
        return getattr(node, "_pl_src", None) or self.src

    def span(self, node: ast.AST) -> Span:
        src = self.source_of(node)
        span = src.span(node)
        if src is not self.src and span.path != self.src.path:
            site = getattr(self.current, "site", None) or self.sites.get(id(node))
            if site is not None:
                self.via[span] = self.src.span(site)
        return span

    def text(self, node: ast.AST) -> str:
        return self.source_of(node).segment(node)

    def arg_node(self, arg: Arg, fallback: ast.AST) -> ast.AST:
        return arg.node if arg.node is not None else fallback


class _Tracked(list):
    """A list of events that tells the Context which item is being looked at."""

    def __init__(self, items, ctx):
        super().__init__(items)
        # Weak: the context holds these lists, and a cycle would leave every
        # analysis to the cyclic garbage collector.
        self._ctx = weakref.ref(ctx)

    def __iter__(self):
        ctx = self._ctx()
        for item in super().__iter__():
            if ctx is not None:
                ctx.current = item
            yield item


def is_value(v) -> bool:
    """Known not to be a Ref: an Array (a read, arithmetic, a jnp result)."""
    return isinstance(v, Array)


def start_ops(call: DmaCall):
    return [op for op in call.ops if op.op == "start"]


def wait_ops(call: DmaCall, kinds=("wait", "wait_recv", "wait_send")):
    return [op for op in call.ops if op.op in kinds]


def wait_only(ctx: "Context"):
    """(descriptor, its waits) for every descriptor that is waited on but never
    started: rebuilt only to wait for a copy started elsewhere. A started one
    fails at `.start()` first, so only these reach `dma_wait`'s own checks."""
    for call in ctx.events.dmas:
        if call.started:
            continue
        waits = wait_ops(call)
        if waits:
            yield call, waits


def raise_sites(ctx: Context, call: DmaCall, ops, what: str) -> tuple[Related, ...]:
    """Related information: where JAX raises (the .start()/.wait() line)."""
    if call.implicit_start and what == "start":
        return ()
    return raised_at(ctx, ((op.op, op.node) for op in ops))


def raised_at(ctx: Context, sites) -> tuple[Related, ...]:
    """Related information for (method name, call node) pairs: at most three."""
    seen, out = set(), []
    for op, node in sites:
        span = ctx.span(node)
        if span in seen:
            continue
        seen.add(span)
        out.append(Related(span, f"JAX raises here, when `.{op}()` traces the DMA"))
    return tuple(out[:3])


def ref_fix(ctx: Context, node: ast.AST | None, *, safe: bool = True) -> tuple[Fix, ...]:
    """`x[...]` -> `x`, `x[i, :]` -> `x.at[i, :]`: keep the Ref, drop the read."""
    if not isinstance(node, ast.Subscript):
        return ()
    base = ctx.text(node.value)
    index = node.slice
    if isinstance(index, ast.Constant) and index.value is Ellipsis:
        new, title = base, f"Pass the Ref `{base}` instead of reading it"
    else:
        new = f"{base}.at[{ctx.text(index)}]"
        title = f"Use the view `{new}` instead of a read"
    return (Fix(title=title, edits=(Edit(ctx.span(node), new),), safe=safe),)


def at_fix(ctx: Context, node: ast.AST | None, shape) -> tuple[Fix, ...]:
    """`sems` -> `sems.at[0]`: the index is the user's choice, so not safe."""
    if node is None or not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return ()
    text = ctx.text(node)
    rank = len(shape) if shape else 1
    idx = ", ".join(["0"] * rank)
    return (Fix(title=f"Select one semaphore: `{text}.at[{idx}]` (choose the index)",
                edits=(Edit(ctx.span(node), f"{text}.at[{idx}]"),), safe=False),)


def explain_value(ctx: Context, node: ast.AST, value) -> str:
    """Why `node` is not a Ref, in words about the user's own code."""
    text = ctx.text(node)
    if isinstance(node, ast.Subscript):
        return explain_read(ctx, node, sem=isinstance(value, Array) and value.sem is not None)
    origin = getattr(value, "origin", "")
    where = f" ({origin})" if origin else ""
    return f"`{text}` is an Array{where}, not a Ref."


def explain_read(ctx: Context, node: ast.Subscript, *, sem: bool) -> str:
    """Why the read `x[...]` / `x[i, ...]` (of a semaphore when `sem`) is not a Ref."""
    text, base = ctx.text(node), ctx.text(node.value)
    whole = isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis
    if sem:
        return (f"`{text}` reads the semaphore's value; "
                + (f"pass `{base}` itself." if whole else
                   f"`{base}.at[{ctx.text(node.slice)}]` selects the semaphore and keeps it a Ref."))
    if whole:
        return f"`{text}` reads the whole Ref into an Array; pass `{base}` itself."
    return (f"`{text}` reads from the Ref into an Array; `{base}.at[{ctx.text(node.slice)}]` "
            f"is the same window as a Ref.")


def sem_shape_text(shape) -> str:
    return fmt_shape(shape)


__all__ = ["Context", "Finding", "Fix", "Edit", "Related", "Severity", "Span", "Ref", "Array",
           "Const", "SemKind", "Iterable", "is_value", "start_ops", "wait_ops", "wait_only",
           "raise_sites", "raised_at", "ref_fix", "at_fix", "explain_value", "explain_read",
           "sem_shape_text"]
