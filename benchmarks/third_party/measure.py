"""How well does the engine see third-party Pallas TPU kernels?

    python benchmarks/third_party/measure.py [--cache /work/tp_cache] [--lib a,b]
        [--classes at_to_index,sem_drop_at_recv_via_temp] [--limit N] [--jobs 2]

Each folder of ``--cache`` (except those starting with ``_`` or ``.``) is one
library root, unpacked from PyPI with its package layout (see
benchmarks/README.md; the code is never copied into this repository).

For every library it measures
  1. false alarms: ``pallas-lsp check`` on the unmodified tree; every PAL
     diagnostic is listed so that a person can judge it;
  2. recall on injected bugs: one mutant per site found with ``ast`` in the
     files that import Pallas TPU, each a single textual edit (or, for the
     ``*_via_temp`` classes, the edited argument moved to a temporary on the
     line before), checked one at a time in a scratch copy of the library;
     a mutant is caught when a PAL diagnostic appears that the unmodified
     file does not have (same code, same line after undoing the inserted
     line);
  3. the same mutants against a grep-like detector, for comparison;
  4. ``pallas-lsp coverage`` totals, when that command exists.

Results go to ``--out``: summary.md (tables), summary.json, missed.json
(every missed mutant with its original and mutated line) and
false_alarms.json. Nothing here imports the engine: it is run as a
subprocess, like a user would.
"""
from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import dataclasses
import hashlib
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

LOCAL_MAKERS = {"make_async_copy": "local", "async_copy": "local"}
REMOTE_MAKERS = {"make_async_remote_copy": "remote", "async_remote_copy": "remote"}
DMA_FUNCS = {**LOCAL_MAKERS, **REMOTE_MAKERS, "sync_copy": None}
STARTING = {"async_copy", "async_remote_copy"}  # these return a started descriptor
# Positional order of each DMA function's arguments (jax 0.10.2).
DMA_PARAMS = {
    "make_async_copy": ("src_ref", "dst_ref", "sem"),
    "async_copy": ("src_ref", "dst_ref", "sem"),
    "make_async_remote_copy": ("src_ref", "dst_ref", "send_sem", "recv_sem", "device_id",
                               "device_id_type"),
    "async_remote_copy": ("src_ref", "dst_ref", "send_sem", "recv_sem", "device_id",
                          "device_id_type"),
    "sync_copy": ("src_ref", "dst_ref"),
}
TPU_MODULES = ("jax.experimental.pallas.tpu", "jax._src.pallas.mosaic")

BASE_CLASSES = ("at_to_index", "ref_to_read", "sem_drop_at_recv", "sem_drop_at_send",
                "device_id_none", "wait_send_local", "priority_neg")
ALL_CLASSES = tuple(c for base in BASE_CLASSES for c in (base, base + "_via_temp"))


# ---------------------------------------------------------------- source edits

@dataclasses.dataclass
class Mutant:
    lib: str
    file: str                 # relative to the library root
    cls: str
    line: int                 # 1-based line of the edited expression (original file)
    original: str             # that line, unmodified
    mutated: str              # the edited line(s) as they read in the mutant
    edits: list               # [(start_byte, end_byte, replacement_text)]
    inserted_line: int = 0    # via_temp: 1-based line of the temporary in the mutant
    note: str = ""            # e.g. "chained .at" for semaphores
    site_line: int = 0        # line of the DMA call it belongs to (as coverage reports it)
    use: str = ""             # how that call's descriptor is used: start / wait / other


class Source:
    """A file's text with byte offsets for AST positions (col_offset is UTF-8 bytes)."""

    def __init__(self, text: str):
        self.text = text
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)
        self.lines = text.splitlines()

    def off(self, lineno: int, col: int) -> int:
        return self.line_starts[lineno - 1] + col

    def start(self, node) -> int:
        return self.off(node.lineno, node.col_offset)

    def end(self, node) -> int:
        return self.off(node.end_lineno, node.end_col_offset)

    def segment(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8")

    def node_text(self, node) -> str:
        return self.segment(self.start(node), self.end(node))

    def apply(self, edits) -> str:
        data = self.data
        for a, b, rep in sorted(edits, key=lambda e: e[0], reverse=True):
            data = data[:a] + rep.encode("utf-8") + data[b:]
        return data.decode("utf-8")

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1


# ---------------------------------------------------------------- documentation pages

PAGE_SUFFIXES = (".md", ".rst")
_PY_WORDS = {"python", "py", "python3", "py3", "ipython", "ipython3"}
_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*(.*?)[ \t]*$")
_RST_CODE = re.compile(r"^([ \t]*)\.\.[ \t]+(code-block|code|sourcecode|testcode|testsetup|"
                       r"jupyter-execute)::[ \t]*(\S*)")


def _fence_is_python(info: str) -> tuple[bool, bool]:
    """(a Python fence, MyST options may lead it)."""
    m = re.match(r"^\{(code-cell|code-block|code|sourcecode|testcode|testsetup|"
                 r"jupyter-execute)\}[ \t]*(\S*)", info)
    if m:
        return (not m.group(2) or m.group(2).lower() in _PY_WORDS), True
    word = info.split(maxsplit=1)[0].lower() if info else ""
    return word in _PY_WORDS, False


def _page_blocks(lines: list[str], rst: bool) -> list[tuple[list[int], int]]:
    """Python code blocks of a page: ([row of each line], indent to strip)."""
    blocks = []
    if rst:
        i = 0
        while i < len(lines):
            m = _RST_CODE.match(lines[i])
            if not m or (m.group(2) in ("code-block", "code", "sourcecode")
                         and m.group(3).lower() not in _PY_WORDS):
                i += 1
                continue
            base = len(m.group(1))
            n = i + 1
            while n < len(lines) and lines[n].strip().startswith(":"):
                n += 1
            while n < len(lines) and not lines[n].strip():
                n += 1
            indent = len(lines[n]) - len(lines[n].lstrip()) if n < len(lines) else 0
            end = last = n
            while end < len(lines) and indent > base:
                t = lines[end]
                if t.strip():
                    if len(t) - len(t.lstrip()) < indent:
                        break
                    last = end
                end += 1
            if indent > base and last >= n:
                blocks.append((list(range(n, last + 1)), indent))
            i = max(end, i + 1)
        return blocks
    only_cells = any((m := _FENCE.match(t)) and m.group(3).startswith("{code-cell}")
                     for t in lines)
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(2), m.group(3)
        end = i + 1
        while end < len(lines):
            c = _FENCE.match(lines[end])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) \
                    and not c.group(3):
                break
            end += 1
        is_py, myst = _fence_is_python(info)
        if only_cells and not info.startswith("{code-cell}"):
            is_py = False
        if is_py:
            rows = list(range(i + 1, end))
            if myst and rows and lines[rows[0]].strip() == "---":  # a YAML options block
                close = next((k for k, r in enumerate(rows[1:], 1)
                              if lines[r].strip() == "---"), None)
                rows = rows[close + 1:] if close is not None else rows
            while myst and rows and re.match(r"^[ \t]*:[\w-]+:", lines[rows[0]]):
                rows = rows[1:]
            blocks.append((rows, len(m.group(1))))
        i = end + 1
    return blocks


