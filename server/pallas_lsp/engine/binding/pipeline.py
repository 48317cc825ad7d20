"""`pltpu.emit_pipeline`: the `PipelineCallable` it returns and
`run_pipeline`, which runs the body with one VMEM block Ref per in/out
spec leaf, then the `scratches=` given when the pipeline is called."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine.binding.launch import new_launch
from pallas_lsp.engine.binding.scratch import mapped_record
from pallas_lsp.engine.binding.specs import operand_ref, spec_kinds
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.model import Const, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.records import frozen, replace
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, Partial, SeqOf, Spec, StarUnknown,
                                      is_record, join_all)

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


@frozen
class PipelineCallable(Value):
    """What `pltpu.emit_pipeline(body, ...)` returns: called with the
    operands (and `scratches=`), it runs the body on one block per spec."""

    body: Value = UNKNOWN
    blocks: tuple | None = ()  # one Ref per in/out spec leaf; None: unknown
    node: object = None
    node_id: int = 0
    block_elem: Value = UNKNOWN  # blocks None: what every block is, if that is known


def emit_pipeline(host: LaunchHost, args: list[Arg], kwargs: dict[str, Arg],
                  node: ast.Call, frame: Frame) -> Value:
    """The body of `pltpu.emit_pipeline(body, grid=..., in_specs=..., out_specs=...)`
    gets one VMEM block Ref per in/out spec, then the `scratches=` given to
    the pipeline when it is called."""
    body = args[0] if args else kwargs.get("body")
    if body is None or not isinstance(body.value, Func):
        return UNKNOWN
    refs: list[Value] | None = []
    kinds: list[Value] = []  # every block the specs may give, when they cannot be counted
    for key in ("in_specs", "out_specs"):
        spec = kwargs.get(key)
        if spec is None:
            continue
        # One body argument per top-level spec (jax normalises a single spec
        # to a tuple of one); a nested item gives a pytree of blocks.
        v = spec.value
        items = list(v.items) if isinstance(v, Seq) and v.keys is None else \
            None if isinstance(v, (SeqOf, Partial)) or (isinstance(v, Seq) and v.keys) else [v]
        if items is None:
            refs = None
        for i, s in enumerate(items if items is not None else spec_kinds(v)):
            block = _block_tree(s, f"pipeline block ({key}[{i}])", 0)
            kinds.append(block)
            if refs is not None:
                refs.append(block)
    elem = join_all(kinds) if refs is None and kinds else UNKNOWN
    pipe = PipelineCallable(body=body.value, blocks=tuple(refs) if refs is not None else None,
                            node=node, node_id=hash((id(node), host.variant)),
                            block_elem=elem if isinstance(elem, Ref) else UNKNOWN)
    host.pending_pipelines.append((pipe, frame))
    return pipe


def _block_tree(s: Value, origin: str, depth: int) -> Value:
    """The block(s) a pipeline body gets for one spec pytree."""
    if isinstance(s, Seq) and s.keys is None and depth < 4:
        return replace(s, items=tuple(_block_tree(x, f"{origin}[{i}]", depth + 1)
                                      for i, x in enumerate(s.items)))
    if is_record(s) and depth < 4:
        return mapped_record(s, lambda x, k: _block_tree(x, f"{origin}.{k}", depth + 1))
    return _block_ref(s, origin)


def _block_ref(s: Value, origin: str) -> Value:
    """A pipeline block: VMEM of the block shape; an optional spec (None
    when an operand is absent) gives None."""
    if isinstance(s, Const) and s.value is None:
        return Const(value=None)
    if not isinstance(s, Spec):
        return UNKNOWN
    ref = operand_ref(s, None, origin)
    if s.space is None:
        ref = Ref(origin=ref.origin, space=Space.VMEM, shape=s.block_shape, decl=ref.decl)
    elif s.space is Space.ANY:
        # jax 0.10.2 refuses an ANY block ("Unsupported buffer memory space");
        # later versions hand the body the source window itself, wherever it
        # lives. Which one the user runs is not known here: no memory space.
        ref = Ref(origin=ref.origin, space=Space.UNKNOWN, shape=s.block_shape, decl=ref.decl)
    return ref


def run_pipeline(host: LaunchHost, pipe: PipelineCallable, kwargs: dict[str, Arg] | None,
                 frame: Frame) -> Value:
    # Once per kernel: a pipeline seen while its kernel function ran on its
    # own (no kernel) must still run when that function is launched.
    key = (pipe.node_id, frame.kernel_id)
    if key in host.kernels_done:
        return Const(value=None)
    host.kernels_done.add(key)
    launch = new_launch(host, "emit_pipeline", pipe.node, pipe.body, host.file_backend)
    if frame.kernel_id:
        launch.backend = host.kernel_backend.get(frame.kernel_id, host.file_backend)
    scratch = (kwargs or {}).get("scratches")
    tail: list[Value]
    if scratch is None and kwargs is not None:
        tail = []
    elif scratch is not None and isinstance(scratch.value, Seq) and scratch.value.keys is None:
        tail = list(scratch.value.items)
    else:
        tail = [STAR_UNKNOWN]
    blocks = pipe.blocks
    if blocks is None:
        # Specs of unknown number but one kind (`tuple(BlockSpec(...) for s
        # in range(n))`): a `*refs` body still knows what each block is.
        a = pipe.body.node.args
        if pipe.block_elem is UNKNOWN or a.vararg is None or a.posonlyargs or a.args:
            launch.reason = "the pipeline's in_specs / out_specs cannot be counted"
            host.call_func(pipe.body, [], {}, frame, unknown_params=True, kernel=frame.kernel)
            return Const(value=None)
        blocks = (StarUnknown(elem=pipe.block_elem),)
    launch.bound = True
    host.call_func(pipe.body, list(blocks) + tail, {}, frame, kernel=True,
                     call_node=pipe.node)
    return Const(value=None)
