"""DMAs: `make_async_copy`, `async_copy`, remote copies and `sync_copy`
become `DmaCall` events; the descriptor they return carries the call's id
so that `.start()` / `.wait()` later find it."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.events import Arg, DmaCall, pick
from pallas_lsp.engine.model import Const, Descriptor, Value
from pallas_lsp.engine.values import UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t not in api.DMA_MAKERS:
        return None
    absent = Arg(None, UNKNOWN)
    remote = t in ("make_async_remote_copy", "async_remote_copy")
    call = DmaCall(
        site=host.active_site, id=len(host.events.dmas), api=t, node=node,
        src=pick(args, kwargs, 0, "src_ref") or absent,
        dst=pick(args, kwargs, 1, "dst_ref") or absent,
        sem=(pick(args, kwargs, 3, "recv_sem") if remote
             else pick(args, kwargs, 2, "sem")) or absent,
        in_kernel=frame.kernel, kernel_id=frame.kernel_id,
    )
    if remote:
        call.send_sem = pick(args, kwargs, 2, "send_sem") or absent
        call.device_id = pick(args, kwargs, 4, "device_id") or absent
    if t == "async_copy":
        call.priority = kwargs.get("priority")
        call.add = kwargs.get("add")
    if t == "sync_copy":
        call.sem = absent
        call.add = kwargs.get("add")
    host.events.dmas.append(call)
    if t == "sync_copy":
        return Const(value=None)
    return Descriptor(origin=f"{t}(...) at line {node.lineno}", remote=remote,
                      call_ids=frozenset({call.id}))
