"""PAL401: a BlockSpec whose last two dims are neither whole tiles nor the
array's own (TPU lowering; interpret mode accepts it). The array is the
`out_shape` entry for an output and, for an input, the array the call
passes when the engine knows it (a caller's `jnp.zeros(...)`, a test case).
A 32-bit or 16-bit block needs (8, 128) multiples (the lowering's check);
an 8-bit one (32, 128) multiples (Mosaic's E2002, after the lowering). Like
the compiler, one finding per launch: its first bad block."""
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import (
    BLOCK_SPACES,
    array_text,
    caller_related,
    input_arrays,
    items,
    judged_launches,
    known_shape,
    operand_name,
    spec_node,
)
from pallas_lsp.engine.values import ShapeDtype, Spec

CODE = "PAL401"
MESSAGE = ("The Pallas TPU lowering currently requires that the last two dimensions of your "
           "block shape are divisible by 8 and 128 respectively, or be equal to the respective "
           "dimensions of the overall array.")
# Mosaic's words for an 8-bit block of whole (8, 128) but not (32, 128) tiles
# (the finding keeps the catalog's message and names this in its detail).
MOSAIC_8BIT = "E2002: CompileTimeMosaicMisalignedBlockAndTiling"
# Measured (deviceless compile, v5e and v6e): these need 32 rows; int16,
# bfloat16 and bool blocks of 8 rows compile.
EIGHT_BIT = ("int8", "uint8", "float8_e4m3fn", "float8_e5m2")


def _bad_dims(block: tuple, array: tuple, rows: int) -> list[str]:
    out = []
    (b1, b0), (a1, a0) = block[-2:], array[-2:]
    if not (b0 == a0 or b0 % 128 == 0):
        out.append(f"the last dimension {b0} is not a multiple of 128 nor the array's {a0}")
    if not (b1 == a1 or b1 % rows == 0):
        out.append(f"the second-to-last dimension {b1} is not a multiple of {rows} nor the "
                   f"array's {a1}")
    return out


def _blocks(launch):
    """(key, index, count, spec, array, passed) for each block the launch
    judges, inputs first (the compiler's order); `passed`: the array came
    from the call."""
    ins = items(launch.in_specs)
    if ins is not None:
        for i, (spec, sd) in enumerate(zip(ins, input_arrays(launch, len(ins)))):
            yield "in_specs", i, len(ins), spec, sd, True
    specs, shapes = items(launch.out_specs), items(launch.out_shape)
    if specs is not None and shapes is not None and len(specs) == len(shapes):
        for i, (spec, out) in enumerate(zip(specs, shapes)):
            yield "out_specs", i, len(specs), spec, out, False


def _judged(spec, sd) -> bool:
    if not isinstance(spec, Spec) or not isinstance(sd, ShapeDtype):
        return False
    block, array = spec.block_shape, sd.shape
    # unknown, squeezed (None) or rank-1 blocks: not judged
    return spec.space in BLOCK_SPACES and known_shape(block) and known_shape(array) \
        and len(block) == len(array) and len(block) >= 2


def check(ctx: Context):
    for launch in judged_launches(ctx):
        blocks = [b for b in _blocks(launch) if _judged(b[3], b[4])]
        # The lowering checks every block against (8, 128) first; Mosaic the
        # 8-bit ones against (32, 128) after it.
        first = next(((b, p, 8) for b in blocks if (p := _bad_dims(b[3].block_shape, b[4].shape,
                                                                    8))), None)
        if first is None:
            first = next(((b, p, 32) for b in blocks if b[4].dtype in EIGHT_BIT and (
                p := _bad_dims(b[3].block_shape, b[4].shape, 32))), None)
        if first is None:
            continue
        (key, i, n, spec, sd, passed), problems, rows = first
        block = tuple(spec.block_shape)
        if key == "out_specs":
            which, related = ("outputs" if n == 1 else f"outputs[{i}]"), ()
            array = f"array {tuple(sd.shape)}"
        else:
            name = operand_name(launch, i, n, ctx.text)
            which, array = f"in_specs[{i}]", f"with {name}: {array_text(sd)}"
            related = caller_related(ctx, launch, sd, name) if passed else ()
        if launch.variant:
            array += f", {launch.variant}"
        tiles = "" if rows == 8 else (f" ({sd.dtype} tiles are (32, 128); the compiler says "
                                      f"`{MOSAIC_8BIT}`)")
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"The block {block} of {which} ({array}): {'; '.join(problems)}{tiles}. "
                    f"TPU interpret mode runs it; every TPU generation (v4, v5e, v5p, v6e) "
                    f"refuses to compile it."),
            span=ctx.span(spec_node(launch, key, i)),
            related=related,
        )
