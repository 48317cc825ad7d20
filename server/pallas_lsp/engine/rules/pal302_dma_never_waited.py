"""PAL302: a DMA started and never waited in its kernel."""
from pallas_lsp.engine.rules._base import Context, Finding, Related
from pallas_lsp.engine.rules._protocol import by_node, local_allocation, protocols, sem_root

CODE = "PAL302"
MESSAGE = "DMA started but never waited"


def check(ctx: Context):
    kernels = protocols(ctx.events, ctx.src)
    calls = [c for c in ctx.events.dmas if c.in_kernel and c.started and c.api != "sync_copy"]
    for group in by_node(calls).values():
        if any(_may_be_waited(c, kernels[c.kernel_id]) for c in group):
            continue
        call = group[0]
        starts = [op for op in call.ops if op.op == "start"]
        node = starts[0].node if starts and not call.implicit_start else call.node
        sem = ctx.text(call.sem.node) if call.sem.node is not None else "its semaphore"
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"No `.wait()` in this kernel consumes `{sem}`. In TPU interpret "
                     f"mode the copy is silently dropped (the destination keeps uninitialised "
                     f"data); on a TPU the kernel may read the destination before the data "
                     f"arrives and exits with the semaphore still signalled. Wait on this "
                     f"descriptor (or on one rebuilt with the same semaphore) before the "
                     f"data is used."),
            span=ctx.span(node),
            related=(Related(ctx.span(call.node), "the copy is described here"),)
            if node is not call.node else (),
        )


def _may_be_waited(call, proto) -> bool:
    if call.escaped or call.waited or proto.escaped or proto.unknown_wait:
        return True
    roots = [sem_root(call.sem.value)]
    if call.send_sem is not None:
        roots.append(sem_root(call.send_sem.value))
    if roots[0] is None or not local_allocation(roots[0]):
        return True  # e.g. a semaphore output waited in another pallas_call
    return any(r in proto.waited for r in roots if r)
