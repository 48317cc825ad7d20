"""PAL207: pl.semaphore_wait(..., decrement=False)."""
from pallas_lsp.engine.rules._base import Const, Context, Finding

CODE = "PAL207"
MESSAGE = "Non-decrementing wait is not supported."


def check(ctx: Context):
    for op in ctx.events.sem_ops:
        arg = op.decrement
        if op.api != "semaphore_wait" or arg is None or not arg.present:
            continue
        if isinstance(arg.value, Const) and arg.value.value is False:
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=(f"TPU interpret mode and the TPU compiler only support "
                         f"waits that decrement the semaphore; read it with "
                         f"`pl.semaphore_read` if you only need its value."),
                span=ctx.span(arg.node),
            )
