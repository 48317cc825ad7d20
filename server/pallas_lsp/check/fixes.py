"""Applying the engine's fixes to files: `check --fix`, `--unsafe-fixes`,
`--diff`, and `--fix` on stdin.

The project is re-analysed after every pass (a fix in a helper changes what
its callers' kernels see, and a fix can make another one possible), at most
MAX_PASSES times. Fixed texts live in memory until the end, so a pass sees
every file as fixed so far and `--diff` writes nothing. A file whose fixed
text would not parse, or that does not parse to begin with, is not touched.

A notebook's or page's findings are in its program's coordinates: each fix
is moved into its cell (notebooks: the cell's source, written back by
notebook_edit without re-serialising the file) or onto the page's lines.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.check.atomic import replace_file
from pallas_lsp.check.checker import Checked, Options, Problem, check_project, read_bytes
from pallas_lsp.check.notebook_edit import changed_cells, replace_sources
from pallas_lsp.engine.cells import (NOTEBOOK, DocumentError, Program, document_kind,
                                     read_notebook, to_program)
from pallas_lsp.engine.model import Edit, Finding, Fix
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.source import cookie_encoding, parse

MAX_PASSES = 4
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the engine's line model (source.parse)


@dataclass
class FileFix:
    path: Path  # as discovered
    real: str
    original: str
    text: str  # fixed so far
    bom: bool = False
    fixed: list[Finding] = field(default_factory=list)  # findings whose fix was applied
    encoding: str | None = None  # a PEP 263 cookie's (None: UTF-8)
    kind: str | None = None  # engine.cells' document kind; None: Python


@dataclass
class FixRun:
    checked: list[Checked]  # the analysis of the fixed project
    problems: list[Problem]
    files: dict[str, FileFix]  # by real path, only files that changed
    skipped: list[str] = field(default_factory=list)  # why some fixes were not applied

    @property
    def fixed_count(self) -> int:
        return sum(len(f.fixed) for f in self.files.values())


def chosen_fix(finding: Finding, unsafe: bool) -> Fix | None:
    """The fix `--fix` applies for a finding: its first safe one, else (with
    `--unsafe-fixes`) its first one."""
    for fix in finding.fixes:
        if fix.safe:
            return fix
    if unsafe and finding.fixes:
        return finding.fixes[0]
    return None


def offsets(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in _LINE_BREAK.finditer(text))
    return starts


def _offset(starts: list[int], text: str, line: int, col: int) -> int | None:
    if line < 0 or line >= len(starts):
        return None
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    body = text[starts[line]:end].rstrip("\r\n")
    if col < 0 or col > len(body):
        return None
    return starts[line] + col


def apply(text: str, findings: list[Finding], real: str, unsafe: bool
          ) -> tuple[str, list[Finding]]:
    """Apply one fix per finding, skipping fixes that overlap one already
    taken (the next pass gets them) and fixes that reach into other files."""
    starts = offsets(text)
    taken: list[tuple[int, int, str]] = []
    applied: list[Finding] = []
    for finding in findings:
        fix = chosen_fix(finding, unsafe)
        if fix is None or not fix.edits:
            continue
        edits = []
        for e in fix.edits:
            if e.span.path and os.path.realpath(e.span.path) != real:
                edits = None
                break
            a = _offset(starts, text, e.span.line, e.span.col)
            b = _offset(starts, text, e.span.end_line, e.span.end_col)
            if a is None or b is None or b < a:
                edits = None
                break
            edits.append((a, b, e.new_text))
        if not edits:
            continue
        if any(a < tb and ta < b or (a == b == ta == tb) for a, b, _ in edits
               for ta, tb, _ in taken):
            continue
        taken.extend(edits)
        applied.append(finding)
    for a, b, new in sorted(taken, key=lambda t: (t[0], t[1]), reverse=True):
        text = text[:a] + new + text[b:]
    return text, applied


def parses(text: str) -> bool:
    """Parses as the engine parses (syntax of a newer Python is not an error)."""
    return parse(text).syntax_error is None


def run(paths: list[Path], options: Options, *, unsafe: bool = False) -> FixRun:
    files: dict[str, FileFix] = {}
    skipped: list[str] = []
    broken: set[str] = set()  # files that do not parse: never touched
    checked, problems = check_project(paths, options=options)
    for _ in range(MAX_PASSES):
        for p in problems:
            if p.kind == "syntax" and p.cell is None:  # a notebook's broken cell stays
                broken.add(os.path.realpath(p.path))    # alone: its other cells are fixed
        changed = False
        for item in checked:
            real = os.path.realpath(item.path)
            if real in broken or not any(chosen_fix(f, unsafe) for f in item.findings):
                continue
            entry = files.get(real) or _load(item.path, real, options)
            if entry is None:
                continue
            if item.document is not None:
                new, applied = apply_document(entry.text, item.document, item.findings, real,
                                              unsafe)
            else:
                new, applied = apply(entry.text, item.findings, real, unsafe)
            if not applied or new == entry.text:
                continue
            if not (document_parses(new, item.document) if item.document is not None
                    else parses(new)):
                skipped.append(f"{item.path}: fixes not applied: the fixed file would not "
                               f"parse (please report it)")
                broken.add(real)
                continue
            entry.text = new
            entry.fixed.extend(applied)
            files[real] = entry
            options.sources[real] = new
            changed = True
        if not changed:
            break
        checked, problems = check_project(paths, options=options)
    return FixRun(checked, problems, {k: v for k, v in files.items() if v.text != v.original},
                  skipped)


def document_parses(text: str, before: Program) -> bool:
    """The fixed document still reads, and no cell broke."""
    try:
        after = to_program(text, before.kind)
    except DocumentError:
        return False
    was = {c.index for c in before.cells if c.error}
    return all(c.index in was for c in after.cells if c.error)


def apply_document(text: str, program: Program, findings: list[Finding], real: str,
                   unsafe: bool) -> tuple[str, list[Finding]]:
    """`apply` for a notebook (per cell, on the cells' sources) or a page
    (on its own lines). A fix whose edits leave one cell, touch a line that
    was neutralised (a magic) or would need re-indenting on the page is
    not applied."""
    by_cell: dict[int, list[Finding]] = {}
    originals: dict[int, Finding] = {}
    for finding in findings:
        fix = chosen_fix(finding, unsafe)
        if fix is None or not fix.edits:
            continue
        moved = _moved_fix(program, fix, real)
        if moved is None:
            continue
        cell, fix = moved
        mapped = replace(finding, fixes=(fix,))
        by_cell.setdefault(cell, []).append(mapped)
        originals[id(mapped)] = finding
    if not by_cell:
        return text, []
    applied: list[Finding] = []
    if program.kind != NOTEBOOK:  # pages: every edit is on the page's own lines
        mapped = [f for group in by_cell.values() for f in group]
        text, done = apply(text, mapped, real, True)
        return text, [originals[id(f)] for f in done]
    try:
        sources = {c.index: c.source for c in read_notebook(text).cells}
        new_sources = {}
        for index, group in by_cell.items():
            new, done = apply(sources[index], group, real, True)
            if done and new != sources[index]:
                new_sources[index] = new
                applied.extend(originals[id(f)] for f in done)
        if not new_sources:
            return text, []
        return replace_sources(text, new_sources), applied
    except (DocumentError, KeyError):
        return text, []


def _moved_fix(program: Program, fix: Fix, real: str) -> tuple[int, Fix] | None:
    """The fix with its edits in its cell's (or the page's) coordinates, and
    the cell's index; None when it cannot be moved there whole."""
    edits, where = [], None
    for e in fix.edits:
        if e.span.path and os.path.realpath(e.span.path) != real:
            return None
        moved = program.span(e.span, strict=True)
        if moved is None:
            return None
        cell, span = moved
        rows = range(e.span.line - cell.start, e.span.end_line - cell.start + 1)
        if where not in (None, cell.index) or cell.error is not None or \
                any(r in cell.neutralised for r in rows):
            return None
        if "\n" in e.new_text and cell.doc_cols is not None and \
                cell.doc_cols[e.span.line - cell.start]:
            return None  # the new lines would need the block's indentation
        where = cell.index
        edits.append(Edit(replace(span, path=""), e.new_text))
    return where, Fix(fix.title, tuple(edits), fix.safe)


