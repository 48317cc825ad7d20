"""PAL201: semaphore_signal / semaphore_wait / semaphore_read on an Array."""
from pallas_lsp.engine.rules._base import Context, Finding, explain_value, is_value, ref_fix

CODE = "PAL201"
MESSAGE = "Cannot {name} on a non-semaphore Ref: {aval}"

_VERB = {"semaphore_signal": "signal", "semaphore_wait": "wait", "semaphore_read": "read"}


def check(ctx: Context):
    for op in ctx.events.sem_ops:
        arg = op.sem
        if not arg.present or not is_value(arg.value):
            continue
        yield Finding(
            code=CODE,
            message=MESSAGE.format(name=_VERB[op.api], aval='…'),
            detail=explain_value(ctx, arg.node, arg.value),
            span=ctx.span(arg.node),
            fixes=ref_fix(ctx, arg.node),
        )
