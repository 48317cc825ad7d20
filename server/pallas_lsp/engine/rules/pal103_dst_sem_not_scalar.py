"""PAL103: the destination (receive) semaphore of a DMA is a semaphore array."""
from pallas_lsp.engine.rules._base import (Context, Finding, Ref, at_fix, raise_sites,
                                           sem_shape_text, start_ops)

CODE = "PAL103"
MESSAGE = "Cannot signal on a non-()-shaped semaphore: {shape}"


def check(ctx: Context):
    for call in ctx.events.dmas:
        if not call.started:
            continue
        yield from shaped_sem(ctx, call, call.sem, CODE, "receive" if call.remote else "completion")


def shaped_sem(ctx, call, arg, code, role):
    v = arg.value
    # Only Refs known to be semaphores: a data Ref here means our binding is
    # off (or a different bug), and precision comes first.
    if not arg.present or not isinstance(v, Ref) or v.sem is None:
        return
    if v.shape is None or v.shape == ():
        return
    shape = sem_shape_text(v.shape)
    text = ctx.text(arg.node)
    yield Finding(
        code=code,
        message=MESSAGE.format(shape=shape),
        detail=(f"`{text}` is a whole array of semaphores "
                 f"(shape {shape}); a DMA signals exactly one {role} semaphore, so select it "
                 f"with `{text}.at[i]`."),
        span=ctx.span(arg.node),
        related=raise_sites(ctx, call, start_ops(call), "start"),
        fixes=at_fix(ctx, arg.node, v.shape),
    )
