"""PAL112: a wait-only descriptor whose source or destination is an Array.

`dma_wait` records a read of the source and a write of the destination as
effects on those operands. An Array made inside the kernel (`buf[slot]`) is
no input of the kernel's jaxpr, so tracing the kernel fails when the jaxpr is
closed, not at the `.wait()` line."""
from pallas_lsp.engine.model import Related
from pallas_lsp.engine.rules._base import (Context, Finding, explain_value, is_value,
                                           ref_fix, wait_only)

CODE = "PAL112"
MESSAGE = "`JaxprInputEffect` {effect} does not have a corresponding jaxpr input."


def check(ctx: Context):
    for call, waits in wait_only(ctx):
        for role, effect, arg in (("source", "Read", call.src), ("destination", "Write", call.dst)):
            if not arg.present or not is_value(arg.value):
                continue
            related = tuple(Related(ctx.span(op.node),
                                    f"this `.{op.op}()` makes the {role} an effect of the kernel")
                            for op in waits[:2])
            yield Finding(
                code=CODE,
                message=MESSAGE.format(effect=f"{effect}<…>"),
                detail=(f"This descriptor is only built to be waited on, and the {role} "
                         f"{explain_value(ctx, arg.node, arg.value)} JAX fails when it "
                         f"finishes tracing the kernel (the traceback does not name this line)."),
                span=ctx.span(arg.node),
                related=related,
                fixes=ref_fix(ctx, arg.node),
            )
