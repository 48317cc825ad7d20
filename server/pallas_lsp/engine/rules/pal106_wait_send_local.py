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
            attr = ctx.span(op.attr_node)
            name = Span(attr.end_line, attr.end_col - len("wait_send"), attr.end_line, attr.end_col,
                        attr.path)
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=(f"This descriptor comes from `{call.api}` (line "
                         f"{call.node.lineno}), which has no send side; `.wait()` waits for "
                         f"the data to arrive."),
                span=name,
                fixes=(Fix(title="Replace `.wait_send()` with `.wait()`",
                           edits=(Edit(name, "wait"),), safe=True),),
            )
