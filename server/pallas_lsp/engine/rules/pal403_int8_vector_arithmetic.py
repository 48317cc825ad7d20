"""PAL403: +, -, *, // or unary - on 8-bit integer vectors in a TPU kernel,
which the Mosaic compiler rejects on every generation.

The dtype is known when the result is stored straight into a Ref of dtype
int8 / uint8 (the store only type-checks when the arithmetic ran in that
dtype), or when an operand is a read of such a Ref."""
import ast

from pallas_lsp.engine.model import Array, Ref
from pallas_lsp.engine.rules._base import Context, Finding
from pallas_lsp.engine.rules._tpu import kernel_caller, tpu_kernel_ids

CODE = "PAL403"
MESSAGE = "Only vector<i16> and vector<i32> are supported, but got 'i8'. Please cast your input."
INT8 = ("int8", "uint8")
BINOPS = ("Add", "Sub", "Mult", "FloorDiv")


def _is_int8(v) -> bool:
    return isinstance(v, (Array, Ref)) and getattr(v, "dtype", None) in INT8


def check(ctx: Context):
    kernels = tpu_kernel_ids(ctx.events)
    ops = {id(op.node): op for op in ctx.events.kernel_ops if op.kernel_id in kernels and (
        (op.kind == "binop" and op.name in BINOPS) or (op.kind == "unary" and op.name == "USub"))}
    if not ops:
        return
    runs: dict[int, list[int]] = {}  # node -> the kernel runs that reached it
    for op in ctx.events.kernel_ops:
        if id(op.node) in ops:
            runs.setdefault(id(op.node), []).append(op.kernel_id)
    stored: dict[int, str] = {}
    for acc in ctx.events.accesses:
        if acc.value is None or acc.value.node is None or not isinstance(acc.ref.value, Ref):
            continue
        node = acc.value.node
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and id(node) in ops \
                and acc.ref.value.dtype in INT8:
            stored[id(node)] = acc.ref.value.dtype
    for key, op in ops.items():
        dtype = stored.get(key) or next((v.dtype for v in op.operands if _is_int8(v)), None)
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
            related=next((r for k in runs.get(key, []) if (r := kernel_caller(ctx, k, INT8))),
                         ()),
        )
