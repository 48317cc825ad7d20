"""Semaphores: `semaphore_signal` / `semaphore_wait` / `semaphore_read`
become `SemOp` events; `get_barrier_semaphore()` is a scalar BARRIER
semaphore. (Allocating semaphores is in allocations.py.)"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.events import Arg, SemOp, pick
from pallas_lsp.engine.model import Array, Const, Ref, SemKind, Space, Value

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t in api.SEM_OPS:
        sem = pick(args, kwargs, 0, "sem_or_view")
        if sem is not None:
            host.events.sem_ops.append(SemOp(
                site=host.active_site, api=t, node=node, sem=sem, decrement=kwargs.get("decrement"),
                device_id=kwargs.get("device_id"), kernel_id=frame.kernel_id))
        return Array(origin=t) if t == "semaphore_read" else Const(value=None)
    if t == "get_barrier_semaphore":
        return Ref(origin="pltpu.get_barrier_semaphore()", space=Space.SEMAPHORE, shape=(),
                   sem=SemKind.BARRIER)
    return None
