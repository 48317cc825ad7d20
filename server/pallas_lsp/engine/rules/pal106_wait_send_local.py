"""PAL106: `.wait_send()` on a local copy."""
from pallas_lsp.engine.model import Span
from pallas_lsp.engine.rules._base import Context, Edit, Finding, Fix

CODE = "PAL106"
MESSAGE = "Cannot `wait_send` on a local copy."


def check(ctx: Context):
    for call in ctx.events.dmas:
        if call.remote:
            continue
        for op in call.ops:
            if op.op != "wait_send" or op.attr_node is None:
                continue
            yield finding(ctx, op.attr_node, call.api, call.node.lineno)


def finding(ctx: Context, attr_node, api_name: str, line: int) -> Finding:
    """On the name `wait_send` of `desc.wait_send` (also the syntax floor's)."""
    attr = ctx.span(attr_node)
    name = Span(attr.end_line, attr.end_col - len("wait_send"), attr.end_line, attr.end_col,
                attr.path)
    return Finding(
        code=CODE,
        message=MESSAGE,
        detail=(f"This descriptor comes from `{api_name}` (line {line}), which has no send "
                f"side; `.wait()` waits for the data to arrive."),
        span=name,
        fixes=(Fix(title="Replace `.wait_send()` with `.wait()`",
                   edits=(Edit(name, "wait"),), safe=True),),
    )
