"""Turning text into an AST, tolerating syntax errors, and mapping AST
positions (UTF-8 byte columns) to code-point spans."""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import field

from pallas_lsp.engine.literals import opaque_displays
from pallas_lsp.engine.model import Span
from pallas_lsp.engine.records import record
from pallas_lsp.engine.syntax import dead_code

# Files bigger than this are not analysed (generated code); the caller is told.
MAX_BYTES = 5_000_000
_MAX_REPAIRS = 25
_TOP_LEVEL = re.compile(r"\S")


@record
class Source:
    text: str
    lines: list[str]
    tree: ast.Module
    syntax_error: str | None = None
    blanked: set[int] = field(default_factory=set)  # 0-based lines removed to parse
    path: str = ""  # set for files read as another file's imports (spans carry it)
    _wide: set | None = field(default=None, repr=False, compare=False)
    # Whether the text says it is for a TPU (backend.names_tpu), once asked.
    says_tpu: bool | None = field(default=None, repr=False, compare=False)
    _dead: frozenset | None = field(default=None, repr=False, compare=False)

    @property
    def dead(self) -> frozenset:
        """ids of the nodes after an exit of their block (syntax.dead_code), once."""
        if self._dead is None:
            self._dead = dead_code(self.tree)
        return self._dead

    def span(self, node: ast.AST) -> Span:
        """Code-point span of a node (ast columns are UTF-8 byte offsets)."""
        line = node.lineno - 1
        end_line = (node.end_lineno or node.lineno) - 1
        col = self._col(line, node.col_offset)
        end_col = self._col(end_line, node.end_col_offset if node.end_col_offset is not None
                            else node.col_offset)
        return Span(line, col, end_line, end_col, self.path)

    def _col(self, line: int, byte_col: int) -> int:
        wide = self._wide
        if wide is None:  # lines with non-ASCII text: the only ones to convert
            wide = self._wide = {i for i, t in enumerate(self.lines) if not t.isascii()}
        if line not in wide:
            return byte_col
        text = self.lines[line]
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def segment(self, node: ast.AST) -> str:
        s = self.span(node)
        if s.line == s.end_line:
            return self.lines[s.line][s.col:s.end_col]
        parts = [self.lines[s.line][s.col:]]
        parts += self.lines[s.line + 1:s.end_line]
        parts.append(self.lines[s.end_line][:s.end_col])
        return "\n".join(parts)


