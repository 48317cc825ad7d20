"""Check files on disk (shared by the CLI and pre-commit): discovery,
decoding, configuration and the engine."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pallas_lsp.config import ProjectConfig, load_project_config
from pallas_lsp.engine import analyze
from pallas_lsp.engine.model import Analysis, Finding
from pallas_lsp.engine.project import Project

_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox",
              ".mypy_cache", ".pytest_cache", "build", "dist", ".eggs"}


@dataclass(frozen=True)
class Problem:
    """A file that could not be checked."""

    path: Path
    kind: str  # missing | unreadable | decode | syntax
    message: str
    line: int = 1


def discover(paths: list[Path]) -> tuple[list[Path], list[Problem]]:
    files, problems = [], []
    for p in paths:
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
                files.extend(Path(root) / n for n in sorted(names) if n.endswith((".py", ".pyi")))
        else:
            problems.append(Problem(p, "missing", "no such file or directory"))
    return files, problems


def read_source(path: Path) -> tuple[str | None, Problem | None]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, Problem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return None, Problem(path, "decode", f"not valid UTF-8 (byte {exc.start}): skipped", line)


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
