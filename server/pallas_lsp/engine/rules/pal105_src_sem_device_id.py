"""PAL105: a remote copy with a send semaphore but no device id (or the reverse)."""
from pallas_lsp.engine.rules._base import Const, Context, Finding

CODE = "PAL105"
MESSAGE = "Either both or neither `src_sem` and `device_id` can be set."


def _is_none(arg) -> bool:
    return arg is not None and arg.present and isinstance(arg.value, Const) and arg.value.value is None


def check(ctx: Context):
    for call in ctx.events.dmas:
        if not call.remote:
            continue
        dev, send = call.device_id, call.send_sem
        if _is_none(dev) and send is not None and send.present and not _is_none(send):
            yield finding(ctx, dev.node, device_is_none=True)
        elif _is_none(send) and dev is not None and dev.present and not _is_none(dev):
            yield finding(ctx, send.node, device_is_none=False)


def finding(ctx: Context, node, *, device_is_none: bool) -> Finding:
    """On the None (`device_id` or the send semaphore); also the syntax floor's."""
    if device_is_none:
        detail = ("This remote copy has a send semaphore but `device_id` is None: say which "
                  "device receives the data (e.g. `device_id=(peer,)`), or use "
                  "`make_async_copy` for a copy on this device.")
    else:
        detail = ("This remote copy has a `device_id` but its send semaphore is None: pass a "
                  "DMA semaphore that is signalled when the data has left this device.")
    return Finding(code=CODE, message=MESSAGE, detail=detail, span=ctx.span(node), fixes=())
