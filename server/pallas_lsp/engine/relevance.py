"""Which functions of a file can lead to a kernel, from its text alone.

The interpreter runs every function nobody called with unknown arguments,
so that launches and DMA helpers are seen however they are reached. A
function that never names anything Pallas (directly, or through a function,
class or module of the user's that does) cannot produce a launch or an event
that way: running it only costs time. Reference implementations, input
validation and NumPy mask code are most of some kernel files.

The test is by identifier, on the text (comments and strings included), so
it only ever says "relevant" too often.
"""
from __future__ import annotations

import ast
import bisect
import os

from pallas_lsp.engine import backend
from pallas_lsp.engine.model import Api, Const, Func, Seq, Unknown
from pallas_lsp.engine.source import Source
from pallas_lsp.engine.values import ClassVal

# Words that make a function relevant wherever they come from.
_ALWAYS = ("pallas", "pallas_call", "core_map", "emit_pipeline", "run_scoped", "BufferedRef",
           "import", "__import__", "globals", "getattr", "eval", "exec")
_PALLAS_HEADS = ("pl.", "pltpu.", "plgpu.", "plsc.")


def relevant_defs(src: Source, defs: list[ast.AST], classes: list[ast.ClassDef],
                  module_vars: dict) -> set[int]:
    """ids of the defs (in `defs`) that mention something Pallas, or a def,
    class or module-level name that does, or one of the user's modules.

    A worklist over words: each word's lines are looked up once, each line
    knows the defs and classes around it, so the cost is linear in the
    mentions (a fixpoint that rescanned every def per round was quadratic in
    a chain of helpers, each calling the next)."""
    words = set(_ALWAYS) | {name for name, v in module_vars.items() if _seed(v)}
    # Every word the fixpoint can ever look for is known now: find their
    # lines in one pass over the text.
    candidates = words | set(module_vars) | {d.name for d in defs} | {c.name for c in classes}
    where = _word_lines(src.lines, candidates)
    owners: dict[int, list[tuple[bool, ast.AST]]] = {}  # line -> the defs / classes spanning it
    for is_def, nodes in ((True, defs), (False, classes)):
        for node in nodes:
            for line in range(node.lineno - 1, (node.end_lineno or node.lineno)):
                owners.setdefault(line, []).append((is_def, node))
    aliases: dict[int, list[str]] = {}  # node id -> module-level names bound to it
    for name, v in module_vars.items():
        nid = _node_of(v)
        if nid:
            aliases.setdefault(nid, []).append(name)
    relevant: set[int] = set()
    relevant_cls: set[int] = set()
    done: set[str] = set()
    todo = list(words)
    while todo:
        w = todo.pop()
        if w in done:
            continue
        done.add(w)
        for line in where.get(w, ()):
            for is_def, node in owners.get(line, ()):
                seen = relevant if is_def else relevant_cls
                if id(node) in seen:
                    continue
                seen.add(id(node))
                todo.append(node.name)
                # Module-level aliases of what just became relevant (`fn = partial(kernel, ...)`).
                todo.extend(aliases.get(id(node), ()))
    return relevant


# Text without these cannot use Pallas: its APIs are reached through a
# module whose name contains "pallas" (or an alias of it), or by importing
# by a computed name. Substring tests and a scan for the word `pl`: one
# regex alternating them all tries every position of the text, ten times
# slower on a large table of tuned sizes.
_PALLAS_WORDS = ("pallas", "pltpu", "plgpu", "plsc", "mosaic", "__import__", "import_module")


def names_pallas(text: str) -> bool:
    if any(w in text for w in _PALLAS_WORDS):
        return True
    i = text.find("pl")
    while i >= 0:  # `pl` as a whole word, as the regex `\bpl\b` finds it
        before, after = text[i - 1:i], text[i + 2:i + 3]
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        i = text.find("pl", i + 2)
    return False


def inert_file(text: str, libraries: set[str]) -> bool:
    """Can nothing in this file launch a kernel or reach one? It names nothing
    Pallas and imports only libraries (no module of the user's, where a
    launcher could be). Tables of tuned block sizes, NumPy mask builders and
    most of a project's other files are like that: they are only checked for syntax
    errors (`source.parses`)."""
    return not names_pallas(text) and backend.imports_only_libraries(text, libraries)