class Page:
    """A documentation page's Python blocks as one program with the page's
    line numbers: every other line is blank, each block's indentation is
    stripped, IPython magics are blanked, and a block that does not parse is
    left out (the engine contains it the same way). Edits found in the
    program are moved back into the page's text."""

    def __init__(self, text: str, rst: bool):
        self.page = Source(text)
        lines = text.split("\n")
        out = [""] * len(lines)
        self.indent = [0] * len(lines)
        for rows, indent in _page_blocks(lines, rst):
            body = []
            for r in rows:
                t = lines[r]
                cut = min(indent, len(t) - len(t.lstrip(" ")))
                body.append((r, cut, "" if re.match(r"^[ \t]*[%!]", t[cut:]) else t[cut:]))
            try:
                ast.parse("\n".join(b[2] for b in body))
            except SyntaxError:
                continue
            for r, cut, t in body:
                out[r], self.indent[r] = t, cut
        self.program = "\n".join(out)

    def to_page(self, prog: Source, edits) -> list:
        """Edits at program byte offsets -> the same edits in the page."""
        moved = []
        for a, b, rep in edits:
            la, lb = prog.line_of(a), prog.line_of(b)
            pa = self.page.line_starts[la - 1] + self.indent[la - 1] + a - prog.line_starts[la - 1]
            pb = self.page.line_starts[lb - 1] + self.indent[lb - 1] + b - prog.line_starts[lb - 1]
            if rep.endswith("\n"):  # a whole line inserted before line la (via_temp)
                rep = rep.replace("\n", "\n" + " " * self.indent[la - 1])
            moved.append((pa, pb, rep))
        return moved


def source_files(root: Path) -> list[Path]:
    """What is measured in a library: its .py files and its documentation pages."""
    return sorted(p for p in root.rglob("*") if p.suffix in (".py",) + PAGE_SUFFIXES
                  and p.is_file())


def tpu_aliases(nodes: list) -> tuple[dict[str, str], bool]:
    """Names bound to Pallas TPU modules or functions -> dotted target; and
    whether the file imports Pallas TPU at all (a "kernel file")."""
    aliases: dict[str, str] = {}
    kernel = False
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(TPU_MODULES):
                    kernel = True
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full.startswith(TPU_MODULES) or node.module.startswith(TPU_MODULES):
                    kernel = True
                aliases[a.asname or a.name] = full
    return aliases, kernel


def dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def dma_name(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """'make_async_copy' etc. when `call` is a Pallas TPU DMA call."""
    name = dotted(call.func)
    if not name:
        return None
    head, _, rest = name.partition(".")
    full = aliases.get(head, head) + ("." + rest if rest else "")
    last = full.rsplit(".", 1)[-1]
    if last in DMA_FUNCS and full.startswith(TPU_MODULES):
        return last
    return None


def call_args(call: ast.Call, params) -> dict[str, ast.expr]:
    out = {}
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            break
        if i < len(params):
            out[params[i]] = a
    for kw in call.keywords:
        if kw.arg in params:
            out[kw.arg] = kw.value
    return out


def is_at_subscript(node) -> bool:
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "at")


