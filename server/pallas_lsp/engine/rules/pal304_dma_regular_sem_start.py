"""PAL304: a DMA started with a regular or barrier semaphore."""
from pallas_lsp.engine.rules._base import Context, Finding, Ref, SemKind, wait_ops

CODE = "PAL304"
MESSAGE = "DMA started with a non-DMA semaphore"


def check(ctx: Context):
    for call in ctx.events.dmas:
        if not call.started or call.api == "sync_copy":
            continue
        arg = call.sem
        v = arg.value
        if not arg.present or not isinstance(v, Ref) or v.sem not in (SemKind.REGULAR,
                                                                         SemKind.BARRIER):
            continue
        if wait_ops(call, ("wait", "wait_recv")):
            continue  # PAL109 reports it at the wait, where JAX raises
        if any(op.api == "semaphore_wait" and isinstance(op.sem.value, Ref)
               and op.sem.value.root == v.root and op.kernel_id == call.kernel_id
               for op in ctx.events.sem_ops):
            continue  # drained by counting bytes: unusual, but it works
        text = ctx.text(arg.node)
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"`{text}` is a {v.sem.value} semaphore. `.start()` accepts it, "
                     f"but the wait for this copy fails (dma_wait requires a DMA semaphore) and "
                     f"the counts do not mean bytes. Allocate `pltpu.SemaphoreType.DMA`."),
            span=ctx.span(arg.node),
        )
