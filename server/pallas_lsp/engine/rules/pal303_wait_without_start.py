"""PAL303: a wait on a DMA semaphore that no started DMA in the kernel signals."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._protocol import by_node, dma_sem, local_allocation, protocols, sem_root

CODE = "PAL303"
MESSAGE = "Wait on a DMA that is never started"


def check(ctx: Context):
    kernels = protocols(ctx.events, ctx.src)
    calls = [c for c in ctx.events.dmas if c.in_kernel and not c.started and c.waited]
    for group in by_node(calls).values():
        if any(_may_be_signalled(c, kernels[c.kernel_id]) for c in group):
            continue
        call = group[0]
        wait = next(op for op in call.ops if op.op.startswith("wait"))
        sem = ctx.text(call.sem.node)
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"No DMA in this kernel is started on `{sem}`, so this wait can "
                     f"never be satisfied. The kernel hangs (forever in TPU interpret mode, "
                     f"and on a TPU). Start the copy (`.start()`) before waiting for it."),
            span=ctx.span(wait.node),
        )


def _may_be_signalled(call, proto) -> bool:
    if call.escaped or proto.escaped or proto.unknown_start:
        return True
    value = call.sem.value
    # Only semaphores this kernel allocated itself: one passed in (e.g. from
    # another pallas_call) may have been signalled elsewhere.
    if not dma_sem(value) or not local_allocation(value.root):
        return True
    root = sem_root(value)
    return root is None or root in proto.started
