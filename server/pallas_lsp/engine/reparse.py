"""Parsing the next version of a file the editor is changing: only the
top-level statements the edit touched are parsed again, the others are the
previous version's nodes. A keystroke changes a line or two; parsing the
whole file again was a quarter of the analysis of a 900-line kernel.

Only edits that keep the line count (typing within lines) are done this way,
so the reused nodes' positions stay right; the rest, and anything that does
not parse on its own, goes through `source.parse`. Nodes are shared with the
previous analysis and never modified (the engine keeps its state off the AST).
"""
from __future__ import annotations

import ast
import threading
from collections import OrderedDict

from pallas_lsp.engine.literals import opaque_displays
from pallas_lsp.engine.source import Source, normalize, parse

MAX_FILES = 8  # documents remembered (the ones being edited)

_lock = threading.Lock()
_last: OrderedDict[str, Source] = OrderedDict()


def parse_version(text: str, key: str) -> Source:
    """`source.parse(text)`, reusing what it can of the last version parsed
    under `key` (a document's path)."""
    text = normalize(text)
    with _lock:
        previous = _last.get(key)
    src = _reparse(previous, text) if previous is not None else None
    if src is None:
        src = parse(text)
    with _lock:
        _last[key] = src
        _last.move_to_end(key)
        while len(_last) > MAX_FILES:
            _last.popitem(last=False)
    return src


def forget(key: str | None = None) -> None:
    with _lock:
        if key is None:
            _last.clear()
        else:
            _last.pop(key, None)


def _start(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    return min([stmt.lineno] + [d.lineno for d in decorators or ()])


def _reparse(previous: Source, text: str) -> Source | None:
    if previous.syntax_error is not None or previous.blanked:
        return None
    lines = text.split("\n")
    old = previous.lines
    if len(lines) != len(old):
        return None
    changed = [i for i, (a, b) in enumerate(zip(lines, old)) if a != b]
    body = previous.tree.body
    if not changed:
        return Source(text, lines, previous.tree)
    lo, hi = changed[0] + 1, changed[-1] + 1  # 1-based, inclusive
    # Statements [i, j] touch the changed lines; the chunk runs from the end
    # of the statement before them to the start of the one after them.
    # (i == j + 1: the edit is between statements, in blank lines or comments.)
    i = next((k for k, s in enumerate(body) if s.end_lineno >= lo), len(body))
    j = next((k for k in range(len(body) - 1, -1, -1) if _start(body[k]) <= hi), -1)
    first = body[i - 1].end_lineno + 1 if i > 0 else 1
    last = _start(body[j + 1]) - 1 if j + 1 < len(body) else len(lines)
    chunk = "\n" * (first - 1) + "\n".join(lines[first - 1:last])
    try:
        tree = ast.parse(opaque_displays(chunk))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module = ast.Module(body=body[:i] + tree.body + body[j + 1:], type_ignores=[])
    return Source(text, lines, module)
