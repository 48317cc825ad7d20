"""Check files on disk (shared by the CLI and pre-commit): discovery,
decoding, configuration and the engine."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pallas_lsp.config import ProjectConfig, load_project_config
from pallas_lsp.engine import analyze
from pallas_lsp.engine.analyze import MAX_BYTES
from pallas_lsp.engine.model import Analysis, Finding
from pallas_lsp.engine.project import Project

_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox",
              ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs"}


@dataclass(frozen=True)
class Problem:
    """A file that could not be checked."""

    path: Path
    kind: str  # missing | unreadable | too-large | decode | syntax | internal
    message: str
    line: int = 1


def discover(paths: list[Path]) -> tuple[list[Path], list[Problem]]:
    """The .py/.pyi files under `paths`, in a stable order. Only regular
    files (symbolic links to them too) are taken; FIFOs, devices, sockets and
    broken links become problems. The walk keeps its own stack, so a deep
    tree cannot exhaust Python's recursion limit, and it does not follow
    symbolic links to folders."""
    files: list[Path] = []
    problems: list[Problem] = []
    for p in paths:
        try:
            st = p.stat()
        except OSError as exc:
            if p.is_symlink():
                problems.append(Problem(p, "unreadable", "broken symbolic link: skipped"))
            elif isinstance(exc, FileNotFoundError):
                problems.append(Problem(p, "missing", "no such file or directory"))
            else:
                problems.append(Problem(p, "unreadable", f"cannot read: {exc.strerror or exc}"))
            continue
        if stat.S_ISREG(st.st_mode):
            files.append(p)
        elif stat.S_ISDIR(st.st_mode):
            _walk(p, files, problems)
        else:
            problems.append(_special(p, st.st_mode))
    return files, problems


def _walk(top: Path, files: list[Path], problems: list[Problem]) -> None:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(Problem(folder, "unreadable",
                                    f"cannot read this folder: {exc.strerror or exc}"))
            continue
        subdirs = []
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS and not entry.name.endswith(".egg-info"):
                        subdirs.append(path)
                    continue
                if not entry.name.endswith((".py", ".pyi")):
                    continue
                mode = entry.stat().st_mode  # follows a link: its target is what is read
            except OSError as exc:
                problems.append(Problem(path, "unreadable", "broken symbolic link: skipped"
                                        if entry.is_symlink() else
                                        f"cannot read: {exc.strerror or exc}"))
                continue
            if stat.S_ISREG(mode):
                files.append(path)
            elif not stat.S_ISDIR(mode):  # a link to a folder is not followed
                problems.append(_special(path, mode))
        stack.extend(reversed(subdirs))  # depth first, in name order, as os.walk did


def _special(path: Path, mode: int) -> Problem:
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a special file")
    return Problem(path, "unreadable", f"not a regular file ({kind}): skipped")


# The engine analyses at most MAX_BYTES code points; reading stops a little
# beyond what could still decode to that many (UTF-8 needs at most 4 bytes each).
_READ_LIMIT = 4 * MAX_BYTES + 4


def read_source(path: Path) -> tuple[str | None, Problem | None]:
    """The text of a regular file of at most MAX_BYTES code points. Opened
    without blocking (a FIFO that nobody writes must not hang the check) and
    checked on the open descriptor, then read up to a limit (a link to
    /dev/zero must not fill the memory)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, Problem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, _special(path, st.st_mode)
        chunks, size = [], 0
        while size <= _READ_LIMIT:
            chunk = os.read(fd, min(1 << 20, _READ_LIMIT + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, Problem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if size > _READ_LIMIT:
        return None, _too_large(path, f"more than {_READ_LIMIT:,} bytes")
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return None, Problem(path, "decode", f"not valid UTF-8 (byte {exc.start}): skipped", line)
    if len(text) > MAX_BYTES:
        return None, _too_large(path, f"{len(text):,} characters")
    return text, None


def _too_large(path: Path, size: str) -> Problem:
    return Problem(path, "too-large", f"file too large to check ({size}; pallas-lsp analyses "
                   f"at most {MAX_BYTES:,} characters): skipped")


@dataclass
class Checked:
    """One checked file: its analysis and the findings to report there."""

    path: Path
    analysis: Analysis | None
    findings: list[Finding]


# Callers outside the checked paths analysed to see how a checked helper
# module is used (nearest importers first).
MAX_EXTRA_CALLERS = 32


def check_project(paths: list[Path], *, select=None, ignore=None, use_config: bool = True,
                  coverage: bool = False) -> tuple[list[Checked], list[Problem]]:
    """Analyse the files under `paths` as one project: kernels launched in
    one file are followed into helpers in others, and a helper module gets
    the findings its callers' kernels reach in it (even when those callers
    are not among `paths`)."""
    files, problems = discover(paths)
    root, is_project = _project_root(paths)
    project = Project([str(root)])
    configs: dict[Path, ProjectConfig] = {}

    def config_for(path: Path) -> ProjectConfig:
        cfg = ProjectConfig()
        if use_config:
            key = path.parent
            if key not in configs:
                configs[key] = load_project_config(key)
            cfg = configs[key]
        return cfg.merged(select=select, ignore=ignore)

    checked: dict[str, Checked] = {}
    foreign: dict[str, list[Finding]] = {}
    reach: dict[str, dict] = {}  # coverage of a file's sites seen from other files
    for path in files:
        cfg = config_for(path)
        if any(fragment in str(path) for fragment in cfg.exclude):
            continue
        text, problem = read_source(path)
        if problem is not None:
            problems.append(problem)
            continue
        analysis = analyze(text, str(path), project=project, coverage=coverage)
        _note_problems(path, analysis, problems)
        checked[os.path.realpath(path)] = Checked(path, analysis, list(analysis.findings))
        for other, found in analysis.foreign.items():
            foreign.setdefault(other, []).extend(found)
        _note_reach(reach, analysis)
    _analyse_outside_callers(project, root, is_project, checked, foreign, reach, coverage)
    for real, item in checked.items():
        extra = foreign.get(real, [])
        if extra:
            seen = {(f.code, f.span) for f in item.findings}
            for f in extra:
                if (f.code, f.span) not in seen:
                    seen.add((f.code, f.span))
                    item.findings.append(f)
            item.findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
        item.findings = config_for(item.path).filter(item.findings)
        if coverage and item.analysis is not None and item.analysis.coverage is not None:
            _apply_reach(item.analysis.coverage, reach.get(real, {}))
    return list(checked.values()), problems


def _note_reach(reach: dict[str, dict], analysis: Analysis) -> None:
    cov = analysis.coverage
    if cov is None:
        return
    for path, sites in cov.foreign.items():
        mine = reach.setdefault(path, {})
        for key, val in sites.items():
            if key not in mine or (val[0] and not mine[key][0]):
                mine[key] = val


def _apply_reach(cov, seen: dict) -> None:
    """A helper's DMA sites reached through other files' kernels count."""
    for site in cov.sites:
        hit = seen.get((site.line, site.col))
        if hit is None or (site.reached and (site.known or not hit[0])):
            continue
        site.reached = True
        site.known = hit[0]
        site.unknown = list(hit[1])
        site.reason = "" if hit[0] else ("reached from another file's kernel, but the engine "
                                         "could not tell what " + ", ".join(
                                             f"`{r}`" for r in hit[1]) + " is")


def _analyse_outside_callers(project: Project, root: Path, is_project: bool,
                             checked: dict[str, Checked],
                             foreign: dict[str, list[Finding]], reach: dict,
                             coverage: bool) -> None:
    """Files outside the checked set that import a checked file: analyse
    them too (their findings are not reported, only what they reach in the
    checked files)."""
    if not checked or not root.is_dir():
        return
    if is_project:
        project.index([str(root)])
    else:  # a loose folder (no pyproject.toml, no package): its own scripts only
        project.index([str(p) for p in root.glob("*.py")])
    extra: list[str] = []
    for real in checked:
        for caller in project.importers(real, limit=MAX_EXTRA_CALLERS):
            if caller not in checked and caller not in extra:
                extra.append(caller)
    for caller in extra[:MAX_EXTRA_CALLERS]:
        text = project.text(caller)
        if text is None:
            continue
        analysis = analyze(text, caller, project=project, coverage=coverage)
        for other, found in analysis.foreign.items():
            if other in checked:
                foreign.setdefault(other, []).extend(found)
        _note_reach(reach, analysis)


def _note_problems(path: Path, analysis: Analysis, problems: list[Problem]) -> None:
    if analysis.internal_error:
        problems.append(Problem(path, "internal", "pallas-lsp could not analyse this file "
                                f"({analysis.internal_error}); please report it"))
    if analysis.syntax_error:
        line = int(analysis.syntax_error.split(":")[0].split()[-1]) \
            if analysis.syntax_error.startswith("line ") else 1
        problems.append(Problem(path, "syntax", f"syntax error, {analysis.syntax_error} "
                                f"(the rest of the file was still checked)", line))


def check_paths(paths: list[Path], *, select=None, ignore=None, use_config: bool = True
                ) -> tuple[list[tuple[Path, Finding]], list[Problem]]:
    checked, problems = check_project(paths, select=select, ignore=ignore,
                                      use_config=use_config)
    results = [(item.path, f) for item in checked for f in item.findings]
    return results, problems


def _project_root(paths: list[Path]) -> tuple[Path, bool]:
    """The folder imports are resolved from and callers are looked for in:
    the nearest pyproject.toml's folder above the first path, else the
    folder above the outermost package around it, else the folder given
    (or the file's folder). The flag says whether it is a project or package
    (whose whole tree is indexed) rather than a loose folder."""
    from pallas_lsp.config import find_pyproject

    first = (paths[0] if paths else Path.cwd()).absolute()
    if not first.exists():
        return Path.cwd(), False
    start = first if first.is_dir() else first.parent
    found = find_pyproject(start)
    if found is not None:
        return found.parent, True
    top = start
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return top, top != start or first.is_dir()
