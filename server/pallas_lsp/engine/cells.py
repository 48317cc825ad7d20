"""Documents of code cells as one Python program, with the way back.

A Jupyter notebook (`.ipynb`, nbformat 4), a Markdown page (fenced code) or a
reStructuredText page (code directives, doctest blocks) is turned into one
module: its Python cells in document order, so a kernel defined in one cell
and launched in a later one is followed. Every program line belongs to one
cell line, so a position in the program maps back to (cell, line, column)
and, for Markdown and reStructuredText, to the page's own line and column.

Kept apart from the analysis: IPython magics and shell escapes (`%time`,
`!pip`, `%%bash` cells) become `pass` or blank lines (line count unchanged),
and a cell that does not parse on its own is repaired or blanked on its own,
so it cannot hide the other cells' findings. Pure text in, data out: no file
access, no JSON writing (check/documents.py writes fixes back).
"""
from __future__ import annotations

import ast
import json
import re
from pallas_lsp.engine.records import frozen

from pallas_lsp.engine.model import Span
from pallas_lsp.engine.source import parse, parses

NOTEBOOK, MARKDOWN, RST = "notebook", "markdown", "rst"
_SUFFIXES = {".ipynb": NOTEBOOK, ".md": MARKDOWN, ".markdown": MARKDOWN, ".rst": RST}

# Languages whose fenced or directive code is read as Python.
PY_LANGS = frozenset({"python", "py", "python3", "py3", "ipython", "ipython3"})
DOCTEST_LANGS = frozenset({"pycon", "doctest"})
# Cell magics whose body is Python that runs in the user's namespace; any
# other `%%` cell (`%%bash`, `%%timeit`, `%%writefile`) is left out whole.
PYTHON_BODY_MAGICS = frozenset({"time", "capture"})

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_MENTION = re.compile(r"\bline (\d+)(?:, col (\d+))?")


class DocumentError(ValueError):
    """A malformed notebook: one clear message, never a partial program."""


def document_kind(path: str) -> str | None:
    """NOTEBOOK, MARKDOWN or RST by the file's suffix; None for Python."""
    dot = path.rfind(".")
    return _SUFFIXES.get(path[dot:].lower()) if dot >= 0 else None


def split_lines(text: str) -> list[str]:
    """Lines as the engine counts them (\\r\\n, \\r and \\n all end one)."""
    return _LINE_BREAK.split(text)


@frozen
class Cell:
    index: int  # position among the document's cells (notebooks: every cell, markdown too)
    start: int  # the program line of its first line
    lines: tuple[str, ...]  # its source as written
    # Markdown / reStructuredText: per line, the page's line and the column of the cell's column 0.
    doc_lines: tuple[int, ...] | None = None
    doc_cols: tuple[int, ...] | None = None
    error: tuple[int, int, str] | None = None  # (line, col, message): did not parse alone
    neutralised: frozenset[int] = frozenset()  # lines replaced (magics, broken code)

    @property
    def number(self) -> int:
        """1-based, as people count cells."""
        return self.index + 1

    @property
    def end(self) -> int:
        return self.start + len(self.lines)


@frozen
class Position:
    cell: Cell
    line: int  # notebook: in the cell; Markdown / rst: in the page (0-based)
    col: int


