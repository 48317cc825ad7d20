"""PAL111: a DMA with add=True.

Only TensorCore kernels are judged: SparseCore's lowering accepts `add=True`
for some copies (between VMEM and shared VMEM, with indirect offsets). A DMA
the engine saw outside any launch, or in kernel code it ran without one (its
launch not bound), is not judged in a file that uses SparseCore, where it may
well be SparseCore code."""
from pallas_lsp.engine.backend import sparsecore_kernels
from pallas_lsp.engine.rules._base import Const, Context, Finding

CODE = "PAL111"
MESSAGE = "DMA partial discharge add=True not yet implemented."


def check(ctx: Context):
    sparsecore = sparsecore_kernels(ctx.events)
    sc_file = "tpu_sc" in ctx.src.text or bool(sparsecore)
    for call in ctx.events.dmas:
        unlaunched = not call.kernel_id or call.kernel_id in ctx.events.standalone
        if call.kernel_id in sparsecore or (unlaunched and sc_file):
            continue
        sites = [call.add] + [op.add for op in call.ops if op.op == "start"]
        for arg in sites:
            if arg is None or not arg.present:
                continue
            if isinstance(arg.value, Const) and arg.value.value is True:
                yield Finding(
                    code=CODE,
                    message=MESSAGE,
                    detail=(f"`add=True` is rejected by `interpret=True` and by the "
                             f"TPU compiler, and TPU interpret mode silently does a plain copy "
                             f"instead. Copy into a scratch buffer and add it with vector code."),
                    span=ctx.span(arg.node),
                )
