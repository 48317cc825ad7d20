"""PAL305: a DMA whose source and destination differ in size or dtype."""
import math

from pallas_lsp.engine.backend import sparsecore_kernels
from pallas_lsp.engine.model import fmt_shape
from pallas_lsp.engine.rules._base import Context, Finding, Ref

CODE = "PAL305"
MESSAGE = "DMA source and destination do not match"


def _known(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def check(ctx: Context):
    # A SparseCore DMA gathers and scatters through index Refs and arrays
    # (`x.at[indices]`), whose windows the engine does not size: not judged.
    sparsecore = sparsecore_kernels(ctx.events)
    for call in ctx.events.dmas:
        if not (call.started or call.waited) or not call.src.present or not call.dst.present:
            continue
        if call.kernel_id in sparsecore:
            continue
        src, dst = call.src.value, call.dst.value
        if not isinstance(src, Ref) or not isinstance(dst, Ref) or src.sem or dst.sem:
            continue
        problem = None
        if _known(src.shape) and _known(dst.shape) \
                and math.prod(src.shape) != math.prod(dst.shape):
            bigger = math.prod(src.shape) > math.prod(dst.shape)
            problem = (f"The source is {fmt_shape(src.shape)} and the destination "
                       f"{fmt_shape(dst.shape)}. " +
                       ("JAX does not check this: TPU interpret mode silently copies only what "
                        "fits (truncated data)." if bigger else
                        "JAX does not check this statically: TPU interpret mode fails at run "
                        "time with a broadcast error."))
        elif src.dtype and dst.dtype and src.dtype != dst.dtype:
            problem = (f"The source is {src.dtype} and the destination {dst.dtype}; a DMA "
                       f"copies bytes and does not convert (TPU interpret mode fails with a "
                       f"bare AssertionError).")
        if problem:
            yield Finding(code=CODE, message=MESSAGE, detail=problem,
                          span=ctx.span(call.src.node))
