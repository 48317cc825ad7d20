"""`# noqa` comments: add or extend one for a code, and find the code under
the cursor in one. Works on one line of text; columns are code points."""
from __future__ import annotations

import re

from pallas_lsp.engine.model import Edit, Span
from pallas_lsp.engine.noqa import comment_start

# flake8's syntax: "# noqa" (everything) or "# noqa: A1, B2" / "# noqa:A1 B2"
NOQA = re.compile(
    r"#\s*noqa(?P<sep>:\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)


def find_noqa(line: str):
    """The noqa match in the line's comment, or None."""
    start = comment_start(line)
    if start is None:
        return None
    return NOQA.search(line, start)


def noqa_edit(line: str, line_no: int, code: str) -> Edit | None:
    """The edit that makes `# noqa` on this line cover `code`, or None when
    it already does (or the line cannot take a comment)."""
    stripped = line.rstrip()
    if stripped.endswith("\\"):
        return None  # a comment after a line continuation is a syntax error
    m = find_noqa(line)
    if m is not None:
        codes = m.group("codes")
        if codes is None:
            return None  # a bare "# noqa" already silences everything
        if code.upper() in (c.upper() for c in CODE.findall(codes)):
            return None
        at = m.end("codes")
        return Edit(Span(line_no, at, line_no, at), f", {code}")
    at = len(stripped)
    pad = "  " if stripped else ""
    return Edit(Span(line_no, at, line_no, at), f"{pad}# noqa: {code}")


def code_at(line: str, col: int) -> str | None:
    """The rule code under `col` inside this line's noqa comment."""
    m = find_noqa(line)
    if m is None or m.group("codes") is None:
        return None
    base = m.start("codes")
    for c in CODE.finditer(m.group("codes")):
        if base + c.start() <= col <= base + c.end():
            return c.group(0).upper()
    return None
