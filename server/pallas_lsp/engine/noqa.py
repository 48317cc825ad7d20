"""`# noqa` and `# noqa: PAL101, PAL103` comments, ruff-style."""
from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)


def noqa_lines(text: str) -> dict[int, frozenset[str] | None]:
    """0-based line -> codes suppressed there (None: every code)."""
    out: dict[int, frozenset[str] | None] = {}
    if "noqa" not in text.lower():  # the common case: skip the per-line scan
        return out
    for i, line in enumerate(text.split("\n")):
        if "noqa" not in line.lower():
            continue
        hash_at = comment_start(line)
        if hash_at is None:
            continue
        m = _NOQA.search(line, hash_at)
        if not m:
            continue
        codes = m.group("codes")
        out[i] = None if not codes else frozenset(
            c.upper() for c in re.split(r"[\s,]+", codes) if c)
    return out


def comment_start(line: str) -> int | None:
    """Index of the `#` that starts a comment, skipping `#` inside one-line
    strings (a `# noqa` inside a multi-line string is rare enough to accept)."""
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else ch
            i += len(quote)
            continue
        elif ch == "#":
            return i
        i += 1
    return None


def suppressed(code: str, line: int, table: dict[int, frozenset[str] | None]) -> bool:
    if line not in table:
        return False
    codes = table[line]
    return codes is None or code in codes