@frozen
class Program:
    kind: str
    text: str  # the module the engine analyses
    cells: tuple[Cell, ...]  # the Python cells only
    note: str = ""  # why nothing was taken (a notebook of another language)

    def cell_at(self, line: int) -> Cell | None:
        lo, hi = 0, len(self.cells)
        while lo < hi:  # cells are in program order
            mid = (lo + hi) // 2
            if self.cells[mid].end <= line:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.cells) and self.cells[lo].start <= line:
            return self.cells[lo]
        return None

    def position(self, line: int, col: int) -> Position | None:
        """Where program (line, col) is: in its cell (notebooks) or in the page."""
        cell = self.cell_at(line)
        if cell is None:
            return None
        i = line - cell.start
        if cell.doc_lines is None:
            return Position(cell, i, col)
        return Position(cell, cell.doc_lines[i], col + cell.doc_cols[i])

    def span(self, span: Span, *, strict: bool = False) -> tuple[Cell, Span] | None:
        """A program span in its cell's (notebook) or the page's coordinates.
        Across two cells: the end is cut to the start line's end, unless
        `strict` (fix edits), which then gives None; so does, with `strict`,
        a span over page lines that are not one after the other."""
        a = self.position(span.line, span.col)
        if a is None:
            return None
        b = self.position(span.end_line, span.end_col)
        if b is None or b.cell is not a.cell or (strict and not self._contiguous(a.cell, span)):
            if strict:
                return None
            length = len(self._line(a.cell, span.line))
            end_col = length if a.cell.doc_cols is None else \
                length + a.cell.doc_cols[span.line - a.cell.start]
            return a.cell, Span(a.line, a.col, a.line, max(end_col, a.col), span.path)
        return a.cell, Span(a.line, a.col, b.line, b.col, span.path)

    def relabel(self, text: str) -> str:
        """The engine's texts name program lines (`line 16`, `line 16, col 5`,
        1-based): say where they are in the notebook or page instead."""
        def where(m: re.Match) -> str:
            line = int(m.group(1)) - 1
            col = int(m.group(2)) - 1 if m.group(2) else 0
            pos = self.position(line, col)
            if pos is None:
                return m.group(0)
            cell = f"cell {pos.cell.number}, " if pos.cell.doc_lines is None else ""
            tail = f", col {pos.col + 1}" if m.group(2) else ""
            return f"{cell}line {pos.line + 1}{tail}"
        return _LINE_MENTION.sub(where, text) if "line " in text else text

    @staticmethod
    def _line(cell: Cell, line: int) -> str:
        return cell.lines[line - cell.start]

    @staticmethod
    def _contiguous(cell: Cell, span: Span) -> bool:
        if cell.doc_lines is None:
            return True
        first, last = span.line - cell.start, span.end_line - cell.start
        rows = cell.doc_lines[first:last + 1]
        cols = cell.doc_cols[first:last + 1]
        return all(b == a + 1 for a, b in zip(rows, rows[1:])) and \
            (len(set(cols)) <= 1)


# ---------------------------------------------------------------- programs


def to_program(text: str, kind: str) -> Program:
    """The document's Python as one program. Raises DocumentError for a
    notebook that is not nbformat 4 JSON; Markdown and rst always read."""
    if kind == NOTEBOOK:
        nb = read_notebook(text)
        if nb.language and nb.language.lower() not in PY_LANGS:
            return Program(kind, "", (), note=f"a {nb.language} notebook: not analysed")
        return cells_program((c.index, c.source) for c in nb.cells if c.cell_type == "code")
    elif kind == MARKDOWN:
        raw = markdown_cells(text)
    elif kind == RST:
        raw = rst_cells(text)
    else:
        raise ValueError(f"not a document kind: {kind!r}")
    return _program(kind, raw)


def cells_program(cells, cache: dict | None = None) -> Program:
    """A notebook's code cells, given as (index, source text) in order (an
    editor's notebook: no .ipynb JSON to read), as one program. `cache`
    (a cell's lines joined by "\\n" -> its `python_of`, kept by the caller
    from one version to the next) spares re-reading the unchanged cells."""
    return _program(NOTEBOOK, [(index, split_lines(source), None, None)
                               for index, source in cells], cache)


def _program(kind: str, raw: list[RawCell], cache: dict | None = None) -> Program:
    cells: list[Cell] = []
    program: list[str] = []
    for index, lines, doc_lines, doc_cols in raw:
        # A page's block that does not parse is an illustration (a signature,
        # `def f(...):`): left out whole. A notebook's cell ran: repaired.
        key = "\n".join(lines) if cache is not None else None
        known = cache.get(key) if cache is not None else None
        if known is None:
            known = python_of(lines, repair=kind == NOTEBOOK)
            if cache is not None:
                cache[key] = known
        code, error, changed = known
        cells.append(Cell(index, len(program), tuple(lines),
                          None if doc_lines is None else tuple(doc_lines),
                          None if doc_cols is None else tuple(doc_cols), error,
                          frozenset(changed)))
        program.extend(code)
    return Program(kind, "\n".join(program), tuple(cells))


