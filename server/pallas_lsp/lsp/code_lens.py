"""Code lenses that start runs: "Run in interpret mode", "Run on TPU", "Run
with race detection", "Compile for TPU" (an interpret run that also compiles
every pallas_call for the `runs.compileGenerations` TPU generations).

Where they go (a cheap `ast` pass over the current text, never the engine or
jedi):

* on the `def` line of each test function (`def test_*` at module level or in
  a `class Test*`) that runs a kernel: its body mentions `pallas_call`,
  `pl.kernel` or `core_map`, or it calls (or refers to) a function or name of
  the same module that does, transitively;
* in a script with `if __name__ == "__main__":`, on each line calling
  `pallas_call` (or `pl.kernel` / `core_map`); those lenses run the file as a
  script.

A file that does not parse gets no lenses.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from lsprotocol import types

from pallas_lsp.engine.literals import opaque_displays
from pallas_lsp.lsp.positions import LineIndex

RUN_COMMAND = "pallas-lsp.run"
ENTRY_NAMES = frozenset({"pallas_call", "core_map"})  # as a bare name or an attribute
LENSES = (  # (title, mode, races, compile)
    ("▶ Run in interpret mode", "interpret", False, False),
    ("▶ Run on TPU", "tpu", False, False),
    ("▶ Run with race detection", "interpret", True, False),
    # interpret mode, and every pallas_call compiled for runs.compileGenerations
    ("▶ Compile for TPU", "interpret", False, True),
)


@dataclass(frozen=True)
class LensSite:
    line: int  # 0-based
    col: int  # code points
    end_col: int
    target: str  # "PATH::Class::test" or "PATH"
    kind: str  # "pytest" | "script"


def _pallas_aliases(tree: ast.Module) -> set[str]:
    """Names bound to a Pallas module (`pl`, `pltpu`, `pallas`...)."""
    out = {"pl"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if "pallas" in node.module or a.name == "pallas":
                    out.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if "pallas" in a.name:
                    out.add(a.asname or a.name.split(".")[0])
    return out


def _is_entry(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ENTRY_NAMES
    if isinstance(node, ast.Attribute):
        if node.attr in ENTRY_NAMES:
            return True
        return node.attr == "kernel" and isinstance(node.value, ast.Name) \
            and node.value.id in aliases
    return False


def _mentions(node: ast.AST, aliases: set[str]) -> bool:
    return any(_is_entry(n, aliases) for n in ast.walk(node))


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    if len(t.ops) != 1 or not isinstance(t.ops[0], ast.Eq):
        return False
    sides = [t.left, t.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _code_point_col(index: LineIndex, line: int, byte_col: int) -> int:
    text = index.line_text(line)
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def find_sites(text: str, path: str, index: LineIndex | None = None) -> list[LensSite]:
    """Where lenses go in `text` (the file at `path`). Never raises."""
    try:
        tree = ast.parse(opaque_displays(text))  # no megabytes of data as nodes
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    try:
        return _find_sites(tree, path, index or LineIndex(text))
    except RecursionError:
        return []


def _find_sites(tree: ast.Module, path: str, index: LineIndex) -> list[LensSite]:
    aliases = _pallas_aliases(tree)
    # module-level names and what they use
    uses: dict[str, set[str]] = {}
    direct: set[str] = set()
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if getattr(node, "value", None) is None:
                continue
        else:
            continue
        mentions = _mentions(node, aliases)
        used = _names_used(node)
        for name in names:
            uses.setdefault(name, set()).update(used - {name})
            if mentions:
                direct.add(name)
    runs_kernel = set(direct)
    changed = True
    while changed:
        changed = False
        for name, used in uses.items():
            if name not in runs_kernel and used & runs_kernel:
                runs_kernel.add(name)
                changed = True

    def kernel_test(fn) -> bool:
        return _mentions(fn, aliases) or bool(_names_used(fn) & runs_kernel)

    sites: list[LensSite] = []

    def add_def(fn, target: str) -> None:
        line = fn.lineno - 1
        text = index.line_text(line)
        col = _code_point_col(index, line, fn.col_offset)
        at = text.find(fn.name, col)
        if at >= 0:
            col, end = at, at + len(fn.name)
        else:
            end = len(text)
        sites.append(LensSite(line, col, end, target, "pytest"))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if kernel_test(node):
                add_def(node, f"{path}::{node.name}")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and item.name.startswith("test") and kernel_test(item):
                    add_def(item, f"{path}::{node.name}::{item.name}")

    if any(_is_main_guard(node) for node in tree.body):
        lines: set[int] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and _is_entry(n.func, aliases):
                line = n.lineno - 1
                if line in lines:
                    continue
                lines.add(line)
                col = _code_point_col(index, line, n.col_offset)
                end = _code_point_col(index, line, n.func.end_col_offset or n.col_offset) \
                    if n.func.end_lineno == n.lineno else len(index.line_text(line))
                sites.append(LensSite(line, col, end, path, "script"))
    sites.sort(key=lambda s: (s.line, s.col))
    return sites


def code_lenses(uri: str, text: str, path: str, index: LineIndex,
                encoding: str) -> list[types.CodeLens]:
    """Four lenses per site, each a `pallas-lsp.run` command."""
    out: list[types.CodeLens] = []
    for site in find_sites(text, path, index):
        sl, sc = index.to_client(site.line, site.col, encoding)
        el, ec = index.to_client(site.line, site.end_col, encoding)
        rng = types.Range(types.Position(sl, sc), types.Position(el, ec))
        for title, mode, races, compile_for in LENSES:
            arg = {"uri": uri, "target": site.target, "mode": mode, "races": races}
            if compile_for:
                arg["compile"] = True
            if site.kind == "script":
                arg["kind"] = "script"
            out.append(types.CodeLens(range=rng, command=types.Command(
                title=title, command=RUN_COMMAND, arguments=[arg])))
    return out
