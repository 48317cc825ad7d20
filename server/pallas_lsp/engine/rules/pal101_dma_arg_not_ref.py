"""PAL101: a DMA's source, destination or semaphore is an Array, not a Ref."""
from pallas_lsp.engine.rules._base import (Context, Finding, explain_value, is_value,
                                           raise_sites, ref_fix, start_ops)

CODE = "PAL101"
MESSAGE = "DMA source/destination/semaphore arguments must be Refs."


def check(ctx: Context):
    for call in ctx.events.dmas:
        if not call.started:
            continue  # a wait-only descriptor is PAL110's business
        roles = [("source", call.src), ("destination", call.dst), ("semaphore", call.sem)]
        for role, arg in roles:
            if not arg.present or not is_value(arg.value):
                continue
            node = arg.node
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=f"The {role} {explain_value(ctx, node, arg.value)}",
                span=ctx.span(node),
                related=raise_sites(ctx, call, start_ops(call), "start"),
                fixes=ref_fix(ctx, node),
            )
