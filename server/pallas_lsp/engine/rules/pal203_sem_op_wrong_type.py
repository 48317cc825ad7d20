"""PAL203: semaphore_signal / semaphore_wait on a DMA semaphore or a data Ref."""
from pallas_lsp.engine.rules._base import Context, Finding, Ref, SemKind

CODE = "PAL203"
MESSAGE = "Must {name} semaphores of the following types: {types}. Got {dtype}."

_VERB = {"semaphore_signal": "signal", "semaphore_wait": "wait"}


def check(ctx: Context):
    for op in ctx.events.sem_ops:
        if op.api not in _VERB:
            continue
        arg, v = op.sem, op.sem.value
        if not arg.present or not isinstance(v, Ref):
            continue
        if v.shape not in (None, ()) and v.sem is not None:
            continue  # PAL202 fires first
        text = ctx.text(arg.node)
        if v.sem is SemKind.DMA:
            got = "dma_sem"
            why = (f"`{text}` is a DMA semaphore; it is waited through its copy descriptor "
                   f"(`.wait()`), not with pl.semaphore_{_VERB[op.api]}.")
        elif v.sem is None and v.dtype is not None:
            got = v.dtype
            why = f"`{text}` is a data Ref ({v.dtype}), not a semaphore."
        else:
            continue
        yield Finding(
            code=CODE,
            message=MESSAGE.format(name=_VERB[op.api], types='{…}',
                                   dtype=got),
            detail=why,
            span=ctx.span(arg.node),
        )
