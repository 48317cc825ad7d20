"""Shared facts for the start/wait protocol rules (PAL301-PAL304): which
semaphore allocations a kernel starts DMAs on, waits on, or hands to code
the engine cannot see. Rules use these to stay silent whenever another
start or wait *could* pair with the one in question."""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import field

from pallas_lsp.engine.events import DmaCall, Events
from pallas_lsp.engine.model import Ref, SemKind
from pallas_lsp.engine.records import record


def sem_root(value) -> str | None:
    """The allocation a semaphore argument belongs to; None when unknown."""
    if isinstance(value, Ref) and value.root and value.root != "?":
        return value.root
    return None


@record
class KernelProtocol:
    started: set = field(default_factory=set)  # roots some started DMA signals
    waited: set = field(default_factory=set)  # roots some DMA wait consumes
    unknown_start: bool = False  # a started DMA whose semaphore we cannot name
    unknown_wait: bool = False
    escaped: bool = False  # a descriptor or semaphore left our sight


# A line that stands for elided code: `...`, `# ...`, `# …` (docs pages,
# tutorials: "the rest of the kernel goes here").
_ELISION = re.compile(r"^\s*(#\s*)?(\.\.\.|…)\s*$")


def protocols(events: Events, src=None) -> dict[int, KernelProtocol]:
    """Per kernel analysis. With the file's source, a kernel whose def
    holds a line of elided code may start or wait there: its protocol is
    open, as if a descriptor escaped."""
    out: dict[int, KernelProtocol] = defaultdict(KernelProtocol)
    for kid in elided_kernels(events, src):
        out[kid].escaped = True
    for call in events.dmas:
        if not call.in_kernel:
            continue
        p = out[call.kernel_id]
        if call.escaped:
            p.escaped = True
        sems = [call.sem.value] + ([call.send_sem.value] if call.send_sem else [])
        roots = [sem_root(v) for v in sems]
        if call.started and call.api != "sync_copy":
            if roots[0] is None:
                p.unknown_start = True
            p.started.update(r for r in roots if r)
        if call.waited and call.api != "sync_copy":
            if roots[0] is None:
                p.unknown_wait = True
            p.waited.update(r for r in roots if r)
    for kid, root in events.escaped_roots:
        out[kid].escaped = True
    for kid in list(out):
        if kid in events.truncated or -1 in events.truncated:
            out[kid].escaped = True
    for op in events.sem_ops:  # a semaphore op on a DMA semaphore: someone is counting
        root = sem_root(op.sem.value)
        if root:
            out[op.kernel_id].waited.add(root)
            out[op.kernel_id].started.add(root)
        else:
            out[op.kernel_id].unknown_wait = out[op.kernel_id].unknown_start = True
    _pair_split_phase(out, _aliasing_kernels(events), _fed_by_kernels(events))
    return out


def elided_kernels(events: Events, src) -> set[int]:
    """Kernel analyses whose def (in the analysed file) holds elided code."""
    if src is None:
        return set()
    return {la.kernel_id for la in events.launches
            if la.kernel_id and la.kernel_node is not None and _elided(la.kernel_node, src)}


def _elided(node: ast.AST, src) -> bool:
    if getattr(node, "_pl_src", src) is not src:
        return False  # a def of another file (an import): its lines are not these
    start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or 0
    lines = src.lines
    # Comments after the last statement, indented into the body, are the body's
    # (`# ...` as its last line).
    col = getattr(node, "col_offset", 0)
    while end < len(lines):
        text = lines[end]
        stripped = text.lstrip()
        if stripped and (not stripped.startswith("#") or len(text) - len(stripped) <= col):
            break
        end += 1
    return any(_ELISION.match(line) for line in lines[max(start - 1, 0):end])


def _aliasing_kernels(events: Events) -> set[int]:
    """Kernels whose launch writes into an operand (`input_output_aliases=`):
    the done half of a split-phase copy is handed the start half's output."""
    out = set()
    for la in events.launches:
        call = la.node
        while isinstance(call, ast.Call):
            if any(k.arg == "input_output_aliases" and not (
                    isinstance(k.value, ast.Dict) and not k.value.keys) for k in call.keywords):
                out.add(la.kernel_id)
                break
            call = call.func
    return out


def _fed_by_kernels(events: Events) -> dict[int, set[int]]:
    """Kernel analysis -> the kernel analyses whose launch's output its own
    launch is handed (`done(x, start(x))`)."""
    kernels: dict[int, set[int]] = defaultdict(set)  # id(launch node) -> its kernel analyses
    for la in events.launches:
        if la.kernel_id:
            kernels[id(la.node)].add(la.kernel_id)
    out: dict[int, set[int]] = defaultdict(set)
    for node_id, makers in events.fed_by.items():
        for kid in kernels.get(node_id, ()):
            for m in makers:
                out[kid].update(kernels.get(m, ()))
    return out


def _pair_split_phase(out: dict[int, KernelProtocol], aliasing: set[int],
                      fed_by: dict[int, set[int]]) -> None:
    """Split-phase DMAs across kernels: one pallas_call starts copies on its
    scratch semaphore and returns, a second one, with the same scratch
    shapes, only waits (the runtime gives both the same semaphore, by its
    position in the scratch: on a v5e chip a wait on another position hung).
    The second one is handed the buffer the first one returned, or writes
    into an operand (`input_output_aliases`). A semaphore one kernel starts
    and never waits on, that such a second kernel of the analysis waits on
    and never starts, in the same scratch position, is taken as a pair:
    neither is reported. Two unrelated kernels (a test file's hang and
    dropped-copy cases, neither handed the other's output) are not."""
    waiters: dict[str, list[int]] = defaultdict(list)  # root -> kernels only waiting on it
    for kid, p in out.items():
        if kid not in aliasing and kid not in fed_by:
            continue
        for r in p.waited - p.started:
            if local_allocation(r):
                waiters[r].append(kid)
    starters = [(kid, r) for kid, p in out.items() for r in p.started - p.waited
                if r in waiters]
    for kid, r in starters:
        others = [k for k in waiters[r] if k != kid and (k in aliasing or kid in fed_by.get(k, ()))]
        if others:
            out[kid].waited.add(r)
            for k in others:
                out[k].started.add(r)


def by_node(calls: list[DmaCall]) -> dict[int, list[DmaCall]]:
    """All the times one source line built a descriptor (loops, call sites)."""
    groups: dict[int, list[DmaCall]] = defaultdict(list)
    for c in calls:
        groups[id(c.node)].append(c)
    return groups


def local_allocation(root: str) -> bool:
    """Allocated by this kernel (scratch / run_scoped), so no other kernel
    or pallas_call can start or wait on it."""
    return root.startswith(("scratch_shapes", "scratch_types", "pl.run_scoped"))


def dma_sem(value) -> bool:
    return isinstance(value, Ref) and value.sem is SemKind.DMA
