"""What `pallas-lsp check` prints: one Row per finding or unchecked file,
rendered in the format asked for (text.py: full, concise; machine.py: json,
json-lines, github, sarif, junit).

Paths are shown relative to the current folder when the file is under it
(else absolute), so the same project reads the same however it was named.
Positions are 1-based; end columns are exclusive, as in the JSON output.
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
    for form in (os.path.abspath(path), os.path.realpath(path)):
        rel = os.path.relpath(form, cwd)
        if not rel.startswith(".." + os.sep) and rel != "..":
            return rel
    return os.path.abspath(path)


def rows_for(checked, problems, config_of=None, unsafe: bool = False) -> list[Row]:
    """Rows of findings (per file, in position order) then of problems."""
    from pallas_lsp.check.fixes import chosen_fix

    rows: list[Row] = []
    for item in checked:
        absolute = os.path.abspath(item.path)
        shown = display_path(item.path)
        cfg = item.config
        for f in item.findings:
            s = f.span
            level = (cfg.level(f.code) if cfg is not None else None) or f.severity.value
            related = []
            for r in f.related:
                rpath = os.path.abspath(r.path) if r.path else absolute
                rshown = display_path(r.path) if r.path else shown
                related.append((Loc(rpath, rshown, r.span.line + 1, r.span.col + 1,
                                    r.span.end_line + 1, r.span.end_col + 1), r.message))
            fix = chosen_fix(f, True)
            rows.append(Row(
                code=f.code, message=f.message, detail=f.detail, severity=level,
                loc=Loc(absolute, shown, s.line + 1, s.col + 1, s.end_line + 1, s.end_col + 1),
                related=related, fix=fix, fixable=fix is not None and (fix.safe or unsafe)))
    for p in problems:
        if p.kind == "missing":
            continue
        rows.append(Row(
            code=PROBLEM_CODES.get(p.kind, "E902"), message=p.message, detail="",
            severity="error",
            loc=Loc(os.path.abspath(p.path), display_path(p.path), p.line, p.column, p.line,
                    p.column)))
    return rows


def render(fmt: str, rows: list[Row], **kw) -> str:
    from pallas_lsp.cli.output import machine, text

    if fmt == "full":
        return text.full(rows, **kw)
    if fmt == "concise":
        return text.concise(rows, **kw)
    return machine.RENDERERS[fmt](rows, **kw)


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
