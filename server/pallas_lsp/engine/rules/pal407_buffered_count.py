"""PAL407: a TPU pallas_call BlockSpec with `pipeline_mode=pl.Buffered(n)`
where n is not 1 or 2 (the Pallas TPU lowering refuses it; interpret mode
runs it)."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import items, judged_launches, spec_buffers, spec_node
from pallas_lsp.engine.values import Spec

CODE = "PAL407"
MESSAGE = "Only single (1) and double (2) buffering are supported. Got {n}."


def check(ctx: Context):
    for launch in judged_launches(ctx):
        for key in ("in_specs", "out_specs"):
            specs = items(getattr(launch, key)) or []
            for i, spec in enumerate(specs):
                if not isinstance(spec, Spec):
                    continue
                node = spec.decl if spec.decl is not None else spec_node(launch, key, i)
                given, n = spec_buffers(spec, node)
                if not given or n is None or n in (1, 2):
                    continue  # not written, not a literal, or supported
                case = f" ({launch.variant})" if launch.variant else ""
                yield Finding(
                    code=CODE,
                    message=MESSAGE.format(n=n),
                    detail=(f"`pl.Buffered({n})` on {key}[{i}]{case}: a TPU pallas_call pipelines "
                            f"each block with one or two buffers. TPU interpret mode runs it; "
                            f"lowering for any TPU generation fails."),
                    span=ctx.span(node),
                )
