"""PAL108: a DMA started with a negative priority."""
import ast

from pallas_lsp.engine.model import Span
from pallas_lsp.engine.rules._base import Const, Context, Edit, Finding, Fix

CODE = "PAL108"
MESSAGE = "DMA start priority must be non-negative: {priority}"


def check(ctx: Context):
    for call in ctx.events.dmas:
        sites = [(call.priority, call.node)] + [(op.priority, op.node) for op in call.ops
                                               if op.op == "start"]
        for arg, call_node in sites:
            if arg is None or not arg.present or not isinstance(arg.value, Const):
                continue
            p = arg.value.value
            if not isinstance(p, int) or isinstance(p, bool) or p >= 0:
                continue
            yield finding(ctx, call_node, arg.node, p)


def finding(ctx: Context, call_node: ast.Call, value_node: ast.AST, priority: int, *,
            fixable: bool = True) -> Finding:
    """On the priority argument (also the syntax floor's; `fixable`: a literal there)."""
    return Finding(
        code=CODE,
        message=MESSAGE.format(priority=priority),
        detail="Priorities are 0 (the default) or higher; drop the argument to use the default.",
        span=ctx.span(value_node),
        fixes=_drop_priority(ctx, call_node, value_node) if fixable else (),
    )


def _drop_priority(ctx: Context, call_node: ast.Call, value_node: ast.AST):
    """Remove `priority=-1` (or a positional -1) from the call's arguments."""
    items = list(call_node.args) + list(call_node.keywords)
    items.sort(key=lambda n: (n.lineno, n.col_offset))
    target = next((k for k in call_node.keywords if k.value is value_node), None) or value_node
    if target not in items:
        return ()
    i = items.index(target)
    span = ctx.span(target)
    if len(items) == 1:
        start, end = span, span
        edit_span = Span(start.line, start.col, end.end_line, end.end_col, span.path)
    elif i > 0:
        prev = ctx.span(items[i - 1])
        edit_span = Span(prev.end_line, prev.end_col, span.end_line, span.end_col, span.path)
    else:
        nxt = ctx.span(items[i + 1])
        edit_span = Span(span.line, span.col, nxt.line, nxt.col, span.path)
    return (Fix(title="Remove the negative priority (use the default, 0)",
                edits=(Edit(edit_span, ""),), safe=True),)
