"""PAL102: the send (source) semaphore of a remote copy is an Array."""
from pallas_lsp.engine.rules._base import (Context, Finding, explain_value, is_value,
                                           raise_sites, ref_fix, start_ops)

CODE = "PAL102"
MESSAGE = "DMA source semaphore must be a Ref."


def check(ctx: Context):
    for call in ctx.events.dmas:
        if not call.remote or not call.started or call.send_sem is None:
            continue
        arg = call.send_sem
        if arg.present and is_value(arg.value):
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=f"The send semaphore {explain_value(ctx, arg.node, arg.value)}",
                span=ctx.span(arg.node),
                related=raise_sites(ctx, call, start_ops(call), "start"),
                fixes=ref_fix(ctx, arg.node),
            )
