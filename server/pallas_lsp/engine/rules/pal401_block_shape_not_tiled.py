"""PAL401: a BlockSpec whose last two dims are neither (8, 128)-multiples nor
the array's own (TPU lowering; interpret mode accepts it)."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import BLOCK_SPACES, items, known_shape, spec_node, tpu_launches
from pallas_lsp.engine.values import ShapeDtype, Spec

CODE = "PAL401"
MESSAGE = ("The Pallas TPU lowering currently requires that the last two dimensions of your "
           "block shape are divisible by 8 and 128 respectively, or be equal to the respective "
           "dimensions of the overall array.")


def _bad_dims(block: tuple, array: tuple) -> list[str]:
    out = []
    (b1, b0), (a1, a0) = block[-2:], array[-2:]
    if not (b0 == a0 or b0 % 128 == 0):
        out.append(f"the last dimension {b0} is not a multiple of 128 nor the array's {a0}")
    if not (b1 == a1 or b1 % 8 == 0):
        out.append(f"the second-to-last dimension {b1} is not a multiple of 8 nor the array's {a1}")
    return out


def check(ctx: Context):
    for launch in tpu_launches(ctx.events):
        specs, shapes = items(launch.out_specs), items(launch.out_shape)
        if specs is None or shapes is None or len(specs) != len(shapes):
            continue
        for i, (spec, out) in enumerate(zip(specs, shapes)):
            if not isinstance(spec, Spec) or not isinstance(out, ShapeDtype):
                continue
            block, array = spec.block_shape, out.shape
            if spec.space not in BLOCK_SPACES or not known_shape(block) \
                    or not known_shape(array) or len(block) != len(array) or len(block) < 2:
                continue  # unknown, squeezed (None) or rank-1 blocks: not judged
            problems = _bad_dims(block, array)
            if not problems:
                continue
            which = "outputs" if len(specs) == 1 else f"outputs[{i}]"
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=(f"The block {tuple(block)} of {which} (array {tuple(array)}): "
                         f"{'; '.join(problems)}. TPU interpret mode runs it; every TPU generation "
                         f"(v4, v5e, v5p, v6e) refuses to compile it."),
                span=ctx.span(spec_node(launch, "out_specs", i)),
            )
