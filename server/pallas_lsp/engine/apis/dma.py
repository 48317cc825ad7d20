"""DMAs: `make_async_copy`, `async_copy`, remote copies and `sync_copy`
become `DmaCall` events; the descriptor they return carries the call's id
so that `.start()` / `.wait()` later find it."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import api
from pallas_lsp.engine.events import Arg, DmaCall, pick
from pallas_lsp.engine.model import Const, Descriptor, Seq, Value
from pallas_lsp.engine.values import UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t not in api.DMA_MAKERS:
        return None
    absent = Arg(None, UNKNOWN)
    if t == "sync_copy":
        pairs = _leaf_pairs(pick(args, kwargs, 0, "src_ref"), pick(args, kwargs, 1, "dst_ref"))
        if pairs is not None:  # a pytree of Refs: one copy per leaf, as jax.tree.map does
            for src, dst in pairs:
                host.events.dmas.append(DmaCall(
                    site=host.active_site, id=len(host.events.dmas), api=t, node=node,
                    src=src, dst=dst, sem=absent, in_kernel=frame.kernel,
                    kernel_id=frame.kernel_id, add=kwargs.get("add")))
            return Const(value=None)
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


def _leaf_pairs(src: Arg | None, dst: Arg | None) -> list[tuple[Arg, Arg]] | None:
    """`sync_copy((a, b), (c, d))`: the pairs of leaves of two pytrees of the
    same known structure; None when either side is not a tuple/list/dict
    (one copy) or the structures differ or are not known."""
    if src is None or dst is None or not isinstance(src.value, Seq) \
            or not isinstance(dst.value, Seq):
        return None
    a, b = _leaves(src), _leaves(dst)
    if a is None or b is None or len(a) != len(b) or not a:
        return None
    return list(zip(a, b))


def _leaves(arg: Arg, depth: int = 0) -> list[Arg] | None:
    v = arg.value
    if not isinstance(v, Seq):
        return [arg]
    if depth > 8:
        return None
    # Each leaf keeps its own node when written as a display, else the whole argument's.
    elts = arg.node.elts if isinstance(arg.node, (ast.Tuple, ast.List)) else \
        arg.node.values if isinstance(arg.node, ast.Dict) else None
    if elts is not None and len(elts) != len(v.items):
        elts = None
    out: list[Arg] = []
    for i, item in enumerate(v.items):
        sub = _leaves(Arg(elts[i] if elts is not None else arg.node, item, arg.keyword), depth + 1)
        if sub is None:
            return None
        out.extend(sub)
    return out
