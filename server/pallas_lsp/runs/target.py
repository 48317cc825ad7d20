"""What to run: `path`, `path::test_name` or any pytest node id."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


class RunSpecError(ValueError):
    """A run cannot be set up as asked (bad target, profile, option). The
    message is meant for the user; the CLI exits 2."""


class TargetError(RunSpecError):
    pass


_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", ".git")
_TEST_NAME = re.compile(r"(^test_.*\.py$)|(^.*_test\.py$)")
_TEST_DEF = re.compile(r"^(def|async def|class) (test_|Test)", re.M)


@dataclass(frozen=True)
class Target:
    path: Path  # absolute file or folder
    test: str | None  # the part after the first "::" of a node id, if any
    kind: str  # "pytest" | "script" | "notebook" (a .ipynb file, whatever `kind` asked)

    def relpath(self, root: Path) -> str:
        """The path relative to `root`, '/'-separated ('.' for the root itself)."""
        rel = os.path.relpath(self.path, root)
        return rel.replace(os.sep, "/")

    def nodeid(self, root: Path) -> str:
        rel = self.relpath(root)
        return f"{rel}::{self.test}" if self.test else rel

    def test_function(self) -> str | None:
        """`test_x` for `f.py::test_x[1]` or `f.py::TestA::test_x`."""
        if not self.test:
            return None
        return self.test.split("[")[0].split("::")[-1] or None


def parse_target(text: str, cwd: str | os.PathLike | None = None, kind: str = "auto") -> Target:
    """`path`, `path::test` or a node id (`path::Class::test[param]`). A path is
    relative to `cwd`. kind: auto | pytest | script."""
    if kind not in ("auto", "pytest", "script"):
        raise TargetError(f"unknown target kind {kind!r} (auto, pytest or script)")
    if not text or "\0" in text:
        raise TargetError("empty target")
    base = Path(cwd) if cwd is not None else Path.cwd()
    path_text, test = text, None
    if not (base / text).exists():
        # split at the first "::" whose prefix is an existing path
        start = 0
        while True:
            i = text.find("::", start)
            if i < 0:
                break
            if (base / text[:i]).exists():
                path_text, test = text[:i], text[i + 2:] or None
                break
            start = i + 2
    path = Path(os.path.abspath(base / path_text))
    if not path.exists():
        raise TargetError(f"{path_text}: no such file or folder")
    if path.suffix.lower() == ".ipynb" and path.is_file():
        if test:
            raise TargetError(f"{text}: a notebook target cannot name a test")
        if kind == "pytest":
            raise TargetError(f"{path_text}: a notebook is not a pytest file")
        return Target(path=path, test=None, kind="notebook")
    if kind == "auto":
        kind = _guess_kind(path, test)
    if kind == "script":
        if test:
            raise TargetError(f"{text}: a script target cannot name a test (use a test file)")
        if not path.is_file():
            raise TargetError(f"{path_text}: a script target must be a file")
    return Target(path=path, test=test, kind=kind)


def _guess_kind(path: Path, test: str | None) -> str:
    if test or path.is_dir() or _TEST_NAME.match(path.name):
        return "pytest"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "script"
    if _TEST_DEF.search(text) and "__main__" not in text:
        return "pytest"
    return "script"


def find_root(path: Path) -> Path:
    """The nearest folder above `path` with a project marker, else its folder."""
    start = path if path.is_dir() else path.parent
    for d in [start, *start.parents]:
        if any((d / m).exists() for m in _ROOT_MARKERS):
            return d
    return start


def test_def_line(path: Path, name: str | None) -> int | None:
    """0-based line of `def name` in `path` (for diagnostics without a frame)."""
    if not name or not path.is_file():
        return None
    pat = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(")
    try:
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            if pat.match(line):
                return i
    except OSError:
        return None
    return None
