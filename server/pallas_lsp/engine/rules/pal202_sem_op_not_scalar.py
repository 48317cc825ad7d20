"""PAL202: semaphore_signal / semaphore_wait on a semaphore array."""
from pallas_lsp.engine.rules._base import Context, Finding, Ref, at_fix, sem_shape_text

CODE = "PAL202"
MESSAGE = "Cannot {name} on a non-()-shaped semaphore: {shape}"

_VERB = {"semaphore_signal": "signal", "semaphore_wait": "wait", "semaphore_read": "read"}


def check(ctx: Context):
    for op in ctx.events.sem_ops:
        arg, v = op.sem, op.sem.value
        if not arg.present or not isinstance(v, Ref) or v.sem is None:
            continue
        if v.shape is None or v.shape == ():
            continue
        shape = sem_shape_text(v.shape)
        text = ctx.text(arg.node)
        yield Finding(
            code=CODE,
            message=MESSAGE.format(name=_VERB[op.api], shape=shape),
            detail=(f"`{text}` is an array "
                     f"of semaphores; pick one with `{text}.at[i]`."),
            span=ctx.span(arg.node),
            fixes=at_fix(ctx, arg.node, v.shape),
        )