def python_of(lines: list[str], repair: bool = True
              ) -> tuple[list[str], tuple[int, int, str] | None, set[int]]:
    """A cell's lines as Python that parses on its own, with as many lines:
    magics neutralised; a broken cell repaired as the engine repairs a file
    (with `repair`), else blanked whole. Returns (lines, the syntax error or
    None, the lines changed)."""
    work = list(lines)
    changed: set[int] = set()
    head = next((i for i, t in enumerate(work) if t.strip()), None)
    if head is not None and work[head].lstrip().startswith("%%"):
        name = work[head].lstrip()[2:].split(maxsplit=1)
        changed.add(head)
        work[head] = ""
        if not name or name[0] not in PYTHON_BODY_MAGICS:
            changed.update(i for i, t in enumerate(work) if t)
            return [""] * len(work), None, changed
    text = "\n".join(work)
    if parses(text):
        return work, None, changed
    for i in _statement_starts(work):
        t = work[i]
        timed = _TIMED_LINE.match(t)
        if timed is not None:  # `%time stmt` runs stmt: keep it, in its columns
            work[i] = t[:timed.start(2)] + "pass;".ljust(timed.end(2) - timed.start(2)) \
                + t[timed.end(2):]
            changed.add(i)
        elif _MAGIC_LINE.match(t) or _HELP_LINE.match(t):
            indent = t[:len(t) - len(t.lstrip())]
            work[i] = indent + "pass"
            changed.add(i)
            # `!cmd \` goes on to the next line: IPython hands them all to the shell
            j = i
            while lines[j].endswith("\\") and j + 1 < len(work):
                j += 1
                work[j] = ""
                changed.add(j)
    text = "\n".join(work)
    if parses(text):
        return work, None, changed
    error = _syntax_error(text)
    if error is None:  # only the symbol table objects (`nonlocal` at the top): the engine reads it
        return work, None, changed
    src = parse(text) if repair else None
    for filler in (lambda t: t[:len(t) - len(t.lstrip())] + "pass" if t.strip() else "",
                   lambda t: ""):
        if src is None or not src.blanked:
            break
        trial = [filler(t) if i in src.blanked else t for i, t in enumerate(work)]
        if parses("\n".join(trial)):
            return trial, error, changed | set(src.blanked)
    return [""] * len(work), error, set(range(len(work)))


def _statement_starts(lines: list[str]) -> list[int]:
    """The lines that begin a statement: not inside brackets, a string or
    after a backslash (there `% 3` is Python's modulo). A magic line is not
    scanned: its text is the shell's or IPython's, not Python."""
    starts: list[int] = []
    depth, quote, escaped = 0, "", False
    for n, t in enumerate(lines):
        if depth == 0 and not quote and not escaped:
            starts.append(n)
            if _MAGIC_LINE.match(t) or _HELP_LINE.match(t):
                escaped = t.endswith("\\")  # its continuation lines are the shell's too
                continue
        elif escaped and not quote and depth == 0 and _MAGIC_LINE.match(lines[starts[-1]]):
            escaped = t.endswith("\\")
            continue
        for m in _TOKEN.finditer(t):
            tok = m.group()
            if quote:  # (an escaped character is one token: it never ends the string)
                if tok == quote or (len(quote) == 1 and tok == quote * 3):
                    quote = ""
            elif tok == "#":
                break
            elif tok[0] in "\"'":
                quote = tok
            elif tok in "([{":
                depth += 1
            elif tok in ")]}":
                depth = max(depth - 1, 0)
        if len(quote) == 1:
            quote = ""  # a one-line string ends with its line (or was an error)
        escaped = t.endswith("\\") and not quote
    return starts


# Inside a line: an escaped character, a string quote, a comment, a bracket.
_TOKEN = re.compile(r"""\\.|\"\"\"|'''|["'#()\[\]{}]""")

# A line that starts an IPython magic or shell escape (`x = !ls` too).
_MAGIC_LINE = re.compile(r"^[ \t]*(?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?[%!]")
_TIMED_LINE = re.compile(r"^([ \t]*)(%time(?:it)?[ \t]+)[^\s-]")
_HELP_LINE = re.compile(r"^[ \t]*(?:\?{1,2}[\w.]+|[\w.]+\?{1,2})[ \t]*$")


def _syntax_error(text: str) -> tuple[int, int, str] | None:
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return max((exc.lineno or 1) - 1, 0), max((exc.offset or 1) - 1, 0), exc.msg or str(exc)
    except (ValueError, RecursionError, MemoryError) as exc:
        return 0, 0, str(exc) or type(exc).__name__
    return None


# ---------------------------------------------------------------- notebooks


@frozen
class NotebookCell:
    index: int
    cell_type: str
    source: str  # joined
    span: tuple[int, int]  # the `source` value's offsets in the file's text
    is_list: bool  # written as a list of lines (the usual form) or one string


