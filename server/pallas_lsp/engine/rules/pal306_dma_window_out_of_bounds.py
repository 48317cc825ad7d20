"""PAL306: a window `ref.at[...]` that provably leaves the Ref's shape.

A slice window (`pl.ds(start, size)`, `a:b`) past the end is refused by JAX
while it traces the kernel, wherever the window is used; an integer index
past the end is only caught when the copy runs (TPU interpret mode's
out-of-bounds read / write), so it is judged only as a DMA's source or
destination. Starts, sizes and dimensions must all be known constants
(`binding.shapes.window_overflow`)."""
import ast

from pallas_lsp.engine.rules._base import Context, Finding

CODE = "PAL306"
MESSAGE = "Out of bound slice: start={start}, size={size}, stride={stride}, dim={dim}."


def check(ctx: Context):
    dma_nodes = {id(n) for call in ctx.events.dmas for arg in (call.src, call.dst)
                 if arg.present for n in ast.walk(arg.node)}
    for w in ctx.events.windows:
        if w.kind == "int" and id(w.node) not in dma_nodes:
            continue
        if w.kind == "slice":
            detail = ("JAX refuses this window while tracing the kernel. Keep `start + size` "
                      "within the dimension (the Ref's shape comes from its BlockSpec, "
                      "`out_shape` or scratch allocation).")
        else:
            detail = ("JAX does not check an integer index while tracing; the copy fails when "
                      "it runs (TPU interpret mode: an out-of-bounds read or write) and reads "
                      "or writes outside the buffer on a TPU. Index within the dimension.")
        yield Finding(code=CODE, message=w.text, detail=detail, span=ctx.span(w.index))