def _load(path: Path, real: str, options: Options) -> FileFix | None:
    kind = document_kind(str(path))
    text = options.sources.get(real)
    if text is not None:  # stdin
        return FileFix(path, real, text, text, kind=kind)
    data, problem = read_bytes(path)
    if data is None:
        return None
    bom = data.startswith(b"\xef\xbb\xbf")
    encoding = None if bom or kind is not None else cookie_encoding(data)
    try:
        text = data.decode(encoding or "utf-8-sig")
    except (UnicodeDecodeError, LookupError):
        return None
    return FileFix(path, real, text, text, bom, encoding=encoding, kind=kind)


def write(entry: FileFix) -> None:
    """Replace the file with its fixed text, atomically: a temporary file in
    the same folder, flushed to disk, given the file's permissions (and owner,
    where allowed), then renamed over it. On any failure the file is left as
    it was and OSError says why. A file with several hard links is written in
    place instead (a rename would split it from its other names); a read-only
    file is refused, as writing in place would be."""
    try:
        data = entry.text.encode(entry.encoding or "utf-8")
    except UnicodeEncodeError as exc:  # a fix brought a character the cookie's encoding lacks
        raise OSError(errno.EILSEQ, f"the fixed text cannot be written as {entry.encoding}") from exc
    if entry.bom:
        data = b"\xef\xbb\xbf" + data
    real = entry.real
    st = os.stat(real)
    if not os.access(real, os.W_OK):
        raise PermissionError(errno.EACCES, "the file is read-only", real)
    if st.st_nlink > 1:
        with open(real, "r+b") as fh:
            fh.write(data)
            fh.truncate()
        return

    def finish(fd: int, tmp: str) -> None:
        os.fsync(fd)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass  # not allowed: the file becomes the user's, as an editor's save does

    replace_file(real, data, prefix=f".{os.path.basename(real)}.", suffix=".pallas-lsp-fix",
                 finish=finish)


def write_all(run: FixRun, options: Options) -> list[str]:
    """Write every fixed file; a file that cannot be written keeps its text and
    leaves the run (its fixes are not counted, and `options` reads it from disk
    again). Returns one line per failure."""
    failures = []
    for real, entry in list(run.files.items()):
        try:
            write(entry)
        except OSError as exc:
            failures.append(f"cannot write the fixes to {entry.path}: "
                            f"{exc.strerror or exc} (the file is unchanged)")
            del run.files[real]
            options.sources.pop(real, None)
    return failures


def unified_diff(entry: FileFix, label: str) -> str:
    """A notebook's diff is one per changed cell, of its source (the JSON
    around it does not change), labelled `path:cell N`."""
    if entry.kind == NOTEBOOK:
        return "".join(_diff(old, new, f"{label}:cell {index + 1}")
                       for index, old, new in changed_cells(entry.original, entry.text))
    return _diff(entry.original, entry.text, label)


def _diff(original: str, text: str, label: str) -> str:
    import difflib  # --diff only
    before = original.splitlines(keepends=True)
    after = text.splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, fromfile=f"a/{label}", tofile=f"b/{label}"))
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of "
                   "file\n" for line in lines)
