"""PAL110: a wait-only descriptor whose semaphore is an Array."""
from pallas_lsp.engine.rules._base import (Context, Finding, explain_value, is_value,
                                           raise_sites, ref_fix, wait_only, wait_ops)

CODE = "PAL110"
MESSAGE = "Expected the destination semaphore to be a reference"


def check(ctx: Context):
    for call, waits in wait_only(ctx):
        args = [call.sem]
        if call.remote and call.send_sem is not None and wait_ops(call, ("wait", "wait_send")):
            args.append(call.send_sem)
        for arg in args:
            if arg.present and is_value(arg.value):
                yield Finding(
                    code=CODE,
                    message=MESSAGE,
                    detail=(f"This descriptor is only built to be waited on, and "
                             f"{explain_value(ctx, arg.node, arg.value)}"),
                    span=ctx.span(arg.node),
                    related=raise_sites(ctx, call, waits, "wait"),
                    fixes=ref_fix(ctx, arg.node),
                )
