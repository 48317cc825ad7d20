"""PAL406: a wait-only descriptor in a TPU kernel waits on a whole array of
semaphores. `dma_wait` does not check the semaphore's shape, so tracing
accepts it; the Mosaic verifier rejects it when the kernel is lowered for a
TPU (the check is in the `tpu.wait_dma2` op), and TPU interpret mode fails
with a generic TypeError. A remote `.wait()` waits on the send semaphore and
then the receive one, so both are checked (tests/compile/test_remote_rules.py
proves the send side against both)."""
from pallas_lsp.engine.model import Ref
from pallas_lsp.engine.rules._base import (
    Context,
    Finding,
    at_fix,
    sem_shape_text,
    wait_only,
    wait_ops,
)
from pallas_lsp.engine.rules._tpu import judged_kernel_ids

CODE = "PAL406"
MESSAGE = "DMA wait semaphore must be rank 0"


def check(ctx: Context):
    # SparseCore kernels too: its lowering emits the same `tpu.wait_dma2`
    # (tests/compile/test_sc_wait_rule.py, v5p and v6e, both subcores).
    kernels = judged_kernel_ids(ctx, sparsecore=True)
    for call, _ in wait_only(ctx):
        if call.kernel_id not in kernels:
            continue
        args = []
        if wait_ops(call, ("wait", "wait_recv")):
            args.append(("receive" if call.remote else "completion", call.sem))
        # A remote descriptor's `.wait()` is `wait_send()` then `wait_recv()`.
        if call.remote and call.send_sem is not None and wait_ops(call, ("wait", "wait_send")):
            args.append(("send", call.send_sem))
        for role, arg in args:
            v = arg.value
            if not arg.present or not isinstance(v, Ref) or v.sem is None \
                    or v.shape is None or v.shape == ():
                continue
            text = ctx.text(arg.node)
            shape = sem_shape_text(v.shape)
            yield Finding(
                code=CODE,
                message=MESSAGE,
                detail=(f"`{text}` is an array of semaphores (shape {shape}); a DMA wait "
                         f"blocks on one {role} semaphore, so select it with `{text}.at[i]`. "
                         f"Tracing accepts this; lowering for a TPU fails (the `tpu.wait_dma2` op)."),
                span=ctx.span(arg.node),
                fixes=at_fix(ctx, arg.node, v.shape),
            )
