"""gitignore-style path patterns, for `exclude`, `per-file-ignores` and
.gitignore files.

A pattern without a slash (`build`, `*_test.py`) matches a file or folder of
that name at any depth; one with a slash (`kernels/gen/`, `/setup.py`,
`src/**/fixtures`) is anchored to its base folder (the project root, or the
folder of the .gitignore). A trailing slash matches folders only; `!` re-includes.

Matching is per entry: `match(path)` looks at the path itself, not its
parents. Walks prune excluded folders, so their contents are never seen;
`match_or_parents` is for paths that were not found by a walk (named on the
command line, opened in an editor).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    text: str  # as written
    regex: re.Pattern
    negate: bool
    dir_only: bool
    anchored: bool = False  # relative to the base folder (it has a slash)


def compile_pattern(text: str) -> Pattern | None:
    """None for a blank line or a comment (as in a .gitignore)."""
    p = text.rstrip("\n")
    if not p.strip() or p.startswith("#"):
        return None
    if not p.endswith("\\ "):
        p = p.rstrip(" ")
    negate = p.startswith("!")
    if negate:
        p = p[1:]
    elif p.startswith(("\\!", "\\#")):
        p = p[1:]
    dir_only = p.endswith("/")
    p = p.rstrip("/")
    if not p:
        return None
    anchored = "/" in p
    p = p.lstrip("/")
    body = _translate(p)
    regex = re.compile(body if anchored else f"(?:.*/)?{body}", re.DOTALL)
    return Pattern(text, regex, negate, dir_only, anchored)


def _translate(p: str) -> str:
    out: list[str] = []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "*":
            if p.startswith("**", i) and (i == 0 or p[i - 1] == "/") and \
                    (i + 2 == n or p[i + 2] == "/"):
                if i + 2 == n:  # `dir/**`: everything inside
                    out.append(".*")
                    i += 2
                else:  # `**/`: zero or more folders
                    out.append("(?:.*/)?")
                    i += 3
                continue
            while i < n and p[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and p[j] in "!^":
                j += 1
            if j < n and p[j] == "]":
                j += 1
            while j < n and p[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal `[`
                out.append(re.escape(c))
            else:
                inner = p[i + 1:j]
                if inner[:1] in ("!", "^"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(p[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class PatternSet:
    """Patterns relative to one base folder; the last one that matches wins
    (so `!keep.py` after `*.py` keeps it)."""

    def __init__(self, patterns, base: str):
        self.base = os.path.abspath(base)
        compiled = []
        for text in patterns:
            pat = text if isinstance(text, Pattern) else compile_pattern(text)
            if pat is not None:
                compiled.append(pat)
        self.patterns: tuple[Pattern, ...] = tuple(compiled)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def relative(self, path: str) -> str | None:
        """`path` relative to the base, with forward slashes; None outside it.
        The base is a resolved path (where the pyproject.toml was found), so a
        path typed through a symbolic link is resolved before giving up."""
        for form in (os.path.abspath(path), None):  # the real path only when needed
            rel = os.path.relpath(os.path.realpath(path) if form is None else form, self.base)
            if not (rel in (".", "..") or rel.startswith(".." + os.sep) or os.path.isabs(rel)):
                return rel.replace(os.sep, "/")
        return None

    def decide(self, path: str, is_dir: bool) -> Pattern | None:
        """The last pattern matching the path itself (a negated one means
        "included again"), or None. Outside the base folder only the patterns
        without a slash apply (a name matches at any depth)."""
        rel = self.relative(path)
        if rel is None:
            return self._decide(os.path.abspath(path).replace(os.sep, "/").lstrip("/"),
                                is_dir, outside=True)
        return self._decide(rel, is_dir, outside=False)

    def _decide(self, rel: str, is_dir: bool, outside: bool) -> Pattern | None:
        hit = None
        for pat in self.patterns:
            if (pat.dir_only and not is_dir) or (outside and pat.anchored):
                continue
            if pat.regex.fullmatch(rel):
                hit = pat
        return hit

    def match(self, path: str, is_dir: bool) -> Pattern | None:
        hit = self.decide(path, is_dir)
        return hit if hit is not None and not hit.negate else None

    def match_or_parents(self, path: str, is_dir: bool = False) -> Pattern | None:
        """The path, or a folder above it (up to the base), is matched."""
        rel = self.relative(path)
        outside = rel is None
        if outside:
            rel = os.path.abspath(path).replace(os.sep, "/").lstrip("/")
        parts = rel.split("/")
        for n in range(len(parts), 0, -1):
            hit = self._decide("/".join(parts[:n]), is_dir if n == len(parts) else True,
                               outside)
            if hit is not None and not hit.negate:
                return hit
        return None


def find_git_root(start: str) -> str | None:
    """The work tree that contains `start` (a folder with `.git`), if any."""
    d = os.path.abspath(start)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


class GitIgnore:
    """The .gitignore files of a git work tree (read lazily, per folder) and
    its .git/info/exclude. Outside a git work tree nothing is ignored, as
    with ruff and git itself."""

    def __init__(self, git_root: str):
        self.root = os.path.abspath(git_root)
        self._sets: dict[str, PatternSet | None] = {}
        self._info = self._read(os.path.join(self.root, ".git", "info", "exclude"), self.root)

    @staticmethod
    def _read(file: str, base: str) -> PatternSet | None:
        try:
            with open(file, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            return None
        found = PatternSet(lines, base)
        return found if found else None

    def _set(self, folder: str) -> PatternSet | None:
        if folder not in self._sets:
            self._sets[folder] = self._read(os.path.join(folder, ".gitignore"), folder)
        return self._sets[folder]

    def ignored(self, path: str, is_dir: bool) -> Pattern | None:
        """Deeper .gitignore files take precedence; within one, the last match."""
        path = os.path.abspath(path)
        folder = os.path.dirname(path)
        chain = []
        while True:
            chain.append(folder)
            if folder == self.root or os.path.dirname(folder) == folder:
                break
            folder = os.path.dirname(folder)
        if chain[-1] != self.root:
            return None  # not in this work tree
        for folder in chain:
            found = self._set(folder)
            if found is not None:
                hit = found.decide(path, is_dir)
                if hit is not None:
                    return None if hit.negate else hit
        if self._info is not None:
            hit = self._info.decide(path, is_dir)
            if hit is not None and not hit.negate:
                return hit
        return None
