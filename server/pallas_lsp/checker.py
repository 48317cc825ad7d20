"""Check files on disk (shared by the CLI and pre-commit): discovery,
decoding, configuration and the engine."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pallas_lsp.config import ProjectConfig, load_project_config
from pallas_lsp.engine import analyze
from pallas_lsp.engine.model import Finding
from pallas_lsp.resolve import ImportResolver

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


def check_paths(paths: list[Path], *, select=None, ignore=None, use_config: bool = True
                ) -> tuple[list[tuple[Path, Finding]], list[Problem]]:
    files, problems = discover(paths)
    results: list[tuple[Path, Finding]] = []
    resolver = ImportResolver(_project_root(paths))
    configs: dict[Path, ProjectConfig] = {}
    for path in files:
        cfg = ProjectConfig()
        if use_config:
            key = path.parent
            if key not in configs:
                configs[key] = load_project_config(key)
            cfg = configs[key]
        cfg = cfg.merged(select=select, ignore=ignore)
        if any(fragment in str(path) for fragment in cfg.exclude):
            continue
        text, problem = read_source(path)
        if problem is not None:
            problems.append(problem)
            continue
        analysis = analyze(text, str(path), resolver=resolver)
        if analysis.internal_error:
            problems.append(Problem(path, "internal", "pallas-lsp could not analyse this file "
                                    f"({analysis.internal_error}); please report it"))
        if analysis.syntax_error:
            line = int(analysis.syntax_error.split(":")[0].split()[-1]) \
                if analysis.syntax_error.startswith("line ") else 1
            problems.append(Problem(path, "syntax", f"syntax error, {analysis.syntax_error} "
                                    f"(the rest of the file was still checked)", line))
        for f in cfg.filter(analysis.findings):
            results.append((path, f))
    return results, problems


def _project_root(paths: list[Path]) -> Path:
    """The folder imports are resolved from: the nearest pyproject.toml's
    folder above the first path, else the current directory."""
    from pallas_lsp.config import find_pyproject

    first = paths[0] if paths else Path.cwd()
    found = find_pyproject(first if first.is_dir() else first.parent) if first.exists() else None
    return found.parent if found else Path.cwd()
