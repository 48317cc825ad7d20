"""PAL301: a copy descriptor that is never started nor waited."""
from pallas_lsp.engine.rules._base import Context, Finding, Severity
from pallas_lsp.engine.rules._protocol import by_node, elided_kernels

CODE = "PAL301"
MESSAGE = "AsyncCopyDescriptor was not used. Did you mean to call `start` or `wait` on it?"


def check(ctx: Context):
    calls = [c for c in ctx.events.dmas if c.in_kernel
             and c.api in ("make_async_copy", "make_async_remote_copy")]
    elided = elided_kernels(ctx.events, ctx.src)
    for group in by_node(calls).values():
        # Every time this line ran, the descriptor was dropped on the floor.
        if any(c.ops or c.escaped for c in group):
            continue
        if any(c.kernel_id in ctx.events.truncated for c in group) or -1 in ctx.events.truncated:
            continue  # part of the kernel was not followed: it may be used there
        if any(c.kernel_id in elided for c in group):
            continue  # `# ...`: the code that uses it may be what was left out
        call = group[0]
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=(f"This `{call.api}(...)` only describes a copy; nothing happens "
                     f"until `.start()` is called, so the destination is never written. JAX "
                     f"only logs this when the descriptor is garbage-collected."),
            span=ctx.span(call.node.func),
            severity=Severity.WARNING,
        )
