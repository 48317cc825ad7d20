"""PAL403: +, -, *, // or unary - on 8-bit integer vectors in a TPU kernel,
which the Mosaic compiler rejects on every generation.

The dtype is known when the result is stored straight into a Ref of dtype
int8 / uint8 (the store only type-checks when the arithmetic ran in that
dtype), or when every operand is such an array (a read of an 8-bit Ref,
perhaps given its dtype by the caller's array) or a Python int."""
import ast

from pallas_lsp.engine.model import Array, Const, Ref
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import judged_kernel_ids, kernel_caller

CODE = "PAL403"
MESSAGE = "Only vector<i16> and vector<i32> are supported, but got 'i8'. Please cast your input."
INT8 = ("int8", "uint8")
BINOPS = ("Add", "Sub", "Mult", "FloorDiv")


def _int8_operands(op) -> str | None:
    """The 8-bit dtype the operation runs in, judged from its operands: every
    array operand of that one dtype, any other a Python int (weakly typed).
    An operand of another or unknown dtype may promote it (int8 * f32 is a
    float32 product): then it is not known."""
    arrays = [v for v in op.operands if isinstance(v, (Array, Ref))]
    if not any(isinstance(v, Array) for v in op.operands):
        return None
    if any(not isinstance(v, (Array, Ref)) and not (isinstance(v, Const) and type(v.value) is int)
           for v in op.operands):
        return None
    dtypes = {v.dtype for v in arrays}
    return dtypes.pop() if len(dtypes) == 1 and dtypes <= set(INT8) else None


def check(ctx: Context):
    kernels = judged_kernel_ids(ctx)
    ops = {id(op.node): op for op in ctx.events.kernel_ops if op.kernel_id in kernels and (
        (op.kind == "binop" and op.name in BINOPS) or (op.kind == "unary" and op.name == "USub"))}
    if not ops:
        return
    runs: dict[int, list] = {}  # node -> its operation in each kernel run that reached it
    for op in ctx.events.kernel_ops:
        if id(op.node) in ops and op.kernel_id in kernels:
            runs.setdefault(id(op.node), []).append(op)
    stored: dict[int, str] = {}
    for acc in ctx.events.accesses:
        if acc.value is None or acc.value.node is None or not isinstance(acc.ref.value, Ref):
            continue
        node = acc.value.node
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and id(node) in ops \
                and acc.ref.value.dtype in INT8:
            stored[id(node)] = acc.ref.value.dtype
    for key, op in ops.items():
        dtype = stored.get(key) or next((d for o in runs[key] if (d := _int8_operands(o))), None)
        if dtype is None or not any(isinstance(v, Array) for v in op.operands):
            continue
        what = {"Add": "an addition", "Sub": "a subtraction", "Mult": "a multiplication",
                "FloorDiv": "an integer division", "USub": "a negation"}[op.name]
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"This is {what} of {dtype} vectors: the Mosaic compiler rejects "
                     f"8-bit vector arithmetic on v4, v5e, v5p and v6e, while TPU interpret mode "
                     f"runs it. Cast to int32 first (`x.astype(jnp.int32)`) and back when storing."),
            span=ctx.span(op.node),
            related=next((r for o in runs[key] if (r := kernel_caller(ctx, o.kernel_id, INT8))),
                         ()),
        )
