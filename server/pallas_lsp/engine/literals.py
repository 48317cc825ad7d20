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
keeps the real text (a syntax error inside such a display goes unreported:
the parser never sees it). Only text made of literals (numbers, plain strings,
True/False/None, brackets, commas, colons, signs, whitespace) counts, so
code is never hidden.
"""
from __future__ import annotations

import re
import threading

MIN_CHARS = 64_000  # a display shorter than this is parsed as it is
OPAQUE = "__pallas_lsp_big_literal__"

# A candidate display: an opening bracket where an expression starts (after
# `=`, `(`, `[`, `{`, `,`, `:`, `return` or at a line's start: not a call's
# or a subscript's bracket), then a run of the characters literals are made
# of. One character class, no alternation: the regex engine keeps no state
# per character (an alternation of tokens kept about 600 bytes per token).
_RUN = re.compile(r"(?:^|(?<=[=(\[{,:])|(?<=\breturn))[ \t]*(?:\\\n[ \t]*)?"
                  r"([\[({][\w\s.,:'\"\[\](){}+-]*)", re.M)
_PART = re.compile(r"[\[\](){}]|'[^'\\\n]*'|\"[^\"\\\n]*\"")
_STRING = re.compile(r"'[^'\\\n]*'|\"[^\"\\\n]*\"")
# A word that is not part of a number (`1e5`, `0xff`, `2j`, `1 .real`).
_NAME = re.compile(r"(?<![\w.])[^\W\d]\w*")
_CLOSE = {"]": "[", ")": "(", "}": "{"}
_CONSTANTS = {"True", "False", "None"}


def opaque_displays(text: str) -> str:
    """`text` with its huge constant displays replaced (see the module
    docstring); `text` itself when it has none (the common case: one length
    test for a file shorter than MIN_CHARS)."""
    if len(text) < MIN_CHARS or not _long_stretch(text):
        return text
    with _lock:
        hit = _recent.get(text)
    if hit is None:
        hit = _opaque(text)
        with _lock:  # the server parses one text up to three times (analysis, project, lenses)
            if len(_recent) >= 2:
                _recent.pop(next(iter(_recent)))
            _recent[text] = hit
    return text if hit is _SAME else hit


_recent: dict[str, str] = {}  # the last texts scanned -> their opaque text, or _SAME
_lock = threading.Lock()
_SAME = ""


def _opaque(text: str) -> str:
    out: list[str] = []
    done = 0  # text[:done] is in `out`
    pos = 0
    while True:
        m = _RUN.search(text, pos)
        if m is None:
            break
        start, run = m.start(1), m.group(1)
        end = _balanced_end(run) if len(run) >= MIN_CHARS else None
        if end is None or end < MIN_CHARS:
            # Nothing in a short run is long; a display that does not close in
            # its run is not all literals, and its parts are left as they are.
            pos = m.end() if end is None else start + end
            continue
        display = run[:end]
        pos = start + end
        if not _constants_only(display):
            continue
        out.append(text[done:start])
        out.append(_placeholder(display))
        done = pos
    if not out:
        return _SAME
    out.append(text[done:])
    return "".join(out)


def _long_stretch(text: str) -> bool:
    """Has `text` MIN_CHARS in a row without `=` or `#`? A display of literals
    has neither, and code has them every few lines: most big files are ruled
    out by a split, in a few milliseconds, without the scan."""
    return any(len(part) >= MIN_CHARS for chunk in text.split("=")
               for part in (chunk.split("#") if len(chunk) >= MIN_CHARS else ()))


def _constants_only(display: str) -> bool:
    """No names in it but True / False / None, and its strings closed."""
    bare = _STRING.sub("0", display)
    if "'" in bare or '"' in bare:
        return False
    return all(m.group() in _CONSTANTS for m in _NAME.finditer(bare))


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


def _placeholder(display: str) -> str:
    """`(OPAQUE)` in place of `display`, with its line breaks: the first line
    holds the name, the last keeps its width (code may follow it)."""
    lines = display.split("\n")
    if len(lines) == 1:
        return "(" + OPAQUE + " " * (len(display) - len(OPAQUE) - 2) + ")"
    return "(" + OPAQUE + "\n" * (len(lines) - 1) + " " * (len(lines[-1]) - 1) + ")"
