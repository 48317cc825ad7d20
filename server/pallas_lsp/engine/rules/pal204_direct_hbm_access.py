"""PAL204: a direct load or store on a Ref in pl.ANY / HBM memory."""
from pallas_lsp.engine.rules._base import Context, Finding, Ref

CODE = "PAL204"
MESSAGE = ("{prim}: Buffers with a memory space of HBM or ANY cannot be referenced directly. "
           "Instead, use `pltpu.sync_copy` or `pltpu.async_copy`.")

_PRIM = {"get": "get_p", "swap": "swap_p", "load": "load_p", "store": "swap_p"}


def check(ctx: Context):
    for acc in ctx.events.accesses:
        v = acc.ref.value
        if not isinstance(v, Ref) or v.sem is not None or not v.space.dma_only:
            continue
        if not acc.ref.present:
            continue
        text = ctx.text(acc.ref.node)
        verb = "read" if acc.kind in ("get", "load") else "written"
        yield Finding(
            code=CODE,
            message=MESSAGE.format(prim=_PRIM[acc.kind]),
            detail=(f"`{text}` lives in "
                     f"{v.space.value} ({v.origin or 'its BlockSpec'}) and cannot be {verb} "
                     f"with vector loads/stores; copy it to a VMEM buffer with a DMA first."),
            span=ctx.span(acc.node),
        )