def normalize(text: str) -> str:
    """One kind of line end, no NUL (the parser rejects it)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", " ")


def parse(text: str) -> Source:
    """Parse `text`; on a syntax error, blank the smallest region that makes
    the rest parse, so unaffected functions are still analysed."""
    text = normalize(text)
    lines = text.split("\n")
    # Megabytes of constant data are parsed as an opaque name (literals.py).
    parsed = opaque_displays(text)
    work = list(lines) if parsed is text else parsed.split("\n")
    try:
        return Source(text, lines, ast.parse(parsed))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    if sys.version_info < (3, 12):
        # Code written for a newer Python than the one we run on (PEP 695
        # type parameters, `type X = ...`; PEP 701 quotes reused inside an
        # f-string) is not a syntax error: blank or requote the new syntax,
        # keeping every column where it was.
        work = _requote_fstrings(_strip_type_params("\n".join(work))).split("\n")
    first_error: str | None = None
    blanked: set[int] = set()
    for _ in range(_MAX_REPAIRS):
        try:
            tree = ast.parse("\n".join(work))
            return Source(text, lines, tree, first_error, blanked)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            lineno = getattr(exc, "lineno", None) or len(work)
            if first_error is None:
                first_error = f"line {lineno}: {getattr(exc, 'msg', None) or exc}"
            bad = min(max(lineno - 1, 0), len(work) - 1)
            if isinstance(exc, (RecursionError, MemoryError)) or not _repair(work, bad, blanked):
                break
    return Source(text, lines, ast.Module(body=[], type_ignores=[]), first_error, blanked)


def parses(text: str) -> bool:
    """Does `text` parse? Cheaper than `ast.parse`, which makes Python objects
    for the whole tree, and than `compile`, which also generates code: the
    symbol table pass parses with the same parser and stops there (on a large
    table of literals 8 % less than `compile`, whose time is mostly the
    parser's). False also where only the symbol table objects (`nonlocal` at
    module level), so callers fall back to `parse`, which says what and where."""
    import symtable
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to print
            symtable.symtable(opaque_displays(text), "<check>", "exec")
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


def _repair(work: list[str], bad: int, blanked: set[int]) -> bool:
    """Blank line `bad` (keeping the block valid with `pass`); if it was
    already blanked, blank the whole top-level statement around it."""
    if bad not in blanked:
        indent = len(work[bad]) - len(work[bad].lstrip())
        work[bad] = " " * indent + "pass" if work[bad].strip() else ""
        blanked.add(bad)
        return True
    start = bad
    while start > 0 and not _starts_top_level(work[start]):
        start -= 1
    end = bad + 1
    while end < len(work) and not _starts_top_level(work[end]):
        end += 1
    changed = False
    for i in range(start, end):
        if work[i]:
            work[i] = ""
            blanked.add(i)
            changed = True
    return changed


def _starts_top_level(line: str) -> bool:
    return bool(line) and not line[0].isspace() and not line.startswith(("#", ")", "]", "}"))


_TYPE_PARAMS = re.compile(r"^([ \t]*(?:async[ \t]+def|def|class)[ \t]+[A-Za-z_]\w*[ \t]*)\[", re.M)
_TYPE_ALIAS = re.compile(r"^([ \t]*)type([ \t]+[A-Za-z_]\w*[ \t]*)(\[|=)", re.M)


def _strip_type_params(text: str) -> str:
    """Blank PEP 695 type parameter lists (which may span lines) and turn
    `type X = ...` into `X = ...`, keeping every other character in place."""
    chars = list(text)
    for m in _TYPE_PARAMS.finditer(text):
        _blank_brackets(chars, m.end() - 1)
    for m in _TYPE_ALIAS.finditer(text):
        name = m.group(2).strip()
        head = name + " " * (4 + len(m.group(2)) - len(name))
        chars[m.end(1):m.end(2)] = list(head)  # same length: offsets stay valid
        if m.group(3) == "[":
            _blank_brackets(chars, m.end() - 1)
    return "".join(chars)


_FSTRING_START = re.compile(r"(?<![\w'\"])(?:[rR]?[fF]|[fF][rR])(['\"])(?!\1\1)")


def _requote_fstrings(text: str) -> str:
    """`f"{d["key"]}"` (Python 3.12, PEP 701) -> `f"{d['key']}"`: a string
    inside a replacement field that reuses the f-string's quote gets the other
    quote, where it holds none; same length, so every column stays. Only
    single-line f-strings with single-quote characters are touched."""
    chars = list(text)
    for m in _FSTRING_START.finditer(text):
        quote = m.group(1)
        other = "'" if quote == '"' else '"'
        i, depth = m.end(), 0
        while i < len(text) and text[i] != "\n":
            c = text[i]
            if depth == 0 and c == quote:
                break  # the f-string's end
            if c == "{":
                if depth == 0 and text.startswith("{{", i):  # a literal brace
                    i += 2
                    continue
                depth += 1
            elif c == "}" and depth:
                depth -= 1
            elif c == quote and depth:
                end = text.find(quote, i + 1)
                inner = text[i + 1:end] if end != -1 else ""
                if end == -1 or "\n" in inner or other in inner:
                    break
                chars[i] = chars[end] = other
                i = end
            i += 1
    return "".join(chars)


def _blank_brackets(chars: list[str], start: int) -> None:
    """Replace `[...]` starting at `start` (with nesting) by spaces, keeping
    newlines; a list spread over lines ends each of its lines with a
    backslash instead, since outside brackets those lines must be joined."""
    depth = 0
    for i in range(start, len(chars)):
        if chars[i] in "[(":
            depth += 1
        elif chars[i] in "])":
            depth -= 1
        if chars[i] != "\n":
            chars[i] = " "
        elif i > start and chars[i - 1] == " ":
            chars[i - 1] = "\\"
        if depth == 0:
            return


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def cookie_encoding(data: bytes) -> str | None:
    """The encoding a `# -*- coding: NAME -*-` cookie on one of the first two
    lines declares (PEP 263), or None."""
    for i, line in enumerate(data.split(b"\n", 2)[:2]):
        m = _COOKIE.match(line)
        if m is not None:
            return m.group(1).decode("ascii")
        if i == 0 and line.strip() and not line.lstrip().startswith(b"#"):
            return None  # code on the first line: a cookie on the second does not count
    return None


def decode_bytes(data: bytes) -> str:
    """A Python file's text, decoded as Python does (PEP 263): a UTF-8 BOM, else
    the encoding of a coding cookie, else UTF-8. Raises UnicodeDecodeError (or
    LookupError for an unknown encoding)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data.decode("utf-8-sig")
    return data.decode(cookie_encoding(data) or "utf-8")
