"""PAL405: a float16 VMEM Ref read into a vector in a TPU kernel (Mosaic has
no float16 vectors on any generation)."""
from pallas_lsp.engine.model import Ref, Space
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import judged_kernel_ids, kernel_caller

CODE = "PAL405"
MESSAGE = "Invalid vector type for load"


def check(ctx: Context):
    kernels = judged_kernel_ids(ctx)
    for acc in ctx.events.accesses:
        ref = acc.ref.value
        if acc.kind not in ("get", "load") or acc.kernel_id not in kernels \
                or not isinstance(ref, Ref) or ref.dtype != "float16" \
                or ref.space not in (Space.VMEM, Space.UNKNOWN) or ref.sem is not None:
            continue
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"This reads a float16 Ref into a vector. The Mosaic compiler "
                     f"has no float16 vectors (v4, v5e, v5p and v6e refuse it; TPU interpret "
                     f"mode runs it). Use bfloat16, or convert outside the kernel."),
            span=ctx.span(acc.node),
            related=kernel_caller(ctx, acc.kernel_id, ("float16",)),
        )
