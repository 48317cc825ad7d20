"""What `pallas-lsp check` prints: one Row per finding or unchecked file,
rendered in the format asked for (text.py: full, concise; machine.py: json,
json-lines, github, sarif, junit).

Paths are shown relative to the current folder when the file is under it
(else absolute), so the same project reads the same however it was named.
Positions are 1-based; end columns are exclusive, as in the JSON output.
In a notebook they are in a cell (`cell`, 1-based, counting every cell of
the file, Markdown ones too); in a Markdown or rst page, on the page's lines.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the engine costs more than `rule` or `--help` need
    from pallas_lsp.engine.model import Fix

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")
TEXT_FORMATS = ("full", "concise")

PROBLEM_CODES = {"syntax": "E999", "internal": "E001"}  # everything else: E902


@dataclass(frozen=True)
class Loc:
    path: str  # absolute, for reading the file
    display: str
    line: int
    col: int
    end_line: int
    end_col: int
    cell: int | None = None  # a notebook's cell (1-based): line and columns are in it
    lines: tuple[str, ...] | None = None  # that cell's source lines (for snippets)

    @property
    def where(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.display}:{cell}{self.line}:{self.col}"


@dataclass
class Row:
    code: str
    message: str  # JAX's text (or our title, for checks JAX has no message for)
    detail: str  # our explanation ("" for none)
    severity: str  # error | warning | info | hint
    loc: Loc
    related: list[tuple[Loc, str]] = field(default_factory=list)
    fix: Fix | None = None
    fixable: bool = False  # `--fix` would apply it (safe, or unsafe with --unsafe-fixes)

    @property
    def text(self) -> str:
        return f"{self.message} — {self.detail}" if self.detail else self.message


def display_path(path: str | os.PathLike) -> str:
    """Relative to the current folder when under it, else absolute."""
    cwd = os.getcwd()
    # (the real path only when needed: a realpath is a stat per folder)
    for form in (os.path.abspath(path), None):
        rel = os.path.relpath(os.path.realpath(path) if form is None else form, cwd)
        if not rel.startswith(".." + os.sep) and rel != "..":
            return rel
    return os.path.abspath(path)


def rows_for(checked, problems, config_of=None, unsafe: bool = False) -> list[Row]:
    """Rows of findings (per file, in position order) then of problems.
    Spans in a notebook or page (the engine's program coordinates) are
    moved into its cells, or onto the page's lines."""
    from pallas_lsp.check.fixes import chosen_fix

    documents = {os.path.realpath(item.path): item.document for item in checked
                 if item.document is not None}
    rows: list[Row] = []
    for item in checked:
        absolute = os.path.abspath(item.path)
        shown = display_path(item.path)
        cfg = item.config
        here = os.path.realpath(item.path) if documents else None
        found = []
        for f in item.findings:
            level = (cfg.level(f.code) if cfg is not None else None) or f.severity.value
            related = []
            for r in f.related:
                rpath = os.path.abspath(r.path) if r.path else absolute
                rshown = display_path(r.path) if r.path else shown
                doc = documents.get(os.path.realpath(r.path) if r.path else here) \
                    if documents else None
                related.append((span_loc(rpath, rshown, r.span, doc), r.message))
            fix = chosen_fix(f, True)
            loc = span_loc(absolute, shown, f.span, item.document)
            if fix is not None and item.document is not None:
                fix = _fix_in(fix, item.document)
            detail = item.document.relabel(f.detail) if item.document is not None else f.detail
            found.append(Row(
                code=f.code, message=f.message, detail=detail, severity=level,
                loc=loc, related=related, fix=fix,
                fixable=fix is not None and (fix.safe or unsafe)))
        if item.document is not None:  # in the page's or the cells' order
            found.sort(key=lambda row: (row.loc.cell or 0, row.loc.line, row.loc.col, row.code))
        rows.extend(found)
    for p in problems:
        if p.kind == "missing":
            continue
        rows.append(Row(
            code=PROBLEM_CODES.get(p.kind, "E902"), message=p.message, detail="",
            severity="error",
            loc=Loc(os.path.abspath(p.path), display_path(p.path), p.line, p.column, p.line,
                    p.column, p.cell, _cell_lines(documents, p.path, p.cell))))
    return rows


def _cell_lines(documents: dict, path, number: int | None) -> tuple[str, ...] | None:
    document = documents.get(os.path.realpath(path)) if number is not None else None
    if document is None:
        return None
    return next((c.lines for c in document.cells if c.number == number), None)


def span_loc(path: str, shown: str, span, document) -> Loc:
    """1-based; in a document, in its cell (notebooks) or on the page."""
    if document is not None:
        moved = document.span(span)
        if moved is not None:
            cell, span = moved  # a page's span falls through to the plain Loc
            if cell.doc_lines is None:
                return Loc(path, shown, span.line + 1, span.col + 1, span.end_line + 1,
                           span.end_col + 1, cell.number, cell.lines)
    return Loc(path, shown, span.line + 1, span.col + 1, span.end_line + 1, span.end_col + 1)


def _fix_in(fix: Fix, document) -> Fix | None:
    """The fix with its edits where the row is (None when they leave the cell)."""
    from pallas_lsp.engine.model import Edit
    from pallas_lsp.engine.records import replace

    edits = []
    for e in fix.edits:
        moved = document.span(e.span, strict=True)
        if moved is None:
            return None
        edits.append(Edit(replace(moved[1], path=e.span.path), e.new_text))
    return replace(fix, edits=tuple(edits))


def render(fmt: str, rows: list[Row], **kw) -> str:
    from pallas_lsp.cli.output import machine, text

    if fmt == "full":
        return text.full(rows, **kw)
    if fmt == "concise":
        return text.concise(rows, **kw)
    return machine.RENDERERS[fmt](rows, **kw)


def loc_lines(loc: Loc, cache: dict) -> list[str] | None:
    """The lines a location's numbers count: its cell's, or its file's."""
    return list(loc.lines) if loc.lines is not None else source_lines(loc.path, cache)


def source_lines(path: str, cache: dict) -> list[str] | None:
    """The file's lines (the engine's line model), read once per run;
    `cache` may hold texts that are not on disk (stdin, --diff), by real path."""
    if path not in cache and os.path.realpath(path) in cache:
        path = os.path.realpath(path)
    if path not in cache:
        try:
            with open(path, "rb") as fh:
                data = fh.read(20_000_000)
            text = data.decode("utf-8-sig", errors="replace")
            cache[path] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        except OSError:
            cache[path] = None
    return cache[path]


def uri(path: str) -> str:
    return Path(path).absolute().as_uri()
