"""PAL104: the send (source) semaphore of a remote copy is a semaphore array."""
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.rules.pal103_dst_sem_not_scalar import shaped_sem

CODE = "PAL104"
MESSAGE = "Cannot signal on a non-()-shaped semaphore: {shape}"


def check(ctx: Context):
    for call in ctx.events.dmas:
        if call.remote and call.started and call.send_sem is not None:
            yield from shaped_sem(ctx, call, call.send_sem, CODE, "send")
