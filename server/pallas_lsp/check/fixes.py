"""Applying the engine's fixes to files: `check --fix`, `--unsafe-fixes`,
`--diff`, and `--fix` on stdin.

The project is re-analysed after every pass (a fix in a helper changes what
its callers' kernels see, and a fix can make another one possible), at most
MAX_PASSES times. Fixed texts live in memory until the end, so a pass sees
every file as fixed so far and `--diff` writes nothing. A file whose fixed
text would not parse, or that does not parse to begin with, is not touched.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.check.checker import Checked, Options, Problem, check_project, read_bytes
from pallas_lsp.engine.model import Finding, Fix
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
            if p.kind == "syntax":
                broken.add(os.path.realpath(p.path))
        changed = False
        for item in checked:
            real = os.path.realpath(item.path)
            if real in broken or not any(chosen_fix(f, unsafe) for f in item.findings):
                continue
            entry = files.get(real) or _load(item.path, real, options)
            if entry is None:
                continue
            new, applied = apply(entry.text, item.findings, real, unsafe)
            if not applied or new == entry.text:
                continue
            if not parses(new):
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


def _load(path: Path, real: str, options: Options) -> FileFix | None:
    text = options.sources.get(real)
    if text is not None:  # stdin
        return FileFix(path, real, text, text)
    data, problem = read_bytes(path)
    if data is None:
        return None
    bom = data.startswith(b"\xef\xbb\xbf")
    encoding = None if bom else cookie_encoding(data)
    try:
        text = data.decode(encoding or "utf-8-sig")
    except (UnicodeDecodeError, LookupError):
        return None
    return FileFix(path, real, text, text, bom, encoding=encoding)


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
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".pallas-lsp-fix",
                               dir=os.path.dirname(real))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass  # not allowed: the file becomes the user's, as an editor's save does
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
    import difflib  # --diff only
    before = entry.original.splitlines(keepends=True)
    after = entry.text.splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, fromfile=f"a/{label}", tofile=f"b/{label}"))
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of "
                   "file\n" for line in lines)
