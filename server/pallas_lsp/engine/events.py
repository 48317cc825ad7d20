"""What the interpreter saw a kernel do. Rules read these; they never walk
the AST themselves, so every rule sees helpers, aliases, loops and
run_scoped bodies the same way."""
from __future__ import annotations

import ast
from dataclasses import field

from pallas_lsp.engine.model import Value
from pallas_lsp.engine.records import record, replace


@record
class Arg:
    """One argument of an API call: its node (None when absent) and value."""

    node: ast.AST | None
    value: Value
    keyword: str | None = None  # set when passed as keyword

    @property
    def present(self) -> bool:
        return self.node is not None


@record
class DmaCall:
    """A call that builds a copy descriptor (and maybe starts it)."""

    id: int
    api: str  # make_async_copy | async_copy | make_async_remote_copy | async_remote_copy | sync_copy
    node: ast.Call
    src: Arg
    dst: Arg
    sem: Arg  # destination / receive semaphore (None-valued for sync_copy)
    send_sem: Arg | None = None  # remote copies only
    device_id: Arg | None = None  # remote copies only
    priority: Arg | None = None  # async_copy(..., priority=)
    add: Arg | None = None  # async_copy / sync_copy (..., add=)
    ops: list["DescOp"] = field(default_factory=list)
    escaped: bool = False  # handed to code the engine cannot follow
    in_kernel: bool = True
    kernel_id: int = 0  # which kernel analysis created it (0: outside any kernel)
    site: ast.AST | None = None  # the call in the analysed file that led here (another file)

    @property
    def remote(self) -> bool:
        return self.api in ("make_async_remote_copy", "async_remote_copy")

    @property
    def implicit_start(self) -> bool:
        return self.api in ("async_copy", "async_remote_copy", "sync_copy")

    @property
    def started(self) -> bool:
        return self.implicit_start or any(op.op == "start" for op in self.ops)

    @property
    def waited(self) -> bool:
        return self.api == "sync_copy" or any(op.op.startswith("wait") for op in self.ops)


@record
class DescOp:
    """`.start()`, `.wait()`, `.wait_recv()` or `.wait_send()` on a descriptor."""

    op: str
    node: ast.Call
    attr_node: ast.Attribute | None
    priority: Arg | None = None
    add: Arg | None = None


@record
class SemOp:
    """pl.semaphore_signal / semaphore_wait / semaphore_read."""

    api: str
    node: ast.Call
    sem: Arg
    decrement: Arg | None = None
    device_id: Arg | None = None
    kernel_id: int = 0
    site: ast.AST | None = None


@record
class RefAccess:
    """A direct read (`x[...]`, pltpu.load) or write (`x[...] = v`,
    pltpu.store) of a Ref, or a load/store API given a non-Ref."""

    kind: str  # get | swap | load | store
    node: ast.AST  # the subscript, or the API call
    ref: Arg
    value: Arg | None = None  # the stored value, for writes
    kernel_id: int = 0
    site: ast.AST | None = None


@record
class ScopedAlloc:
    """One allocation requested from pl.run_scoped."""

    node: ast.AST
    space: str
    call: ast.Call
    kernel_id: int = 0
    site: ast.AST | None = None


@record
class RollCall:
    """pltpu.roll(x, shift, axis, *, stride=None, stride_axis=None)."""

    node: ast.Call
    x: Arg
    shift: Arg | None
    axis: Arg | None
    stride: Arg | None
    stride_axis: Arg | None
    kernel_id: int = 0
    site: ast.AST | None = None


@record
class KernelOp:
    """A jnp / lax call or an arithmetic operator on Arrays inside a kernel
    (for the TPU-only rules PAL402 / PAL403)."""

    kind: str  # "call" | "binop" | "unary"
    name: str  # canonical API name ("jnp.sort") or the operator's class ("Mult")
    node: ast.AST
    operands: tuple = ()  # Values (the Array arguments, or both operator sides)
    kernel_id: int = 0


