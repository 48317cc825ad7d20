"""PAL208: pl.run_scoped asked to allocate HBM / ANY memory."""
from pallas_lsp.engine.rules._base import Context, Finding

CODE = "PAL208"
MESSAGE = "Cannot allocate HBM in `run_scoped`."


def check(ctx: Context):
    for alloc in ctx.events.scoped:
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"`{ctx.text(alloc.node)}` asks for {alloc.space} memory; "
                     f"run_scoped allocations live in VMEM/SMEM/semaphores. Pass the HBM "
                     f"buffer in as an operand (memory_space=pl.ANY) instead."),
            span=ctx.span(alloc.node),
        )
