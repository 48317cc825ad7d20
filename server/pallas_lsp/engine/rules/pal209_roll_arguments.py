"""PAL209: pltpu.roll with arguments its wrapper rejects."""
from pallas_lsp.engine.model import Array, Const, Ref
from pallas_lsp.engine.rules._base import Context, Finding

CODE = "PAL209"
MESSAGE = "shift must be non-negative."


def _int(arg):
    if arg is None or not arg.present or not isinstance(arg.value, Const):
        return None
    v = arg.value.value
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _given(arg) -> bool:
    """Passed, and not a literal None."""
    return arg is not None and arg.present and not (
        isinstance(arg.value, Const) and arg.value.value is None)


def check(ctx: Context):
    for roll in ctx.events.rolls:
        x = roll.x.value
        shape = x.shape if isinstance(x, (Array, Ref)) else None
        rank = len(shape) if shape is not None else None
        shift, axis = _int(roll.shift), _int(roll.axis)
        stride, stride_axis = _int(roll.stride), _int(roll.stride_axis)
        problems = []  # (JAX's message, node, explanation); first one is what JAX raises
        if shift is not None and shift < 0:
            problems.append(("shift must be non-negative.", roll.shift.node,
                             f"a negative shift ({shift}) is not accepted: roll by "
                             f"`size + ({shift})` along that axis instead."))
        if axis is not None and (axis < 0 or (rank is not None and axis >= rank)):
            problems.append(("axis is out of range.", roll.axis.node,
                             f"axis {axis} " + ("is negative: pltpu.roll takes no negative axes "
                                                 "(write the positive index)."
                                                 if axis < 0 else f"does not exist in a rank-{rank} value.")))
        if _given(roll.stride) != _given(roll.stride_axis):
            node = (roll.stride or roll.stride_axis).node
            problems.append(("stride and stride_axis must be both specified or not.", node,
                             "give both `stride` and `stride_axis`, or neither."))
        elif _given(roll.stride):
            if stride is not None and stride < 0:
                problems.append(("stride must be non-negative.", roll.stride.node,
                                 f"stride {stride} is negative."))
            elif stride_axis is not None and (stride_axis < 0 or
                                              (rank is not None and stride_axis >= rank)):
                problems.append(("stride_axis is out of range", roll.stride_axis.node,
                                 f"stride_axis {stride_axis} is outside the value's axes."))
            elif axis is not None and stride_axis is not None and axis == stride_axis:
                problems.append(("expected axis and stride_axis are different.",
                                 roll.stride_axis.node, "the stride must run along another axis."))
        if problems:
            message, node, why = problems[0]
            yield Finding(code=CODE, message=message,
                          detail=f"pltpu.roll: {why}",
                          span=ctx.span(node if node is not None else roll.node))
