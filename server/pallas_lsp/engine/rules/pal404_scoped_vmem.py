"""PAL404: a pallas_call whose blocks need more scoped VMEM than the limit of
every default generation (v5e, v6e); the estimate is in _tpu.vmem_estimate."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import over_everywhere, tpu_launches, vmem_estimate
from pallas_lsp.engine.tpu import DEFAULT_GENERATIONS, fmt_bytes

CODE = "PAL404"
MESSAGE = ("Scoped allocation with size {size} and limit {limit} exceeded scoped vmem limit "
           "by {excess}.")


def check(ctx: Context):
    for launch in tpu_launches(ctx.events):
        est = vmem_estimate(launch)
        if est is None or not over_everywhere(est):
            continue
        worst = max(est.limits[g] for g in DEFAULT_GENERATIONS)
        limits = ", ".join(f"{g} {fmt_bytes(est.limits[g])}" for g in DEFAULT_GENERATIONS)
        parts = ", ".join(f"{b.label} {fmt_bytes(b.bytes)}" + (" x2" if b.count == 2 else "")
                          for b in est.buffers if b.counted)
        at_least = "" if est.exact else "at least "
        yield Finding(
            code=CODE,
            message=MESSAGE.format(size=fmt_bytes(est.total), limit=fmt_bytes(worst),
                                   excess=fmt_bytes(est.total - worst)),
            detail=(f"Estimated: {at_least}{fmt_bytes(est.total)} of blocks: {parts}; limit "
                     f"{limits}{' from vmem_limit_bytes' if est.set_limit else ', the defaults'}). "
                     f"Use smaller blocks, or raise `vmem_limit_bytes` in "
                     f"`pltpu.CompilerParams`."),
            span=ctx.span(launch.node.func if hasattr(launch.node, "func") else launch.node),
        )
