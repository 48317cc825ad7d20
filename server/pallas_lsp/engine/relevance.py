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


def _names_pallas(text: str) -> bool:
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
    return not _names_pallas(text) and backend.imports_only_libraries(text, libraries)


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