class Finder:
    """Mutation sites of one parsed kernel file."""

    def __init__(self, lib: str, rel: str, src: Source, tree: ast.Module, nodes: list,
                 aliases: dict[str, str]):
        self.lib, self.rel, self.src, self.tree, self.aliases = lib, rel, src, tree, aliases
        self.mutants: list[Mutant] = []
        self.skipped = collections.Counter()  # via_temp not applicable, per class
        self.excluded = collections.Counter()  # sites whose edit is no bug, per class
        self.nodes = nodes
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        used = {n.id for n in nodes if isinstance(n, ast.Name)}
        self.tmp = "tmp_pl"
        k = 0
        while self.tmp in used:
            k += 1
            self.tmp = f"tmp_pl_{k}"
        self._own, self._binds = {}, {}
        self.desc_funcs = self._descriptor_functions()

    # ---- descriptors made by helpers of this file

    def _kind(self, expr, env: dict[str, str | None]) -> str | None:
        if isinstance(expr, ast.Call):
            name = dma_name(expr, self.aliases)
            if name:
                return DMA_FUNCS[name]
            if isinstance(expr.func, ast.Name):
                return self.desc_funcs.get(expr.func.id)
        if isinstance(expr, ast.Name):
            return env.get(expr.id)
        return None

    def _descriptor_functions(self) -> dict[str, str | None]:
        """Functions of this file (any nesting) that return a descriptor."""
        self.desc_funcs = {}
        funcs = [n for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        funcs = [f for f in funcs if any(isinstance(n, ast.Return) and n.value is not None
                                         for n in self._bindings(f))]
        for _ in range(3):  # helpers returning helpers
            found: dict[str, set] = collections.defaultdict(set)
            for f in funcs:
                env = self._assigned_kinds(f)
                for node in self._bindings(f):
                    if isinstance(node, ast.Return) and node.value is not None:
                        found[f.name].add(self._kind(node.value, env))
            new = {name: kinds.pop() for name, kinds in found.items()
                   if len(kinds) == 1 and None not in kinds}
            if new == self.desc_funcs:
                break
            self.desc_funcs = new
        return self.desc_funcs

    def _own_nodes(self, func) -> list:
        """Nodes of a function's body, not descending into nested functions."""
        got = self._own.get(func)
        if got is None:
            got = []
            todo = list(func.body)
            while todo:
                node = todo.pop()
                got.append(node)
                for child in ast.iter_child_nodes(node):
                    if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                              ast.ClassDef)):
                        todo.append(child)
            self._own[func] = got
        return got

    def _bindings(self, func) -> list:
        """The nodes of `func` that bind names or return."""
        got = self._binds.get(func)
        if got is None:
            got = [n for n in self._own_nodes(func)
                   if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                     ast.comprehension, ast.NamedExpr, ast.Return))]
            self._binds[func] = got
        return got

    def _assigned_kinds(self, func) -> dict[str, str | None]:
        """Names assigned in `func` only from descriptors of one kind."""
        kinds: dict[str, set] = collections.defaultdict(set)
        for node in self._bindings(func):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        kinds[t.id].add(self._kind(node.value, {}))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                kinds[node.target.id].add(
                    self._kind(node.value, {}) if node.value is not None else None)
            elif isinstance(node, (ast.For, ast.comprehension)):
                for t in ast.walk(node.target):
                    if isinstance(t, ast.Name):
                        kinds[t.id].add(None)
            elif isinstance(node, ast.NamedExpr):
                kinds[node.target.id].add(self._kind(node.value, {}))
        return {n: k.pop() for n, k in kinds.items() if len(k) == 1 and None not in k}

    # ---- helpers for edits

    def _stmt_of(self, node):
        """The innermost statement containing `node`, or None when a temporary
        before it would not see the same names (lambda, comprehension)."""
        cur = node
        while cur is not None and not isinstance(cur, ast.stmt):
            if isinstance(cur, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                ast.GeneratorExp)):
                return None
            cur = self.parents.get(cur)
        return cur

    def _add(self, cls: str, node, edits, note: str = ""):
        """Record the plain mutant, and its via_temp twin when `node` (the edited
        expression) can move to a temporary."""
        line = node.lineno
        # Not bugs, so not mutants: code after a `return` / `raise` / `break` /
        # `continue` of its block (JAX never traces it), and dropping an
        # `.at[...]` of `...` alone (the same semaphore either way).
        if self._unreachable(node):
            self.excluded[cls + " (unreachable code)"] += 1
            return
        if cls.startswith("sem_drop") and _ellipsis_only(node):
            self.excluded[cls + " (.at[...] dropped: the same Ref)"] += 1
            return
        site, use = self._site(node)
        if cls.startswith("sem_drop_at_send") and use == "wait" and self._recv_waits_only(node):
            # `wait_recv()` hands jax's dma_wait the receive semaphore alone:
            # the send semaphore is neither checked nor lowered (jax 0.10.2,
            # primitives.wait_recv, lowering._dma_wait_lowering_rule).
            self.excluded[cls + " (descriptor only wait_recv()ed)"] += 1
            return
        if cls in ("priority_neg", "wait_send_local"):
            use = "start" if cls == "priority_neg" else "wait"
        new_text = self.src.apply(edits)
        shift_lines = new_text.count("\n") - self.src.text.count("\n")
        mutated_lines = new_text.splitlines()[line - 1: node.end_lineno + shift_lines]
        self.mutants.append(Mutant(self.lib, self.rel, cls, line, self.src.lines[line - 1],
                                   "\n".join(mutated_lines), edits, note=note, site_line=site,
                                   use=use))
        via = self._via_temp(node, edits)
        if via is None:
            self.skipped[cls + "_via_temp"] += 1
            return
        edits2, ins_line, shown = via
        self.mutants.append(Mutant(self.lib, self.rel, cls + "_via_temp", line,
                                   self.src.lines[line - 1], shown, edits2,
                                   inserted_line=ins_line, note=note, site_line=site,
                                   use=use))

    def _unreachable(self, node) -> bool:
        """After an exit of its block, or inside a def that is (never defined)."""
        cur = node.anchor if isinstance(node, _Inserted) else node
        while cur is not None and not isinstance(cur, ast.Module):
            up = self.parents.get(cur)
            if isinstance(cur, ast.stmt) and up is not None:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    block = getattr(up, field, None)
                    if isinstance(block, list) and cur in block:
                        if any(isinstance(b, (ast.Return, ast.Raise, ast.Break, ast.Continue))
                               for b in block[:block.index(cur)]):
                            return True
            cur = up
        return False

    def _site(self, node) -> tuple[int, str]:
        """The line of the DMA call around `node`, and how its descriptor is used."""
        cur = node.anchor if isinstance(node, _Inserted) else node
        while cur is not None:
            if isinstance(cur, ast.Call):
                name = dma_name(cur, self.aliases)
                if name:
                    return cur.lineno, self._use_of(cur, name)
            cur = self.parents.get(cur)
        return node.lineno, "other"

    _USES = {"start": "start", "wait": "wait", "wait_recv": "wait", "wait_send": "wait"}

    def _recv_waits_only(self, node) -> bool:
        """Is the descriptor around `node` only ever `.wait_recv()`ed?"""
        cur = node.anchor if isinstance(node, _Inserted) else node
        while cur is not None and not (isinstance(cur, ast.Call)
                                       and dma_name(cur, self.aliases)):
            cur = self.parents.get(cur)
        if cur is None:
            return False
        # any method but wait_recv counts as "other"
        return self._use_of(cur, dma_name(cur, self.aliases), uses={"wait_recv": "wait"}) == "wait"

    def _use_of(self, call: ast.Call, name: str | None, depth: int = 0,
                uses: dict | None = None) -> str:
        """'start' when the descriptor made by `call` is started (JAX checks the
        arguments there), 'wait' when it is only waited on (JAX's wait checks
        little: only that the semaphore is a DMA semaphore Ref), else 'other'
        (handed on, stored: the harness cannot tell)."""
        uses = self._USES if uses is None else uses
        if name in STARTING or name == "sync_copy":
            return "start"
        parent = self.parents.get(call)
        if isinstance(parent, ast.Attribute) and parent.value is call:
            return uses.get(parent.attr, "other")
        func = parent
        while func is not None and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.Lambda, ast.Module)):
            func = self.parents.get(func)
        if (isinstance(parent, ast.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name) and func is not None
                and not isinstance(func, (ast.Lambda, ast.Module))):
            var = parent.targets[0].id
            methods, escapes = set(), False
            for node, shadow in self._nodes_with_shadow(func):
                if not (isinstance(node, ast.Name) and node.id == var and var not in shadow
                        and isinstance(node.ctx, ast.Load)):
                    continue
                up = self.parents.get(node)
                if isinstance(up, ast.Attribute) and isinstance(self.parents.get(up), ast.Call):
                    methods.add(uses.get(up.attr, "other"))
                else:
                    escapes = True
            if "start" in methods:
                return "start"
            return "wait" if methods == {"wait"} and not escapes else "other"
        if isinstance(parent, ast.Return) and isinstance(func, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef)):
            if depth > 2:
                return "other"
            found = {self._use_of(c, None, depth + 1, uses) for c in self.nodes
                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                     and c.func.id == func.name}
            if "start" in found:
                return "start"
            return "wait" if found == {"wait"} else "other"
        return "other"

    def _via_temp(self, node, edits):
        """(edits, line of the temporary, mutated lines) or None."""
        stmt = self._stmt_of(node.anchor if isinstance(node, _Inserted) else node)
        if stmt is None or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                             ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
                                             ast.AsyncWith, ast.Try, ast.Match)):
            return None
        first = self.src.lines[stmt.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        if len(indent.encode("utf-8")) != stmt.col_offset:
            return None  # the statement does not begin its line (`if c: copy(...)`)
        if isinstance(node, _Inserted):  # `, priority=-1` -> `, priority=tmp`
            at = edits[0][0]
            expr, use = "-1", [(at, at, node.text.replace("-1", self.tmp))]
        else:
            a, b = self.src.start(node), self.src.end(node)
            inner = [(x - a, y - a, r) for x, y, r in edits if a <= x and y <= b]
            outer = [(x, y, r) for x, y, r in edits if not (a <= x and y <= b)]
            if any(x < b and a < y for x, y, _ in outer):
                return None  # an edit straddles the expression
            # edits inside the expression move to the temporary, the others stay
            expr = Source(self.src.segment(a, b)).apply(inner)
            use = [(a, b, self.tmp)] + outer
        if "\n" in expr:
            expr = f"({expr})"
        line_start = self.src.off(stmt.lineno, 0)
        temp_line = f"{indent}{self.tmp} = {expr}\n"
        after = self.src.apply(use).splitlines()
        shown = temp_line + "\n".join(after[node.lineno - 1: node.end_lineno])
        return [(line_start, line_start, temp_line)] + use, stmt.lineno, shown

    # ---- the sites

    def run(self):
        for node in self.nodes:
            if isinstance(node, ast.Call):
                name = dma_name(node, self.aliases)
                if name:
                    self._dma_call(node, name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._descriptor_uses(node)
        self._chained_uses()
        return self.mutants

    def _dma_call(self, call: ast.Call, name: str):
        args = call_args(call, DMA_PARAMS[name])
        for role in ("src_ref", "dst_ref"):
            arg = args.get(role)
            if arg is None:
                continue
            if is_at_subscript(arg):
                at = arg.value  # the `x.at` Attribute
                self._add("at_to_index", arg,
                          [(self.src.end(at.value), self.src.end(at), "")])
            elif isinstance(arg, (ast.Name, ast.Attribute)) and not (
                    isinstance(arg, ast.Attribute) and arg.attr == "at"):
                end = self.src.end(arg)
                self._add("ref_to_read", arg, [(end, end, "[...]")])
        for role, cls in (("sem", "sem_drop_at_recv"), ("recv_sem", "sem_drop_at_recv"),
                          ("send_sem", "sem_drop_at_send")):
            arg = args.get(role)
            if arg is not None and is_at_subscript(arg):
                base = arg.value.value
                note = "chained .at" if is_at_subscript(base) else ""
                self._add(cls, arg, [(self.src.end(base), self.src.end(arg), "")], note)
        if name in REMOTE_MAKERS:
            arg = args.get("device_id")
            if arg is not None and not (isinstance(arg, ast.Constant) and arg.value is None):
                self._add("device_id_none", arg,
                          [(self.src.start(arg), self.src.end(arg), "None")])
        if name == "async_copy":
            self._priority(call, positional_index=None)

    def _priority(self, call: ast.Call, positional_index):
        """priority=-1 in `call` (replace the value if given, else add it)."""
        for kw in call.keywords:
            if kw.arg == "priority":
                self._add("priority_neg", kw.value,
                          [(self.src.start(kw.value), self.src.end(kw.value), "-1")])
                return
        if positional_index is not None and len(call.args) > positional_index:
            arg = call.args[positional_index]
            self._add("priority_neg", arg, [(self.src.start(arg), self.src.end(arg), "-1")])
            return
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                kw.arg is None for kw in call.keywords):
            return  # *args / **kwargs may already carry a priority
        end = self.src.end(call)
        if self.src.data[end - 1:end] != b")":
            return
        items = list(call.args) + [kw.value for kw in call.keywords]
        if items:
            last = max(items, key=lambda n: (n.end_lineno, n.end_col_offset))
            at = self.src.end(last)
            text = ", priority=-1"
        else:
            at = end - 1
            text = "priority=-1"
        fake = ast.Constant(-1)  # a position inside `call`, for _stmt_of
        fake.lineno = fake.end_lineno = self.src.line_of(at)
        fake.col_offset = fake.end_col_offset = at - self.src.line_starts[fake.lineno - 1]
        self.parents[fake] = call
        self._add("priority_neg", _Inserted(fake, text), [(at, at, text)])

    def _descriptor_uses(self, func):
        """`d.start(...)` (priority) and `d.wait()` on a local descriptor `d`
        assigned in `func` (also inside its nested functions, unless rebound)."""
        env = self._assigned_kinds(func)
        if not env:
            return
        for call, shadow in self._calls_with_shadow(func):
            f = call.func
            if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
                continue
            var = f.value.id
            if var in shadow or var not in env:
                continue
            self._descriptor_method(call, env[var])

    def _chained_uses(self):
        """`pltpu.make_async_copy(...).start()` / `helper(...).wait()`."""
        for call in self.nodes:
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Call)):
                kind = self._kind(call.func.value, {})
                if kind:
                    self._descriptor_method(call, kind)

    def _descriptor_method(self, call: ast.Call, kind: str):
        f = call.func
        if f.attr == "start":
            self._priority(call, positional_index=0)
        elif f.attr == "wait" and kind == "local" and not call.args and not call.keywords:
            end = self.src.end(f)
            self._add("wait_send_local", f.value, [(end - len("wait"), end, "wait_send")],
                      )

    def _calls_with_shadow(self, func):
        for node, shadow in self._nodes_with_shadow(func):
            if isinstance(node, ast.Call):
                yield node, shadow

    def _nodes_with_shadow(self, func):
        """Nodes of `func` (and of its nested functions) with the names that a
        nested function rebinds."""
        def bound(fn):
            names = set()
            a = fn.args
            for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if p is not None:
                    names.add(p.arg)
            if not isinstance(fn, ast.Lambda):
                for n in self._own_nodes(fn):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        names.add(n.id)
            return names

        todo = [(stmt, frozenset()) for stmt in func.body]
        while todo:
            node, shadow = todo.pop()
            yield node, shadow
            inner = shadow
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = shadow | bound(node)
            for child in ast.iter_child_nodes(node):
                todo.append((child, inner))