@frozen
class Notebook:
    cells: tuple[NotebookCell, ...]
    language: str  # from the metadata; "" when not said
    nbformat: int | None


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_scanstring = json.decoder.scanstring


def read_notebook(text: str) -> Notebook:
    """The cells of an nbformat 4 notebook, with where each `source` is in
    the text. One pass over the file: values other than the cells' types and
    sources (outputs, images) are scanned by the C decoder and dropped."""
    try:
        return _Reader(text).notebook()
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not a notebook: invalid JSON at line {exc.lineno} column "
                            f"{exc.colno} ({exc.msg})") from None
    except RecursionError:
        raise DocumentError("not a notebook: nested too deeply") from None


class _Reader:
    def __init__(self, text: str):
        self.s = text[1:] if text.startswith("\ufeff") else text
        self.shift = len(text) - len(self.s)

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()

    def fail(self, what: str, i: int) -> json.JSONDecodeError:
        return json.JSONDecodeError(what, self.s, min(i, len(self.s)))

    def value(self, i: int):
        try:
            return _DECODER.raw_decode(self.s, i)
        except StopIteration:
            raise self.fail("Expecting value", i) from None

    def sequence(self, i: int, close: str, item) -> int:
        """The object or array whose bracket is at i: `item(offset)` reads
        one member or element and returns its end. Returns the end."""
        i = self.ws(i + 1)
        if self.s[i:i + 1] == close:
            return i + 1
        while True:
            i = self.ws(item(i))
            c = self.s[i:i + 1]
            if c == close:
                return i + 1
            if c != ",":
                raise self.fail("Expecting ',' delimiter", i)
            i = self.ws(i + 1)

    def walk(self, i: int, handle) -> int:
        """Walk the object at i, `handle(key, offset)` returning each value's end."""
        s = self.s
        if s[i:i + 1] != "{":
            raise self.fail("Expecting '{'", i)

        def member(at: int) -> int:
            if s[at:at + 1] != '"':
                raise self.fail("Expecting property name enclosed in double quotes", at)
            key, at = _scanstring(s, at + 1)
            at = self.ws(at)
            if s[at:at + 1] != ":":
                raise self.fail("Expecting ':' delimiter", at)
            return handle(key, self.ws(at + 1))

        return self.sequence(i, "}", member)

    def notebook(self) -> Notebook:
        i = self.ws(0)
        if self.s[i:i + 1] != "{":
            if i >= len(self.s):
                raise DocumentError("not a notebook: the file is empty")
            raise DocumentError("not a notebook: the file is not a JSON object")
        found: dict = {}

        def top(key: str, at: int) -> int:
            if key == "cells":
                found["cells"], end = self.cells(at)
                return end
            value, end = self.value(at)
            found[key] = value
            return end

        end = self.walk(i, top)
        if self.ws(end) != len(self.s):
            raise self.fail("Extra data", self.ws(end))
        if "cells" not in found:
            if "worksheets" in found:
                raise DocumentError("not an nbformat 4 notebook (nbformat 3 or older: open "
                                    "and save it in Jupyter to convert it)")
            raise DocumentError("not a notebook: no `cells` list")
        meta = found.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise DocumentError("not a notebook: `metadata` is not an object")
        nbformat = found.get("nbformat")
        if nbformat is not None and (not isinstance(nbformat, int) or nbformat < 4):
            raise DocumentError(f"not an nbformat 4 notebook (nbformat {nbformat!r})")
        return Notebook(tuple(found["cells"]), _language(meta or {}), nbformat)

    def cells(self, i: int) -> tuple[list[NotebookCell], int]:
        s = self.s
        if s[i:i + 1] != "[":
            raise DocumentError("not a notebook: `cells` is not a list")
        out: list[NotebookCell] = []

        def element(at: int) -> int:
            if s[at:at + 1] != "{":
                if s[at:at + 1] and s[at] in "[\"-0123456789tfn":
                    raise DocumentError(f"not a notebook: cell {len(out) + 1} is not an object")
                raise self.fail("Expecting value", at)
            cell, end = self.cell(at, len(out))
            out.append(cell)
            return end

        end = self.sequence(i, "]", element)
        return out, end

    def cell(self, i: int, index: int) -> tuple[NotebookCell, int]:
        got: dict = {}

        def member(key: str, at: int) -> int:
            if key in ("cell_type", "source"):
                value, end = self.value(at)
                got[key] = (value, at + self.shift, end + self.shift)
                return end
            return self.value(at)[1]

        end = self.walk(i, member)
        where = f"not a notebook: cell {index + 1}"
        kind = got.get("cell_type", (None,))[0]
        if not isinstance(kind, str):
            raise DocumentError(f"{where} has no `cell_type`")
        if "source" not in got:
            raise DocumentError(f"{where} has no `source`")
        source, a, b = got["source"]
        if isinstance(source, list) and all(isinstance(t, str) for t in source):
            return NotebookCell(index, kind, "".join(source), (a, b), True), end
        if isinstance(source, str):
            return NotebookCell(index, kind, source, (a, b), False), end
        raise DocumentError(f"{where}: `source` must be a string or a list of strings")


