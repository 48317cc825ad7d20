"""PAL404: a pallas_call whose blocks need more scoped VMEM than the limit of
every default generation (v5e, v6e), even at the least the compiler can need
(engine/vmem.py, through _tpu.launch_vmem)."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import (
    caller_related,
    judged_launches,
    launch_vmem,
    operand_name,
)
from pallas_lsp.engine.tpu import DEFAULT_GENERATIONS, fmt_bytes

CODE = "PAL404"
MESSAGE = ("Scoped allocation with size {size} and limit {limit} exceeded scoped vmem limit "
           "by {excess}.")


def check(ctx: Context):
    for launch in judged_launches(ctx):
        lv = launch_vmem(launch, ctx.events)
        if lv is None or not lv.surely_over(DEFAULT_GENERATIONS):
            continue
        est = lv.estimate
        worst = max(lv.limits[g] for g in DEFAULT_GENERATIONS)
        limits = ", ".join(f"{g} {fmt_bytes(lv.limits[g])}" for g in DEFAULT_GENERATIONS)
        parts = ", ".join(f"{p.name} {fmt_bytes(p.bytes)}" for p in est.parts if p.bytes)
        at_least = "" if est.exact and est.floor == est.total else "at least "
        yield Finding(
            code=CODE,
            message=MESSAGE.format(size=fmt_bytes(est.floor), limit=fmt_bytes(worst),
                                   excess=fmt_bytes(est.floor - worst)),
            detail=(f"Estimated: {at_least}{fmt_bytes(est.floor)} ({parts}); limit "
                     f"{limits}{' from vmem_limit_bytes' if lv.set_limit else ', the defaults'}. "
                     f"Use smaller blocks, or raise `vmem_limit_bytes` in "
                     f"`pltpu.CompilerParams`."),
            span=ctx.span(launch.node.func if hasattr(launch.node, "func") else launch.node),
            related=_operands(ctx, launch),
        )


def _operands(ctx: Context, launch) -> tuple:
    """Where the arrays the estimate counted were made (and in which case)."""
    ops = launch.operands or ()
    return tuple(r for j, sd in enumerate(ops) if sd is not None
                 for r in caller_related(ctx, launch, sd, operand_name(launch, j, len(ops),
                                                                       ctx.text)))[:2]
