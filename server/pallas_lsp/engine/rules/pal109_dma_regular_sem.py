"""PAL109: a DMA waited on with a regular (not DMA) semaphore."""
from pallas_lsp.engine.rules._base import Context, Finding, Ref, SemKind, raise_sites, wait_ops

CODE = "PAL109"
MESSAGE = ("dma_wait requires a DMA semaphore, but got a regular semaphore. "
           "Use pl.semaphore_wait() instead.")


def check(ctx: Context):
    for call in ctx.events.dmas:
        waits = wait_ops(call, ("wait", "wait_recv"))
        checks = [(call.sem, waits)]
        if call.remote and call.send_sem is not None:
            checks.append((call.send_sem, wait_ops(call, ("wait", "wait_send"))))
        for arg, ops in checks:
            if not ops or not arg.present:
                continue
            v = arg.value
            if isinstance(v, Ref) and v.sem in (SemKind.REGULAR, SemKind.BARRIER):
                text = ctx.text(arg.node)
                yield Finding(
                    code=CODE,
                    message=MESSAGE,
                    detail=(f"`{text}` is a {v.sem.value} semaphore ({v.origin or 'see its allocation'}); "
                             f"a DMA needs `pltpu.SemaphoreType.DMA`. `.start()` accepts it, "
                             f"the wait does not."),
                    span=ctx.span(arg.node),
                    related=raise_sites(ctx, call, ops, "wait"),
                )