def _language(meta: dict) -> str:
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        part = meta.get(key)
        if isinstance(part, dict) and isinstance(part.get(field), str):
            return part[field]
    return ""


# ---------------------------------------------------------------- Markdown

_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*(.*?)[ \t]*$")
_MYST_LANG = re.compile(r"^\{(code-cell|code-block|code|sourcecode|testcode|testsetup|"
                        r"jupyter-execute|doctest)\}[ \t]*(\S*)")

RawCell = tuple[int, list[str], list[int] | None, list[int] | None]


def markdown_cells(text: str) -> list[RawCell]:
    """Fenced code blocks in Python (```python, ```py, MyST ```{code-cell}
    ipython3, ```pycon / doctest prompts). A fence without a language is
    not taken: it is as often shell, output or pseudo-code. A page with
    `{code-cell}` blocks is a notebook (jupytext, MyST-NB): its program is
    those cells, and its other fences are prose, as in the .ipynb."""
    lines = split_lines(text)
    out: list[RawCell] = []
    python_kernel = _front_matter_kernel(lines) in PY_LANGS | {"python3 (ipykernel)"}
    only_cells = "{code-cell}" in text and any(
        m is not None and m.group(3).startswith("{code-cell}")
        for m in map(_FENCE.match, lines))
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3)
        end = i + 1
        while end < len(lines):
            c = _FENCE.match(lines[end])
            if c is not None and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) \
                    and not c.group(3):
                break
            end += 1
        mode, myst = _fence_mode(info)
        if mode is None and python_kernel and re.fullmatch(r"\{code-cell\}", info):
            mode = "python"  # MyST-NB: a code cell without a language runs in the page's kernel
        if only_cells and not info.startswith("{code-cell}"):
            mode = None
        if mode is not None:
            body, rows, cols = [], [], []
            for n in range(i + 1, end):
                t = lines[n]
                cut = min(indent, len(t) - len(t.lstrip(" ")))
                body.append(t[cut:])
                rows.append(n)
                cols.append(cut)
            if myst:
                _blank_options(body)
            _add_cell(out, mode, body, rows, cols)
        i = end + 1
    return out


def _front_matter_kernel(lines: list[str]) -> str:
    """The kernel language a jupytext / MyST-NB page names in its front
    matter (`kernelspec:` `language:` or `name:`), lower case; "python" when
    it names none (a page of Python docs)."""
    if not lines or lines[0].strip() != "---":
        return "python"
    found = {}
    for line in lines[1:200]:
        if line.strip() == "---":
            break
        m = re.match(r"^[ \t]+(language|name)[ \t]*:[ \t]*(.+?)[ \t]*$", line)
        if m:
            found.setdefault(m.group(1), m.group(2).strip("'\"").lower())
    return found.get("language") or found.get("name") or "python"


def _fence_mode(info: str) -> tuple[str | None, bool]:
    """("python" | "doctest" | None, whether MyST options may lead the body)."""
    m = _MYST_LANG.match(info)
    if m is not None:
        directive, lang = m.group(1), m.group(2).lower()
        if directive == "doctest":
            return "doctest", True
        if directive in ("testcode", "testsetup", "jupyter-execute") and not lang:
            return "python", True
        return ("python" if lang in PY_LANGS else "doctest" if lang in DOCTEST_LANGS
                else None), True
    word = info.split(maxsplit=1)[0].lower().lstrip(".{").rstrip("}") if info else ""
    return ("python" if word in PY_LANGS else "doctest" if word in DOCTEST_LANGS
            else None), False


