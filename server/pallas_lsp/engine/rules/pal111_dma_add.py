"""PAL111: a DMA with add=True."""
from pallas_lsp.engine.rules._base import Const, Context, Finding

CODE = "PAL111"
MESSAGE = "DMA partial discharge add=True not yet implemented."


def check(ctx: Context):
    for call in ctx.events.dmas:
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
