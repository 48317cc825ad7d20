"""PAL402: a jnp / lax function whose primitive has no Pallas TPU lowering,
called on an Array in a TPU kernel (the list: engine/data/tpu_lowering.json)."""
from pallas_lsp.engine.model import Array
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import judged_kernel_ids
from pallas_lsp.engine.tpu import unlowerable

CODE = "PAL402"
MESSAGE = "Unimplemented primitive in Pallas TPU lowering for tc: {primitive}."


def check(ctx: Context):
    kernels = judged_kernel_ids(ctx)
    for op in ctx.events.kernel_ops:
        if op.kind != "call" or op.kernel_id not in kernels:
            continue
        prims = unlowerable(op.name)
        # Judged only on Arrays: `jnp.array(3.0)` of a constant binds nothing in the kernel.
        if not prims or not op.operands or not isinstance(op.operands[0], Array):
            continue
        yield Finding(
            code=CODE,
            message=MESSAGE.format(primitive=prims[0]),
            detail=(f"`{op.name}` binds "
                     f"{', '.join(f'`{p}`' for p in prims)}, which the TPU TensorCore cannot lower "
                     f"(on any generation); TPU interpret mode runs it on the CPU. Compute it "
                     f"outside the kernel or with operations that lower."),
            span=ctx.span(op.node),
        )