def reaches_no_pallas(src: Source, path: str, project, library_roots) -> bool:
    """Can nothing this file imports of the user's, directly or through other
    modules of the user's, name Pallas? For a file that names nothing Pallas
    itself (the caller's test): its analysis then cannot reach a kernel.

    Over-approximates what the interpreter can read (interp/imports.py):
    every import statement, in functions too; each dotted prefix of `import
    a.b.c`; `from m import x` as module m, as m's submodule x and as module
    `m.x`; and every module under a package reached (an attribute of a
    package can be any of its submodules). The verdicts are remembered in
    `project.pallas_free` (the command line: the texts do not change)."""
    try:
        return _closure_free(src, path, project, library_roots)
    except (OSError, ValueError, RecursionError):
        return False  # the interpreter will say what it can


def _closure_free(src: Source, path: str, project, library_roots) -> bool:
    memo = project.pallas_free
    seen = {path}
    todo = [p for p in _user_imports(src.tree, path, project, library_roots) if p]
    reached: list[str] = [path]
    while todo:
        other = todo.pop()
        if other in seen:
            continue
        seen.add(other)
        known = memo.get(other)
        if known is True:
            continue  # its whole closure is free of Pallas
        if known is False:
            return False
        text = project.text(other)
        if text is None:
            continue  # unreadable: the interpreter cannot run it either
        if names_pallas(text):
            memo[other] = False
            return False
        source = project.source(other)
        if source is None:
            continue
        reached.append(other)
        todo.extend(p for p in _user_imports(source.tree, other, project, library_roots) if p)
        if os.path.basename(other) == "__init__.py":
            todo.extend(_package_modules(os.path.dirname(other), project))
    for other in reached:  # each one's closure is part of this one's
        memo[other] = True
    return True


def _user_imports(tree: ast.Module, path: str, project, library_roots):
    """The files of the user's modules a file's import statements can name."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in library_roots:
                    continue
                for i in range(1, len(parts) + 1):
                    yield project.resolve(path, ".".join(parts[:i]), 0)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if not node.level and module.split(".")[0] in library_roots:
                continue
            target = project.resolve(path, module, node.level)
            yield target
            for alias in node.names:
                if target is not None:
                    sub = project.submodule(target, alias.name)
                    yield project.realpath(sub) if sub else None
                if node.level or node.module:
                    yield project.resolve(path, f"{module}.{alias.name}" if module
                                          else alias.name, node.level)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                stack.extend(getattr(node, field, None) or ())


def _package_modules(folder: str, project):
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for e in entries:
        if e.name.endswith((".py", ".pyi")) and e.name != "__init__.py":
            yield project.realpath(e.path)
        elif e.is_dir(follow_symlinks=False):
            init = os.path.join(e.path, "__init__.py")
            if os.path.isfile(init):
                yield project.realpath(init)


def _seed(value) -> bool:
    """Can a function reach Pallas by naming this module-level value? The
    file's own functions and classes are left to the fixpoint."""
    if isinstance(value, Api):
        return value.name in ("pl", "pltpu", "plgpu", "plsc") or value.name.startswith(
            _PALLAS_HEADS)
    if isinstance(value, (Const, Unknown, Func, ClassVal)):
        return False
    if isinstance(value, Seq):  # a registry of kernels counts, as any Pallas value in it
        return any(_seed(v) or isinstance(v, (Func, ClassVal)) for v in value.items)
    return True  # specs, launchers, choices of functions, instances, the user's modules...


def _node_of(value) -> int:
    return id(value.node) if isinstance(value, (Func, ClassVal)) else 0


# Bytes that end an identifier become spaces (newlines stay, to count lines);
# bytes of UTF-8 sequences stay word bytes, so Unicode identifiers survive.
_SEPARATE = bytes(b if (chr(b).isalnum() or b in b"_\n" or b >= 128) else 32 for b in range(256))


def _word_lines(lines: list[str], words: set[str]) -> dict[str, list[int]]:
    """word -> the 0-based lines it occurs on, for the words in `words`.
    (bytes.translate + split: several times faster than a regex per line.)"""
    wanted = {w.encode("utf-8", "surrogatepass"): w for w in words}
    keys = wanted.keys()
    out: dict[str, list[int]] = {}
    text = "\n".join(lines).encode("utf-8", "surrogatepass").translate(_SEPARATE)
    for i, line in enumerate(text.split(b"\n")):
        for w in keys & line.split():
            found = out.get(wanted[w])
            if found is None:
                out[wanted[w]] = [i]
            else:
                found.append(i)
    return out


def any_between(sorted_lines: list[int], first: int, last: int) -> bool:
    i = bisect.bisect_left(sorted_lines, first)
    return i < len(sorted_lines) and sorted_lines[i] <= last
