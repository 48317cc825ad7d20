"""PAL206: pltpu.load / pltpu.store (or pl.load / pl.store) given an Array."""
from pallas_lsp.engine.rules._base import Context, Finding, explain_value, is_value, ref_fix

CODE = "PAL206"
MESSAGE = "Can only call `{name}` on a `Ref`: {value}."


def check(ctx: Context):
    for acc in ctx.events.accesses:
        if acc.kind not in ("load", "store"):
            continue
        arg = acc.ref
        if not arg.present or not is_value(arg.value):
            continue
        yield Finding(
            code=CODE,
            message=MESSAGE.format(name=acc.kind, value='…'),
            detail=explain_value(ctx, arg.node, arg.value),
            span=ctx.span(arg.node),
            fixes=ref_fix(ctx, arg.node),
        )