def _ellipsis_only(node) -> bool:
    """`x.at[...]` (the edited semaphore argument): its index is `...` alone."""
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
        and node.slice.value is Ellipsis


class _Inserted:
    """Where `priority=-1` is inserted into a call that had no priority: the
    `-1` is the edited expression (via_temp moves it to the temporary)."""

    def __init__(self, anchor, text):
        self.anchor, self.text = anchor, text
        self.lineno = self.end_lineno = anchor.lineno
        self.col_offset = self.end_col_offset = anchor.col_offset


# ---------------------------------------------------------------- libraries

@dataclasses.dataclass
class Library:
    name: str
    root: Path
    files: list = dataclasses.field(default_factory=list)        # every .py / page (relative)
    pages: list = dataclasses.field(default_factory=list)        # .md / .rst pages with Pallas
    kernel_files: list = dataclasses.field(default_factory=list)
    unparsable: list = dataclasses.field(default_factory=list)    # kernel-looking, not parsable here
    mutants: list = dataclasses.field(default_factory=list)
    not_via_temp: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    excluded: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    chained_sem: int = 0


def scan(lib: Library) -> None:
    for path in source_files(lib.root):
        rel = path.relative_to(lib.root).as_posix()
        lib.files.append(rel)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "pallas" not in text:
            continue
        page = Page(text, path.suffix == ".rst") if path.suffix in PAGE_SUFFIXES else None
        if page is not None:
            lib.pages.append(rel)
            text = page.program
        try:
            tree = ast.parse(text)
        except SyntaxError:
            if re.search(r"pallas(\.| import )tpu|pltpu", text):
                lib.unparsable.append(rel)
            continue
        nodes = list(ast.walk(tree))
        aliases, kernel = tpu_aliases(nodes)
        if not kernel:
            continue
        lib.kernel_files.append(rel)
        finder = Finder(lib.name, rel, Source(text), tree, nodes, aliases)
        found = finder.run()
        # The same edit can be reached twice (a descriptor both named and chained).
        seen = set()
        for m in found:
            if page is not None:
                m.edits = page.to_page(finder.src, m.edits)
            key = (m.cls, tuple(map(tuple, m.edits)))
            if key not in seen:
                seen.add(key)
                lib.mutants.append(m)
        lib.not_via_temp.update(finder.skipped)
        lib.excluded.update(finder.excluded)
    lib.chained_sem = sum(1 for m in lib.mutants if m.note == "chained .at"
                          and not m.cls.endswith("_via_temp"))


def discover(cache: Path, only: list[str] | None) -> list[Library]:
    libs = []
    for d in sorted(cache.iterdir()):
        if not d.is_dir() or d.name.startswith(("_", ".")):
            continue
        if only and d.name not in only:
            continue
        libs.append(Library(d.name, d))
    if only:
        missing = set(only) - {lib.name for lib in libs}
        if missing:
            sys.exit(f"no such library under {cache}: {', '.join(sorted(missing))}")
    return libs


# ---------------------------------------------------------------- running the checker

_CRASH = re.compile(r"pallas-lsp engine failed on (\S+)")


def page_targets(root: Path) -> list[str]:
    """The CLI reads .md / .rst pages only when they are named."""
    return [p.relative_to(root).as_posix() for p in source_files(root)
            if p.suffix in PAGE_SUFFIXES]


def run_check(exe: Engine, target, cwd: Path, timeout: float):
    """(diagnostics, files the engine crashed on) or (a string saying what went
    wrong, []). `target`: a path or a list of them."""
    targets = [target] if isinstance(target, str) else list(target)
    try:
        proc = exe.run(["check", "--no-config", "--output-format", "json", *targets], cwd,
                       timeout)
    except subprocess.TimeoutExpired:
        return "timeout", []
    crashed = sorted({os.path.relpath(m, cwd) if os.path.isabs(m) else m
                      for m in _CRASH.findall(proc.stderr)})
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}", crashed
    try:
        return json.loads(proc.stdout or "[]"), crashed
    except json.JSONDecodeError:
        return f"bad json: {proc.stdout[:200]}", crashed


def mutant_key(m: Mutant, tree: str) -> str:
    h = hashlib.sha256(json.dumps([m.lib, m.file, m.edits, m.inserted_line, tree]).encode())
    return h.hexdigest()[:24]


