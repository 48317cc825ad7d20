"""Huge constant displays, made opaque before the file is parsed.

A data table written as one literal (`DATA = [3, 1, 4, ...]`, a list of
rows, a dict of tuples) of megabytes costs `ast.parse` about 180 bytes and
a microsecond per element, and every pass after it (the interpreter, the
walks of the rules, coverage) visits each element again: seconds and a
gigabyte for a 5 MB file, for values no rule ever reads one by one.

Before parsing, each display of constants longer than `MIN_CHARS` is
replaced in the text handed to the parser by `(OPAQUE)`, a name nothing
binds, so the interpreter sees an Unknown value (never a wrong one: no
length, no items). Lines and the columns of everything outside the display
stay where they were, so spans and `# noqa` are unaffected; the Source
keeps the real text. Only text made of literal tokens (numbers, plain
strings, True/False/None, brackets, commas, colons, whitespace) counts, so
code is never hidden.
"""
from __future__ import annotations

import re

MIN_CHARS = 64_000  # a display shorter than this is parsed as it is
OPAQUE = "__pallas_lsp_big_literal__"

# One literal token, or a separator; a run of them is a candidate display.
_TOKEN = (r"-?(?:\d[\w.]*(?:[eE][-+]?\d+)?|\.\d\w*)|'[^'\\\n]*'|\"[^\"\\\n]*\""
          r"|(?:True|False|None)\b|[\s\[\](){},:]")
_RUN = re.compile(r"[\[({](?:" + _TOKEN + r")*")
# What a bracket run is made of, strings kept whole (a bracket in a string is text).
_PART = re.compile(r"[\[\](){}]|'[^'\\\n]*'|\"[^\"\\\n]*\"")
_CLOSE = {"]": "[", ")": "(", "}": "{"}
# A display, not a call or a subscript: what may come before its opening bracket.
_BEFORE = set("=([{,:")


def opaque_displays(text: str) -> str:
    """`text` with its huge constant displays replaced (see the module
    docstring); `text` itself when it has none (the common case: one length
    test for a file shorter than MIN_CHARS)."""
    if len(text) < MIN_CHARS:
        return text
    out: list[str] = []
    done = 0  # text[:done] is in `out`
    pos = 0
    while True:
        m = _RUN.search(text, pos)
        if m is None:
            break
        start = m.start()
        if m.end() - start < MIN_CHARS:
            pos = m.end()  # nothing in a short run is long
            continue
        if not _display_at(text, start):
            pos = start + 1  # a call's or subscript's bracket: a display may start after it
            continue
        end = _balanced_end(m.group())
        if end is None or end < MIN_CHARS:
            pos = m.end() if end is None else start + end
            continue
        stop = start + end
        out.append(text[done:start])
        out.append(_placeholder(text[start:stop]))
        done = pos = stop
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _balanced_end(run: str) -> int | None:
    """Length of the bracketed display at the start of `run` (its brackets
    matched pair by pair), or None when it does not close inside the run."""
    stack: list[str] = []
    for m in _PART.finditer(run):
        c = m.group()
        if c in "[({":
            stack.append(c)
        elif c in _CLOSE:
            if not stack or stack.pop() != _CLOSE[c]:
                return None  # not Python: leave it to the parser to say so
            if not stack:
                return m.end()
    return None


def _display_at(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t\n\\":
        i -= 1
    if i < 0 or text[i] in _BEFORE:
        return True
    return text[max(0, i - 5):i + 1] == "return" and (i < 6 or not _word(text[i - 6]))


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _placeholder(display: str) -> str:
    """`(OPAQUE)` in place of `display`, with its line breaks: the first line
    holds the name, the last keeps its width (code may follow it)."""
    lines = display.split("\n")
    if len(lines) == 1:
        return "(" + OPAQUE + " " * (len(display) - len(OPAQUE) - 2) + ")"
    return "(" + OPAQUE + "\n" * (len(lines) - 1) + " " * (len(lines[-1]) - 1) + ")"
