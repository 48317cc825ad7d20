"""`# noqa` and `# noqa: PAL101, PAL103` comments, ruff-style."""
from __future__ import annotations

import io
import re
import tokenize

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)


def noqa_lines(text: str) -> dict[int, frozenset[str] | None]:
    """0-based line -> codes suppressed there (None: every code)."""
    out: dict[int, frozenset[str] | None] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        comments = [(t.start[0] - 1, t.string) for t in tokens if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # Broken file: fall back to a per-line scan (may see '#' in strings).
        comments = [(i, line[line.index("#"):]) for i, line in enumerate(text.split("\n"))
                    if "#" in line]
    for line, comment in comments:
        m = _NOQA.search(comment)
        if not m:
            continue
        codes = m.group("codes")
        out[line] = None if not codes else frozenset(
            c.upper() for c in re.split(r"[\s,]+", codes) if c)
    return out


def suppressed(code: str, line: int, table: dict[int, frozenset[str] | None]) -> bool:
    if line not in table:
        return False
    codes = table[line]
    return codes is None or code in codes