def map_line(line: int, inserted: int) -> int:
    """A line of the mutant -> the same line of the original. The temporary
    counts as the first line of the statement it was taken out of."""
    if not inserted or line <= inserted:
        return line
    return line - 1


@dataclasses.dataclass
class Engine:
    """How pallas-lsp is run: a command line, and PYTHONPATH for a snapshot."""

    cmd: list
    pythonpath: str = ""
    fingerprint: str = ""

    def run(self, args, cwd, timeout):
        env = dict(os.environ)
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return subprocess.run(self.cmd + list(args), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, env=env)


def _digest_dir(base: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(base.rglob("*.py")) + sorted(base.rglob("*.toml")):
        if "__pycache__" not in p.parts:
            h.update(p.relative_to(base).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def snapshot_engine(work: Path) -> Engine:
    """A frozen copy of the installed pallas_lsp package (and its catalog), so
    that a run measures one engine even while someone edits the checkout."""
    spec = importlib.util.find_spec("pallas_lsp")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pallas_lsp is not importable from this Python")
    base = Path(list(spec.submodule_search_locations)[0])
    catalog = importlib.util.find_spec("pallas_lsp.catalog_data")
    staging = work / "engine" / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(base, staging / "pallas_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    if catalog and catalog.submodule_search_locations:
        cat_dir = Path(list(catalog.submodule_search_locations)[0])
        if base not in cat_dir.parents:
            shutil.copytree(cat_dir, staging / "pallas_lsp" / "catalog_data",
                            ignore=shutil.ignore_patterns("__pycache__"))
    fingerprint = _digest_dir(staging / "pallas_lsp")
    final = work / "engine" / fingerprint
    if final.exists():
        shutil.rmtree(staging)
    else:
        staging.rename(final)
    return Engine([sys.executable, "-m", "pallas_lsp"], str(final), fingerprint)


def engine_at_rev(work: Path, rev: str) -> Engine:
    """The engine as committed at `rev` of this repository (git archive: the
    working tree is not touched)."""
    repo = Path(__file__).resolve().parents[2]
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    final = work / "engine" / f"rev-{sha[:12]}"
    if not (final / "pallas_lsp").is_dir():
        staging = final.with_name(final.name + ".part")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", sha, "server/pallas_lsp",
                                  "catalog"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(staging)], input=archive, check=True)
        (staging / "server" / "pallas_lsp").rename(staging / "pallas_lsp")
        (staging / "catalog").rename(staging / "pallas_lsp" / "catalog_data")
        staging.rename(final)
    # Named by content: revisions that do not touch the engine share their caches.
    return Engine([sys.executable, "-m", "pallas_lsp"], str(final),
                  _digest_dir(final / "pallas_lsp"))


def live_engine(exe: str) -> Engine:
    spec = importlib.util.find_spec("pallas_lsp")
    fingerprint = "live"
    if spec and spec.submodule_search_locations:
        fingerprint = "live-" + _digest_dir(Path(list(spec.submodule_search_locations)[0]))
    return Engine([exe], "", fingerprint)


def tree_digest(root: Path) -> str:
    """Findings in one file depend on the others (callers, helpers)."""
    h = hashlib.sha256()
    for p in source_files(root):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _scratch(work: Path, lib: str, root: Path) -> Path:
    """This worker's private copy of a library's .py files."""
    dest = work / lib / f"w{os.getpid()}"
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".part")
        shutil.rmtree(tmp, ignore_errors=True)
        for path in source_files(root):
            out = tmp / path.relative_to(root)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
        tmp.rename(dest)
    return dest


def tree_task(exe, root, timeout):
    """The whole unmodified tree, as a user would check it."""
    t = time.perf_counter()
    diags, crashed = run_check(exe, [".", *page_targets(Path(root))], Path(root), timeout)
    return diags, crashed, time.perf_counter() - t


def file_task(exe, work, lib, root, rel, mutants, baseline, timeout):
    """The baseline of one file (unless given), then each of its mutants, in
    this worker's copy of the library; the file is restored afterwards."""
    scratch = _scratch(Path(work), lib, Path(root))
    path = scratch / rel
    original = path.read_text(encoding="utf-8")
    src = Source(original)
    if baseline is None:
        t = time.perf_counter()
        diags, crashed = run_check(exe, rel, scratch, timeout)
        baseline = {"diags": diags, "crashed": rel in crashed,
                    "seconds": time.perf_counter() - t}
    if isinstance(baseline["diags"], str):
        return baseline, [{"status": "baseline " + baseline["diags"]} for _ in mutants]
    before = {(d["code"], d["line"]) for d in baseline["diags"] if d["code"].startswith("PAL")}
    results = []
    try:
        for m in mutants:
            path.write_text(src.apply(m["edits"]), encoding="utf-8")
            t = time.perf_counter()
            diags, crashed = run_check(exe, rel, scratch, timeout)
            took = time.perf_counter() - t
            if isinstance(diags, str):
                results.append({"status": diags, "seconds": took})
                continue
            new = []
            for d in diags:
                if not d["code"].startswith("PAL"):
                    continue
                if (d["code"], map_line(d["line"], m["inserted_line"])) not in before:
                    new.append({"code": d["code"], "line": d["line"], "message": d["message"]})
            internal = any(d["code"] == "E001" for d in diags) or rel in crashed
            results.append({"status": "caught" if new else "missed", "new": new,
                            "seconds": took, "engine_error": internal})
    finally:
        path.write_text(original, encoding="utf-8")
    return baseline, results


# ---------------------------------------------------------------- grep-like baseline

_DMA_CALL = re.compile(r"\b(make_async_copy|async_copy|make_async_remote_copy|async_remote_copy"
                       r"|sync_copy)\s*\(")
_READ = re.compile(r"(?<![\w.\]])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\[")
_SEM = re.compile(r"(?<![\w.])(\w*sem\w*)\s*(?=[,)])", re.I)
_NONE_ARG = re.compile(r"device_id\s*=\s*None|,\s*None\s*[,)]")
_PRIORITY = re.compile(r"priority\s*=\s*-|\.start\(\s*-")