@record
class Launch:
    """A kernel launch site: pallas_call, pl.kernel, core_map, emit_pipeline
    (or a run_scoped body), with what the engine knew of its arguments."""

    api: str  # pallas_call | kernel | core_map | emit_pipeline
    node: ast.AST | None  # the call that launches it
    kernel: str  # the kernel function's name ("" when unknown)
    kernel_node: ast.AST | None  # its def / lambda
    bound: bool  # parameters bound and body run
    kernel_id: int = 0
    backend: str = "tpu"  # tpu | gpu | triton
    core: str = ""  # "sparsecore": launched on a SparseCore mesh
    reason: str = ""  # why not bound, in words
    in_specs: Value | None = None
    out_specs: Value | None = None
    out_shape: Value | None = None
    scratch: Value | None = None
    grid: Value | None = None
    compiler_params: Value | None = None
    expects_error: bool = False  # launched inside `assertRaises` / `pytest.raises`
    expected_pattern: str = ""  # the message that block expects ("" any)
    # The operands' shapes and dtypes where the call's arrays are known
    # (values.ShapeDtype or None each; None: the call was not seen), the
    # call's argument nodes, and the test case it ran in ("" none).
    operands: tuple | None = None
    operand_nodes: tuple = ()
    variant: str = ""


@record
class Window:
    """`ref.at[...]` whose index provably leaves the Ref's known shape (one per
    bad dimension; `binding.shapes.window_overflow` says how)."""

    node: ast.Subscript  # the whole `ref.at[...]`
    index: ast.AST  # the offending index component
    text: str  # JAX's message with the values filled in
    kind: str  # "slice" (JAX raises while tracing) | "int" (the read / write fails)
    kernel_id: int = 0
    site: ast.AST | None = None


@record
class Events:
    dmas: list[DmaCall] = field(default_factory=list)
    sem_ops: list[SemOp] = field(default_factory=list)
    accesses: list[RefAccess] = field(default_factory=list)
    scoped: list[ScopedAlloc] = field(default_factory=list)
    rolls: list[RollCall] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    # Kernels the analysis could not follow to the end (call depth, recursion;
    # -1: the step budget ran out, so all of them).
    truncated: set = field(default_factory=set)
    # Kernels that are kernel code run without a launch (standalone.py).
    standalone: set = field(default_factory=set)
    # kernel id -> the def each of those ran (a launch may reach it later).
    standalone_defs: dict = field(default_factory=dict)
    kernel_ops: list[KernelOp] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    # (kernel_id, root) of Refs handed to code the engine cannot follow.
    escaped_roots: set = field(default_factory=set)
    # Kernels that handed a Ref or a function to code the engine cannot follow:
    # their accesses seen are not all there are (rules/_scratch_kept.py).
    opaque: set = field(default_factory=set)
    # The analysed file's tree (other files' nodes carry theirs in `_pl_src`).
    module: object = None
    # id() of `pl.kernel(...)` / `core_map(...)` calls that made a decorator
    # later applied to a kernel (the launch is where it is applied).
    factory_nodes: set = field(default_factory=set)
    # id() of a pallas_call node -> id()s of the pallas_call nodes whose
    # outputs its call was handed (a split-phase pair: `done(x, start(x))`).
    fed_by: dict = field(default_factory=dict)


def code_events(events: Events) -> tuple[list, ...]:
    """The groups of events kernel code makes (each has `kernel_id` and `node`)."""
    return (events.dmas, events.sem_ops, events.accesses, events.scoped, events.rolls,
            events.kernel_ops)


def without_kernels(events: Events, dropped: set[int], keep_free: bool = True) -> Events:
    """The events with the code of the `dropped` kernels left out. Code the
    engine ran on its own (kernel 0, before a launch reached it) goes too when
    a dropped kernel runs it and no kept one does; all of it when not
    `keep_free`. Launches are left as they are."""
    groups = code_events(events)
    kept = {id(e.node) for g in groups for e in g if e.kernel_id and e.kernel_id not in dropped}
    theirs = {id(e.node) for g in groups for e in g if e.kernel_id in dropped} - kept

    def keep(e) -> bool:
        if e.kernel_id:
            return e.kernel_id not in dropped
        return keep_free and id(e.node) not in theirs

    return replace(events, dmas=[e for e in events.dmas if keep(e)],
                   sem_ops=[e for e in events.sem_ops if keep(e)],
                   accesses=[e for e in events.accesses if keep(e)],
                   scoped=[e for e in events.scoped if keep(e)],
                   rolls=[e for e in events.rolls if keep(e)],
                   kernel_ops=[e for e in events.kernel_ops if keep(e)])


def pick(args: list[Arg], kwargs: dict[str, Arg], index: int, keyword: str) -> Arg | None:
    """An API call's argument by keyword or position (None when absent)."""
    if keyword in kwargs:
        return kwargs[keyword]
    if index < len(args):
        return args[index]
    return None
