"""Code points <-> LSP positions.

The engine counts columns in Unicode code points (Python string indices).
LSP counts them in the negotiated position encoding: UTF-16 code units unless
the client offered something else. Lines are separated by "\\n", "\\r\\n" or
"\\r" only (LSP, and also Python's tokenizer), not by the extra separators
`str.splitlines` knows ("\\x0c", "\\u2028", ...).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def choose_encoding(offered: list[str] | None) -> str:
    """UTF-8 when the client offers it, UTF-16 (mandatory for every client)
    otherwise."""
    if offered and UTF8 in offered:
        return UTF8
    return UTF16


def _units(ch: str, encoding: str) -> int:
    cp = ord(ch)
    if encoding == UTF16:
        return 2 if cp > 0xFFFF else 1
    if encoding == UTF8:
        if cp < 0x80:
            return 1
        if cp < 0x800:
            return 2
        if cp < 0x10000:
            return 3
        return 4
    return 1


def units(text: str, encoding: str) -> int:
    """Length of `text` in code units of `encoding`."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF16:
        return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)
    return len(text.encode("utf-8", errors="surrogatepass"))


def col_to_units(line: str, col: int, encoding: str) -> int:
    """Code-point column -> code units (clamped to the line)."""
    col = max(0, min(col, len(line)))
    return units(line[:col], encoding)


def col_from_units(line: str, n: int, encoding: str) -> int:
    """Code units -> code-point column. A column past the end of the line
    means the end of the line (LSP); one inside a character (half of a
    surrogate pair, the middle of a UTF-8 sequence) rounds down to the
    character's start."""
    if n <= 0:
        return 0
    if encoding == UTF32 or line.isascii():
        return min(n, len(line))
    count = 0
    for i, ch in enumerate(line):
        count += _units(ch, encoding)
        if count > n:
            return i
        if count == n:
            return i + 1
    return len(line)


def split_lines(text: str) -> list[str]:
    """Lines of `text` without their line breaks (a trailing break gives a
    last, empty line, as in an editor)."""
    return _LINE_BREAK.split(text)


@dataclass(frozen=True)
class Pos:
    """A position in code points."""

    line: int
    col: int


class LineIndex:
    """Line table of one text: converts between code-point positions,
    absolute offsets and client positions."""

    __slots__ = ("text", "lines", "starts")

    def __init__(self, text: str):
        self.text = text
        self.lines: list[str] = []
        self.starts: list[int] = []
        pos = 0
        for m in _LINE_BREAK.finditer(text):
            self.starts.append(pos)
            self.lines.append(text[pos:m.start()])
            pos = m.end()
        self.starts.append(pos)
        self.lines.append(text[pos:])

    # -- code points <-> offsets

    def line_text(self, line: int) -> str:
        if 0 <= line < len(self.lines):
            return self.lines[line]
        return ""

    def offset(self, line: int, col: int) -> int:
        """Absolute code-point offset of (line, col), clamped to the text."""
        if line < 0:
            return 0
        if line >= len(self.lines):
            return len(self.text)
        return self.starts[line] + max(0, min(col, len(self.lines[line])))

    def pos_at(self, offset: int) -> Pos:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        return Pos(line, min(offset - self.starts[line], len(self.lines[line])))

    # -- client units

    def to_client(self, line: int, col: int, encoding: str) -> tuple[int, int]:
        """(line, code-point col) -> (line, client units). A line past the end
        of the text maps to the end of the text."""
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return last, units(self.lines[last], encoding)
        if line < 0:
            return 0, 0
        return line, col_to_units(self.lines[line], col, encoding)

    def from_client(self, line: int, character: int, encoding: str) -> Pos:
        """(line, client units) -> code points, clamped as LSP says: past the
        end of a line is the end of that line, past the last line is the end
        of the text."""
        if line < 0:
            return Pos(0, 0)
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return Pos(last, len(self.lines[last]))
        return Pos(line, col_from_units(self.lines[line], character, encoding))

    def offset_from_client(self, line: int, character: int, encoding: str) -> int:
        p = self.from_client(line, character, encoding)
        return self.offset(p.line, p.col)