def regex_hits(text: str) -> set:
    """What a careful grep flags: inside a DMA call, a subscripted name that is
    not `.at[`, a sem-named argument with no index, `None` in a remote copy;
    anywhere, a negative priority, and `.wait_send(` in a file with no remote
    copy. Returns {(line, what)}."""
    hits = set()
    lines_at = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            lines_at.append(i + 1)

    def line_of(pos):
        lo, hi = 0, len(lines_at) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if lines_at[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    for m in _DMA_CALL.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        window_start = m.end()
        window = text[window_start:i]
        for r in _READ.finditer(window):
            if not r.group(1).endswith(".at") and r.group(1) != "at":
                hits.add((line_of(window_start + r.start()), "read " + r.group(1)))
        for s in _SEM.finditer(window):
            hits.add((line_of(window_start + s.start()), "sem " + s.group(1)))
        if "remote" in m.group(1):
            for n in _NONE_ARG.finditer(window):
                hits.add((line_of(window_start + n.start()), "none"))
    for p in _PRIORITY.finditer(text):
        hits.add((line_of(p.start()), "priority"))
    if "remote_copy" not in text:
        for w in re.finditer(r"\.wait_send\(", text):
            hits.add((line_of(w.start()), "wait_send"))
    return hits


def regex_caught(original_hits: set, mutated_text: str, inserted: int) -> bool:
    for line, what in regex_hits(mutated_text):
        if (map_line(line, inserted), what) not in original_hits:
            return True
    return False


# ---------------------------------------------------------------- coverage (optional)

def coverage_available(exe: Engine) -> bool:
    try:
        return exe.run(["coverage", "--help"], Path.cwd(), 60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def coverage_task(exe: Engine, root: str, timeout: float):
    """(totals, the raw report)."""
    try:
        proc = exe.run(["coverage", "--output-format", "json", ".", *page_targets(Path(root))],
                       Path(root), timeout)
        data = json.loads(proc.stdout)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}, None
    except (OSError, json.JSONDecodeError) as exc:
        return {"error": str(exc)[:200]}, None
    return coverage_totals(data), data


def coverage_sites(data) -> dict:
    """{(path, line): site} from a coverage report that lists sites per file."""
    out = {}
    files = data.get("files") if isinstance(data, dict) else None
    for entry in files or []:
        if isinstance(entry, dict):
            for site in entry.get("sites") or []:
                if isinstance(site, dict) and "line" in site:
                    out.setdefault((entry.get("path"), site["line"]), site)
    return out


def coverage_totals(data):
    if isinstance(data, dict):
        summary = _numbers(data)
        for key in ("totals", "total", "summary", "overall"):
            if isinstance(data.get(key), dict):
                summary = _numbers(data[key])
                break
        why = data.get("unknown_because")
        if isinstance(why, dict) and why:  # what stops the rest, most common first
            summary["unknown_because"] = dict(sorted(why.items(), key=lambda kv: -kv[1])[:6])
        return summary
    if isinstance(data, list):  # one entry per file: add the numbers up
        total = collections.Counter()
        for entry in data:
            if isinstance(entry, dict):
                total.update(_numbers(entry.get("totals", entry)))
        return dict(total)
    return {"error": "unrecognised coverage output"}


def _numbers(d: dict) -> dict:
    return {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


# ---------------------------------------------------------------- reporting

def _group_reasons(counter) -> list:
    """Coverage reasons with the names in backquotes folded, most common first."""
    grouped = collections.Counter()
    for why, n in counter.items():
        grouped[re.sub(r"`[^`]*`", "`…`", why)] += n
    return grouped.most_common()


def pct(c, t):
    return f"{c}/{t} ({100 * c / t:.0f}%)" if t else "–"


def render(libs, stats, classes, regex_stats, alarms, coverage, elapsed, fingerprint,
           by_use) -> str:
    out = [f"# Third-party recall ({time.strftime('%Y-%m-%d %H:%M')}, engine {fingerprint}, "
           f"{elapsed / 60:.1f} min)", ""]
    out.append("| library | files | kernel files | not parsable | PAL on unmodified | mutants |")
    out.append("|---|---|---|---|---|---|")
    for lib in libs:
        n = sum(stats[lib.name][c][1] for c in classes)
        out.append(f"| {lib.name} | {len(lib.files)} | {len(lib.kernel_files)} | "
                   f"{len(lib.unparsable)} | {len(alarms.get(lib.name, []))} | {n} |")
    out.append("")
    names = [lib.name for lib in libs if any(stats[lib.name][c][1] for c in classes)] + ["all"]
    out.append("Recall: engine caught/total (%), regex baseline in brackets.")
    out.append("")
    out.append("| class | " + " | ".join(names) + " |")
    out.append("|---|" + "---|" * len(names))
    for c in classes:
        row = []
        for name in names:
            caught, total = stats[name][c]
            rc, _ = regex_stats[name][c]
            row.append(f"{pct(caught, total)} [{100 * rc / total:.0f}%]" if total else "–")
        out.append(f"| {c} | " + " | ".join(row) + " |")
    row = []
    for name in names:
        caught = sum(stats[name][c][0] for c in classes)
        total = sum(stats[name][c][1] for c in classes)
        rc = sum(regex_stats[name][c][0] for c in classes)
        row.append(f"{pct(caught, total)} [{100 * rc / total:.0f}%]" if total else "–")
    out.append("| **all classes** | " + " | ".join(row) + " |")
    out.append("")
    out.append("By how the descriptor of the mutated call is used (all libraries). JAX checks "
               "Ref-ness, semaphore shapes and priority when a copy is *started*; a descriptor "
               "built only to `.wait()` on is checked for little more than a DMA semaphore Ref, "
               "so a precise engine may stay silent there.")
    out.append("")
    out.append("| class | started | wait only | other (handed on, stored) |")
    out.append("|---|---|---|---|")
    for c in classes:
        cells = [pct(*by_use[(c, u)]) for u in ("start", "wait", "other")]
        out.append(f"| {c} | " + " | ".join(cells) + " |")
    out.append("")
    chained = sum(lib.chained_sem for lib in libs)
    if chained:
        out.append(f"Semaphore sites with a chained `.at[...].at[...]` (outer index dropped): {chained}.")
    skipped = collections.Counter()
    for lib in libs:
        skipped.update(lib.not_via_temp)
    if skipped:
        out.append("via_temp not applicable (call inside a lambda/comprehension/compound "
                   "statement header, or sharing a line): "
                   + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) + ".")
    excluded = collections.Counter()
    for lib in libs:
        excluded.update(lib.excluded)
    if excluded:
        out.append("Edits left out as no bug: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(excluded.items())) + ".")
    out.append("")
    out.append("## Diagnostics on unmodified code")
    out.append("")
    any_alarm = False
    for lib in libs:
        for d in alarms.get(lib.name, []):
            any_alarm = True
            out.append(f"- {lib.name}/{d['path']}:{d['line']}:{d['code']}: {d['message']}")
    if not any_alarm:
        out.append("none")
    if coverage:
        out.append("")
        out.append("## pallas-lsp coverage")
        out.append("")
        for name, summary in coverage.items():
            why = summary.get("unknown_because", {})
            out.append(f"- {name}: " + ", ".join(f"{k}={v}" for k, v in summary.items()
                                                 if k != "unknown_because"))
            for reason, n in why.items():
                out.append(f"  - {n}: {reason}")
    return "\n".join(out) + "\n"


def choose(libs, classes, baselines, limit, budget, jobs, seed):
    """The mutants to run: all of them, at most `limit` per library and class,
    or as many per library and class as fit `budget` seconds (estimated from
    each file's baseline time). Samples are nested: a larger cap keeps the
    mutants of a smaller one."""
    strata = []
    for lib in libs:
        by_class = collections.defaultdict(list)
        for m in lib.mutants:
            if m.cls in classes:
                by_class[m.cls].append(m)
        for c in sorted(by_class):
            ms = by_class[c]
            random.Random(f"{seed}/{lib.name}/{c}").shuffle(ms)
            strata.append(ms)
    known = [b["seconds"] for b in baselines.values() if b and "seconds" in b]
    typical = sorted(known)[len(known) // 2] if known else 1.0

    def cost(m):
        b = baselines.get((m.lib, m.file))
        return b.get("seconds", typical) if b else typical

    def total(cap):
        return sum(cost(m) for ms in strata for m in ms[:cap]) / max(1, jobs)

    cap = max((len(ms) for ms in strata), default=0)
    if limit:
        cap = min(cap, limit)
    elif budget:
        lo, hi = 1, cap
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if total(mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cap = lo
    chosen = [m for ms in strata for m in ms[:cap]]
    return chosen, cap, total(cap)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/tp_cache"),
                    help="folder of unpacked libraries, one per subfolder")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tp_work"),
                    help="scratch copies and the baseline cache")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default WORK/results)")
    ap.add_argument("--lib", default="", help="comma-separated library names (default: all)")
    ap.add_argument("--classes", default="", help=f"comma-separated, from: {', '.join(ALL_CLASSES)}")
    ap.add_argument("--limit", type=int, default=0,
                    help="at most N mutants per library and class (a fixed random sample)")
    ap.add_argument("--budget", type=float, default=10,
                    help="minutes for the mutants: as many per library and class as fit, "
                         "estimated from baseline times (0: no budget)")
    ap.add_argument("--seed", default="0", help="of the samples taken by --limit / --budget")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120, help="seconds per check of one file")
    ap.add_argument("--root-timeout", type=float, default=900, help="seconds per check of a tree")
    ap.add_argument("--live", action="store_true",
                    help="run the installed pallas-lsp command as it changes (default: a "
                         "snapshot of the installed package taken at the start)")
    ap.add_argument("--engine-rev", default="",
                    help="measure the engine committed at this git revision (e.g. HEAD)")
    ap.add_argument("--pallas-lsp", default=str(Path(sys.executable).parent / "pallas-lsp"),
                    help="the command for --live")
    ap.add_argument("--no-mutants", action="store_true", help="false alarms (and coverage) only")
    ap.add_argument("--fresh", action="store_true", help="ignore cached baselines")
    args = ap.parse_args(argv)

    classes = [c for c in args.classes.split(",") if c] or list(ALL_CLASSES)
    bad = set(classes) - set(ALL_CLASSES)
    if bad:
        sys.exit(f"unknown classes: {', '.join(sorted(bad))}")
    libs = discover(args.cache, [x for x in args.lib.split(",") if x] or None)
    out_dir = args.out or args.work / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.live:
        if not Path(args.pallas_lsp).exists() and not shutil.which(args.pallas_lsp):
            sys.exit(f"pallas-lsp not found: {args.pallas_lsp}")
        exe = live_engine(args.pallas_lsp)
    elif args.engine_rev:
        exe = engine_at_rev(args.work, args.engine_rev)
    else:
        exe = snapshot_engine(args.work)
    fingerprint = exe.fingerprint

    # Baselines are kept across runs of the same engine on the same trees.
    cache_file = args.work / "baselines.json"
    cached = {}
    if cache_file.exists() and not args.fresh:
        try:
            cached = json.loads(cache_file.read_text())
        except json.JSONDecodeError:
            cached = {}
    if cached.get("engine") != fingerprint:
        cached = {"engine": fingerprint, "trees": {}, "files": {}}

    digests = {}
    for lib in libs:
        scan(lib)
        digests[lib.name] = tree_digest(lib.root)
        shutil.rmtree(args.work / lib.name, ignore_errors=True)  # stale scratch copies
    roots = {lib.name: lib.root for lib in libs}
    print(f"scanned {len(libs)} libraries ({time.perf_counter() - t0:.0f} s)", flush=True)

    wanted_files = sorted({(m.lib, m.file) for lib in libs for m in lib.mutants
                           if m.cls in classes}) if not args.no_mutants else []
    baselines: dict[tuple, dict | None] = {}
    for lib_name, rel in wanted_files:
        c = cached["files"].get(f"{lib_name}/{rel}")
        baselines[(lib_name, rel)] = c if c and c.get("tree") == digests[lib_name] else None
    trees = {}
    for lib in libs:
        c = cached["trees"].get(lib.name)
        trees[lib.name] = c if c and c.get("tree") == digests[lib.name] else None

    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        # 1. the unmodified trees (false alarms) and the unmodified kernel files
        futures = {}
        for lib in libs:
            if trees[lib.name] is None:
                futures[pool.submit(tree_task, exe, str(lib.root), args.root_timeout)] = \
                    ("tree", lib.name)
        for (lib_name, rel), b in baselines.items():
            if b is None:
                futures[pool.submit(file_task, exe, str(args.work), lib_name,
                                    str(roots[lib_name]), rel, [], None, args.timeout)] = \
                    ("file", (lib_name, rel))
        for fut in concurrent.futures.as_completed(futures):
            kind, key = futures[fut]
            if kind == "tree":
                diags, crashed, took = fut.result()
                trees[key] = {"tree": digests[key], "diags": diags, "crashed": crashed,
                              "seconds": took}
                cached["trees"][key] = trees[key]
                print(f"  tree {key}: {took:.0f} s", flush=True)
            else:
                b, _ = fut.result()
                b["tree"] = digests[key[0]]
                baselines[key] = b
                if not isinstance(b["diags"], str):
                    cached["files"][f"{key[0]}/{key[1]}"] = b
        cache_file.write_text(json.dumps(cached))
        t_base = time.perf_counter() - t0
        print(f"unmodified trees and {len(baselines)} kernel files checked "
              f"({t_base:.0f} s)", flush=True)

        # 2. mutants
        max_stratum = max((n for n in collections.Counter(
            (m.lib, m.cls) for lib in libs for m in lib.mutants if m.cls in classes).values()),
            default=0)
        chosen, cap, estimate = choose(libs, classes, baselines, args.limit, args.budget * 60,
                                       args.jobs, args.seed)
        if args.no_mutants:
            chosen = []
        print(f"{len(chosen)} mutants (at most {cap} per library and class), "
              f"estimated {estimate / 60:.1f} min", flush=True)
        # Results of mutants are kept too (same engine, same tree, same edit).
        mutant_file = args.work / "mutants.json"
        known = {}
        if mutant_file.exists() and not args.fresh:
            try:
                known = json.loads(mutant_file.read_text())
            except json.JSONDecodeError:
                known = {}
        if known.get("engine") != fingerprint:
            known = {"engine": fingerprint, "results": {}}
        results: dict[int, dict] = {}
        tasks = collections.defaultdict(list)
        for m in chosen:
            r = known["results"].get(mutant_key(m, digests[m.lib]))
            if r is not None:
                results[id(m)] = r
            else:
                tasks[(m.lib, m.file)].append(m)
        if results:
            print(f"{len(results)} mutant results reused from {mutant_file}", flush=True)
        futures = {}
        # Long files first; split a file's mutants in two so both workers share it.
        order = sorted(tasks.items(), key=lambda kv: -len(kv[1]) * (
            (baselines.get(kv[0]) or {}).get("seconds", 1.0)))
        for (lib_name, rel), ms in order:
            half = (len(ms) + 1) // 2 if len(ms) > 8 else len(ms)
            for part in (ms[:half], ms[half:]):
                if part:
                    fut = pool.submit(file_task, exe, str(args.work), lib_name,
                                      str(roots[lib_name]), rel,
                                      [dataclasses.asdict(m) for m in part],
                                      baselines[(lib_name, rel)], args.timeout)
                    futures[fut] = (lib_name, rel, part)
        done = 0
        progress = open(out_dir / "progress.jsonl", "w")  # for a look while it runs
        for fut in concurrent.futures.as_completed(futures):
            lib_name, rel, ms = futures[fut]
            _, res = fut.result()
            for m, r in zip(ms, res):
                results[id(m)] = r
                key = mutant_key(m, digests[m.lib])
                if r["status"] in ("caught", "missed"):
                    known["results"][key] = r
                progress.write(json.dumps({"key": key, "lib": m.lib, "file": m.file,
                                           "line": m.line, "class": m.cls,
                                           "mutated": m.mutated, **r}) + "\n")
            progress.flush()
            done += len(ms)
            print(f"  {done}/{len(chosen)} mutants ({time.perf_counter() - t0:.0f} s) "
                  f"{lib_name}/{rel}", flush=True)
        progress.close()
        mutant_file.write_text(json.dumps(known))
    for lib in libs:
        shutil.rmtree(args.work / lib.name, ignore_errors=True)
    t_mutants = time.perf_counter() - t0 - t_base

    # 3. coverage of the unmodified trees, when the command exists
    coverage, cov_sites = {}, {}
    if coverage_available(exe):
        kept = cached.setdefault("coverage", {})
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futs = {lib.name: pool.submit(coverage_task, exe, str(lib.root), args.root_timeout)
                    for lib in libs if (kept.get(lib.name) or {}).get("tree") != digests[lib.name]}
            failed = {}
            for name, f in futs.items():
                summary, raw = f.result()
                if raw is not None:
                    kept[name] = {"tree": digests[name], "summary": summary, "raw": raw}
                else:
                    failed[name] = summary
            cache_file.write_text(json.dumps(cached))
            for lib in libs:
                name = lib.name
                got = kept.get(name) or {}
                coverage[name], raw = failed.get(name, got.get("summary")), got.get("raw")
                if raw is not None:
                    (out_dir / f"coverage_{name}.json").write_text(json.dumps(raw))
                    for (path, line), site in coverage_sites(raw).items():
                        cov_sites[(name, path, line)] = site
    else:
        print("pallas-lsp coverage is not available: skipped", flush=True)

    # 4. tallies, with the grep-like detector on the same mutants
    alarms, other_diags, tree_crashes = {}, {}, {}
    for lib in libs:
        diags = trees[lib.name]["diags"]
        if isinstance(diags, str):
            print(f"{lib.name}: check of the tree failed: {diags}", file=sys.stderr)
            diags = []
        alarms[lib.name] = [d for d in diags if d["code"].startswith("PAL")]
        other_diags[lib.name] = [d for d in diags if not d["code"].startswith("PAL")]
        tree_crashes[lib.name] = trees[lib.name].get("crashed", [])
    stats = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    regex_stats = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    codes = collections.defaultdict(collections.Counter)
    statuses = collections.Counter()
    engine_errors = 0
    why_missed = collections.Counter()
    by_use = collections.defaultdict(lambda: [0, 0])
    missed = []
    orig_hits, sources = {}, {}
    for m in chosen:
        r = results[id(m)]
        statuses[r["status"]] += 1
        engine_errors += bool(r.get("engine_error"))
        if (m.lib, m.file) not in sources:
            text = (roots[m.lib] / m.file).read_text(encoding="utf-8")
            sources[(m.lib, m.file)] = Source(text)
            orig_hits[(m.lib, m.file)] = regex_hits(text)
        src = sources[(m.lib, m.file)]
        rx = regex_caught(orig_hits[(m.lib, m.file)], src.apply(m.edits), m.inserted_line)
        caught = r["status"] == "caught"
        by_use[(m.cls, m.use)][1] += 1
        by_use[(m.cls, m.use)][0] += caught
        for name in (m.lib, "all"):
            stats[name][m.cls][1] += 1
            stats[name][m.cls][0] += caught
            regex_stats[name][m.cls][1] += 1
            regex_stats[name][m.cls][0] += rx
        if caught:
            codes[m.cls].update({d["code"] for d in r["new"]})
        else:
            lo, hi = max(0, m.line - 6), min(len(src.lines), m.line + 3)
            site = cov_sites.get((m.lib, m.file, m.site_line))
            why = (("reached" if site.get("reached") else "not reached") + ": "
                   + (site.get("reason") or "known")) if site else (
                "no coverage site" if coverage else "")
            why_missed[why] += 1
            missed.append({"lib": m.lib, "file": m.file, "line": m.line, "class": m.cls,
                           "status": r["status"], "engine_error": r.get("engine_error", False),
                           "original": m.original, "mutated": m.mutated, "note": m.note,
                           "regex_caught": rx, "site_line": m.site_line, "use": m.use,
                           "coverage": site,
                           "context": "\n".join(f"{i + 1}: {src.lines[i]}"
                                                for i in range(lo, hi))})

    elapsed = time.perf_counter() - t0

    used = [c for c in classes if stats["all"][c][1]]
    report = render(libs, stats, used, regex_stats, alarms, coverage, elapsed, fingerprint,
                    by_use)
    report += (f"\nTime: {t_base / 60:.1f} min for the unmodified trees and files "
               f"({sum(1 for b in baselines.values() if b)} files), {t_mutants / 60:.1f} min "
               f"for {len(chosen)} mutants ({args.jobs} jobs)"
               + (f"; at most {cap} mutants per library and class"
                  + (" (not binding)" if cap >= max_stratum else "")
                  if (args.limit or args.budget) and chosen else "") + ".\n")
    judged = [s for s in statuses if s not in ("caught", "missed")]
    if judged:
        report += "Mutants not judged (counted as missed): " + ", ".join(
            f"{s} {statuses[s]}" for s in judged) + "\n"
    if engine_errors:
        report += f"Mutants on which the engine crashed on the mutated file: {engine_errors}\n"
    crashes = [f"{name}/{c}" for name, cs in tree_crashes.items() for c in cs]
    if crashes:
        report += f"Engine crashes while checking the unmodified trees: {len(crashes)} files " \
                  f"({', '.join(crashes[:12])}{', ...' if len(crashes) > 12 else ''})\n"
    if any(codes.values()):
        report += "\nCodes that caught each class: " + "; ".join(
            f"{c}: " + ", ".join(f"{k} {v}" for k, v in codes[c].most_common()) for c in used
            if codes[c]) + "\n"
    if coverage and why_missed:
        report += "\nMissed mutants by what coverage says of their DMA site:\n" + "".join(
            f"- {n}: {w}\n" for w, n in _group_reasons(why_missed))
    internal = {name: sum(d["code"] == "E001" for d in ds) for name, ds in other_diags.items()}
    if any(internal.values()):
        report += ("\nE001 (pallas-lsp could not analyse the file) on unmodified code: "
                   + ", ".join(f"{name} {n}" for name, n in internal.items() if n)
                   + " files (false_alarms.json lists them)\n")
    other = [f"{name}/{d['path']}:{d['line']}:{d['code']}" for name, ds in other_diags.items()
             for d in ds if d["code"] != "E001"]
    if other:
        report += "\nOther non-PAL diagnostics on unmodified code: " + ", ".join(other) + "\n"
    (out_dir / "summary.md").write_text(report)
    (out_dir / "missed.json").write_text(json.dumps(missed, indent=1))
    (out_dir / "false_alarms.json").write_text(json.dumps(
        {"pal": alarms, "other": other_diags}, indent=1))
    (out_dir / "summary.json").write_text(json.dumps({
        "engine": fingerprint, "seconds": round(elapsed, 1),
        "seconds_unmodified": round(t_base, 1), "seconds_mutants": round(t_mutants, 1),
        "cap_per_class": cap if args.limit or args.budget else None,
        "libraries": {lib.name: {"root": str(lib.root), "files": len(lib.files),
                                 "kernel_files": len(lib.kernel_files),
                                 "unparsable": lib.unparsable,
                                 "sites": dict(collections.Counter(m.cls for m in lib.mutants)),
                                 "pal_on_unmodified": len(alarms[lib.name]),
                                 "engine_crashes_unmodified": tree_crashes[lib.name],
                                 "recall": {c: stats[lib.name][c] for c in used
                                            if stats[lib.name][c][1]},
                                 "regex": {c: regex_stats[lib.name][c] for c in used
                                           if regex_stats[lib.name][c][1]}}
                      for lib in libs},
        "overall": {c: stats["all"][c] for c in used},
        "overall_by_use": {f"{c}/{u}": v for (c, u), v in sorted(by_use.items())},
        "overall_regex": {c: regex_stats["all"][c] for c in used},
        "codes": {c: dict(codes[c]) for c in used},
        "statuses": dict(statuses),
        "coverage": coverage,
    }, indent=1))
    print(report)
    print(f"results in {out_dir} ({elapsed / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