def _blank_options(body: list[str]) -> None:
    """MyST directive options at the top of a fence: `:tags: [...]` lines or
    a `---` YAML block."""
    if body and body[0].strip() == "---":
        for n in range(1, len(body)):
            if body[n].strip() == "---":
                for k in range(n + 1):
                    body[k] = ""
                return
        return
    for n, t in enumerate(body):
        if not re.match(r"^[ \t]*:[\w-]+:", t):
            return
        body[n] = ""


def _add_cell(out: list[RawCell], mode: str, body: list[str], rows: list[int],
              cols: list[int]) -> None:
    if mode == "python" and _first_code(body).startswith(">>>"):
        mode = "doctest"
    if mode == "doctest":
        body, rows, cols = _doctest(body, rows, cols)
    while body and not body[-1].strip():
        body, rows, cols = body[:-1], rows[:-1], cols[:-1]
    if any(t.strip() for t in body):
        out.append((len(out), body, rows, cols))


def _first_code(body: list[str]) -> str:
    return next((t.lstrip() for t in body if t.strip()), "")


def _doctest(body: list[str], rows: list[int], cols: list[int]):
    """The source of `>>>` examples and their `...` continuations; output
    lines are left out (their page lines are not in the program)."""
    code, crow, ccol = [], [], []
    inside = False
    for t, row, col in zip(body, rows, cols):
        s = t.lstrip()
        indent = len(t) - len(s)
        if s.startswith(">>>") or (inside and (s == "..." or s.startswith("... "))):
            rest = s[3:]  # `>>>` and `...` are both three characters
            skip = 1 if rest.startswith(" ") else 0
            code.append(rest[skip:])
            crow.append(row)
            ccol.append(col + indent + 3 + skip)
            inside = True
        else:
            inside = False
    return code, crow, ccol


# ---------------------------------------------------------------- reStructuredText

_DIRECTIVE = re.compile(r"^([ \t]*)\.\.[ \t]+([\w:-]+)::[ \t]*(\S*)")
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "testcode", "testsetup",
                              "doctest", "jupyter-execute", "ipython", "literalinclude",
                              "highlight", "parsed-literal", "testoutput", "math"})


def rst_cells(text: str) -> list[RawCell]:
    """`.. code-block:: python` / `.. code:: python` / `.. sourcecode::`,
    `.. testcode::`, `.. testsetup::`, `.. jupyter-execute::`, `.. doctest::`
    bodies, and doctest blocks (a paragraph of `>>>` prompts) anywhere else.
    Literal blocks after `::` are taken only when they are doctests: the
    language of a plain literal block is not said."""
    lines = split_lines(text)
    out: list[RawCell] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIRECTIVE.match(line)
        if m is not None and m.group(2).lower() in _CODE_DIRECTIVES:
            name, lang = m.group(2).lower(), m.group(3).lower()
            start, end, indent = _directive_body(lines, i, len(m.group(1)))
            mode = None
            if name in ("code-block", "code", "sourcecode"):
                mode = "python" if lang in PY_LANGS else "doctest" if lang in DOCTEST_LANGS \
                    else None
            elif name in ("testcode", "testsetup", "jupyter-execute"):
                mode = "python"
            elif name == "doctest":
                mode = "doctest"
            if mode is not None and start < end:
                rows = list(range(start, end))
                body = [lines[n][indent:] for n in rows]
                cols = [min(indent, len(lines[n])) for n in rows]
                _add_cell(out, mode, body, rows, cols)
            i = max(end, i + 1)
            continue
        if line.lstrip().startswith(">>>") and (i == 0 or not lines[i - 1].strip()
                                                or lines[i - 1].rstrip().endswith("::")):
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            rows = list(range(i, end))
            _add_cell(out, "doctest", [lines[n] for n in rows], rows, [0] * len(rows))
            i = end
            continue
        i += 1
    return out


def _directive_body(lines: list[str], at: int, indent: int) -> tuple[int, int, int]:
    """(first line, end, indent) of a directive's content: after its options
    (`:linenos:`) and the blank line, every line indented more than it."""
    n = at + 1
    while n < len(lines) and lines[n].strip().startswith(":") and _indent(lines[n]) > indent:
        n += 1
    while n < len(lines) and not lines[n].strip():
        n += 1
    if n >= len(lines) or _indent(lines[n]) <= indent:
        return n, n, 0
    body_indent = _indent(lines[n])
    end = n
    last = n
    while end < len(lines):
        t = lines[end]
        if t.strip():
            if _indent(t) < body_indent:
                break
            last = end
        end += 1
    return n, last + 1, body_indent


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
