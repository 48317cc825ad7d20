"""Which VMEM scratch buffers of a pallas_call the TPU compiler surely keeps,
from what the interpreter saw the kernel do (engine/events.py).

Measured (deviceless v5e / v6e, libtpu 0.0.42): the compiler drops a scratch
buffer that is never read, or whose every read follows a full write in the
same grid step; it keeps one that a DMA reads or writes, and one whose value
a read may take from an earlier step: read first, or read after writes that
all sit under a `pl.when` not enclosing the read (the accumulator pattern).
On a grid of one step it drops that accumulator too (the condition holds),
so the read proofs need a grid known to have more than one step.

Anything else (a Ref handed to code the engine cannot follow, writes in a
helper outside the kernel's body) proves nothing: the buffer stays a
maybe, which PAL404 does not count.
"""
from __future__ import annotations

import ast

from pallas_lsp.engine.model import Ref

SCRATCH_ROOT = "scratch_shapes["
_READS = ("get", "load")
_WRITES = ("swap", "store")


ANY_REF = "?"


def _other_root(value) -> bool:
    """A Ref of a known allocation that is not scratch (a block, an operand)."""
    return isinstance(value, Ref) and bool(value.root) and value.root != ANY_REF \
        and not value.root.startswith(SCRATCH_ROOT)


def _root(value) -> str:
    root = value.root if isinstance(value, Ref) else ""
    return root if root.startswith(SCRATCH_ROOT) else ""


def _is_when(deco: ast.AST) -> bool:
    """`@pl.when(cond)` with a condition that is not a literal."""
    return (isinstance(deco, ast.Call) and getattr(deco.func, "attr", None) == "when"
            and len(deco.args) == 1 and not isinstance(deco.args[0], ast.Constant))


class _Scopes:
    """id(node) -> the `pl.when` bodies (their defs' ids) around it, lexically,
    for every node of the files the accesses are in (built once per file).
    Lexical, so a helper the engine memoised (ran once for two calls) still
    places its writes right."""

    def __init__(self, module):
        self.module = module
        self.done: set[int] = set()
        self.map: dict[int, frozenset] = {}

    def of(self, node: ast.AST) -> frozenset | None:
        if id(node) not in self.map:
            src = getattr(node, "_pl_src", None)
            tree = src.tree if src is not None else self.module
            if tree is None or id(tree) in self.done:
                return None
            self.done.add(id(tree))
            self._walk(tree, frozenset())
        return self.map.get(id(node))

    def _walk(self, tree: ast.AST, around: frozenset) -> None:
        # A stack, not recursion: a generated file's expressions nest thousands deep.
        stack = [(tree, around)]
        while stack:
            node, around = stack.pop()
            self.map[id(node)] = around
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and any(_is_when(d) for d in node.decorator_list):
                around = around | {id(node)}
            stack.extend((child, around) for child in ast.iter_child_nodes(node))


def kept_scratch(events, launch, steps: int | None) -> dict[str, str]:
    """Root of each scratch Ref the compiler must keep -> why, in words."""
    kid = launch.kernel_id
    if not kid:
        return {}
    kept: dict[str, str] = {}
    for d in events.dmas:
        if d.kernel_id == kid:
            for arg in (d.src, d.dst):
                root = _root(arg.value) if arg is not None else ""
                if root:
                    kept.setdefault(root, "a DMA reads or writes it: kept")
    if kid in events.opaque or kid in events.truncated or -1 in events.truncated \
            or steps is None or steps < 2:
        return kept  # accesses the engine did not see, or one step: the DMA proof only
    scopes = _Scopes(events.module)
    writes: dict[str, list] = {ANY_REF: []}
    for a in events.accesses:
        if a.kernel_id != kid:
            continue
        value = a.ref.value if a.ref is not None else None
        root = _root(value)
        where = scopes.of(a.node)  # None: a node of no file the engine read
        if a.kind in _WRITES and not root and not _other_root(value):
            writes[ANY_REF].append(where)  # a Ref the engine cannot name: any of them
        if not root or root in kept:
            continue
        if a.kind in _WRITES:
            writes.setdefault(root, []).append(where)
        elif a.kind in _READS:
            before = writes.get(root, []) + writes[ANY_REF]
            if not before:
                kept[root] = "read before written in a step: kept"
            elif where is not None and all(w and not (w & where) for w in before):
                kept[root] = "carried across steps (written under pl.when): kept"
    return kept
