"""The user's workspace as the engine sees it: which file a module name
denotes, each file's parsed source (cached per text), and who imports whom.

Resolution is our own, from the file system, the way Python's import system
would find the user's modules: relative imports from the importing file's
package, absolute ones from the importing file's folder (a script's
`sys.path[0]`), from the root of its package tree, and from the workspace
roots (and their `src/`). Installed libraries are not the user's code and
are never followed, except when the importing file is itself inside the same
library (someone checking an installed package on purpose).

Nothing here imports jax or jedi, and nothing runs user code.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from typing import Callable, Iterable

from pallas_lsp.engine.source import Source, parse

_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules",
                       ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build",
                       "dist", ".eggs"})
MAX_FILE_BYTES = 5_000_000  # bigger files are generated code; not indexed
MAX_INDEX_FILES = 20_000
_SOURCE_CACHE_LIMIT = 2_000

# `from .a.b import (x, y)` / `import a.b as c, d`; parenthesised lists may span lines.
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)


def is_library(path: str) -> bool:
    return any(m in path for m in _LIBRARY_MARKERS)


def _library_root(path: str) -> str | None:
    for m in _LIBRARY_MARKERS:
        i = path.find(m)
        if i >= 0:
            return path[:i + len(m)]
    return None


def _read_disk(path: str) -> str | None:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None


def _tag(src: Source) -> Source:
    """Mark every node with the source it belongs to, so that a finding on a
    node reached from another file's analysis knows its own file."""
    import ast
    for node in ast.walk(src.tree):
        node._pl_src = src  # type: ignore[attr-defined]
    return src


class Project:
    """Module resolution and a shared cache of parsed sources.

    `overlay(path) -> text | None` gives editor buffers precedence over the
    disk. Thread-safe: the server parses on a background thread while the
    edit path reads only what is already cached (`parse=False`)."""

    def __init__(self, roots: Iterable[str] = (), overlay: Callable[[str], str | None] | None = None):
        self.roots = [os.path.realpath(r) for r in roots if r]
        self._overlay = overlay
        self._sources: dict[str, tuple[bytes, Source]] = {}
        self._isfile: dict[str, bool] = {}
        self._resolved: dict[tuple, str | None] = {}
        self._lock = threading.Lock()
        self.imports: dict[str, set[str]] = {}  # file -> files it imports (the index)
        self._importers: dict[str, set[str]] | None = None

    # ------------------------------------------------------------ sources

    def text(self, path: str) -> str | None:
        if self._overlay is not None:
            text = self._overlay(path)
            if text is not None:
                return text
        return _read_disk(path)

    def source(self, path: str, *, parse_missing: bool = True) -> Source | None:
        """The parsed source of `path` (its current text). With
        `parse_missing=False`, only a source already parsed for the current
        text is returned (never parses: used on the edit path)."""
        text = self.text(path)
        if text is None:
            return None
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            hit = self._sources.get(path)
        if hit is not None and hit[0] == digest:
            return hit[1]
        if not parse_missing:
            return None
        src = parse(text)
        src.path = path
        _tag(src)
        with self._lock:
            if len(self._sources) >= _SOURCE_CACHE_LIMIT:
                self._sources.clear()
            self._sources[path] = (digest, src)
        return src

    def forget(self, path: str) -> None:
        with self._lock:
            self._sources.pop(path, None)
            self._isfile.clear()
            self._resolved.clear()

    # ------------------------------------------------------------ resolution

    def _file(self, path: str) -> bool:
        hit = self._isfile.get(path)
        if hit is None:
            hit = os.path.isfile(path) or (self._overlay is not None
                                            and self._overlay(path) is not None)
            self._isfile[path] = hit
        return hit

    def _find_in(self, base: str, parts: list[str]) -> str | None:
        if not parts:
            init = os.path.join(base, "__init__.py")
            return init if self._file(init) else None
        stem = os.path.join(base, *parts)
        for cand in (stem + ".py", os.path.join(stem, "__init__.py"), stem + ".pyi"):
            if self._file(cand):
                return cand
        return None

    def resolve(self, importing: str | None, module: str, level: int = 0) -> str | None:
        """The file of `module` as imported from `importing` (None when it is
        not the user's code or cannot be found)."""
        here = os.path.dirname(os.path.realpath(importing)) if importing else None
        key = (here, module, level)
        with self._lock:
            if key in self._resolved:
                return self._resolved[key]
        found = self._resolve(here, module, level)
        if found is not None:
            found = os.path.realpath(found)
            lib = _library_root(found)
            if lib is not None and not (here and (here + os.sep).startswith(lib)):
                found = None  # an installed library, not the user's helper
        with self._lock:
            self._resolved[key] = found
        return found

    def _resolve(self, here: str | None, module: str, level: int) -> str | None:
        parts = [p for p in module.split(".") if p] if module else []
        if level:
            if here is None:
                return None
            base = here
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return self._find_in(base, parts)
        if not parts:
            return None
        for base in self._bases(here):
            found = self._find_in(base, parts)
            if found is not None:
                return found
        return None

    def _bases(self, here: str | None) -> list[str]:
        bases: list[str] = []
        if here:
            bases.append(here)
            top = here  # the folder above the outermost package around `here`
            while os.path.isfile(os.path.join(top, "__init__.py")):
                parent = os.path.dirname(top)
                if parent == top:
                    break
                top = parent
            bases.append(top)
        for root in self.roots:
            bases.extend((root, os.path.join(root, "src")))
        return list(dict.fromkeys(bases))

    def submodule(self, package_file: str, name: str) -> str | None:
        """`from pkg import mod` where `mod` is a module of package `pkg`."""
        if os.path.basename(package_file) != "__init__.py":
            return None
        return self._find_in(os.path.dirname(package_file), [name])

    # ------------------------------------------------------------ the index

    def index(self, paths: Iterable[str] | None = None) -> int:
        """Read every Python file under `paths` (default: the roots) and
        record what each imports. Cheap: a scan of import lines, no parse.
        Returns the number of files indexed."""
        files = list(iter_python_files(paths if paths is not None else self.roots))
        for path in files:
            self.update(path)
        return len(files)

    def update(self, path: str, text: str | None = None) -> None:
        """(Re-)index one file, e.g. after an edit or a save."""
        path = os.path.realpath(path)
        if text is None:
            text = self.text(path)
        deps = set(self.scan_imports(path, text)) if text is not None else set()
        with self._lock:
            self.imports[path] = deps
            self._importers = None

    def remove(self, path: str) -> None:
        with self._lock:
            self.imports.pop(os.path.realpath(path), None)
            self._importers = None

    def scan_imports(self, path: str, text: str) -> Iterable[str]:
        """Files of the user's code that `text` imports (over-approximated:
        an import inside a function counts too)."""
        if "import" not in text:
            return
        for m in _FROM.finditer(text):
            dots, module, names = m.group(1), m.group(2), m.group(3)
            target = self.resolve(path, module, len(dots))
            if target is None:
                continue
            yield target
            for name in re.findall(r"[A-Za-z_]\w*", names.split(" as ")[0] if "(" not in names
                                   else names):
                sub = self.submodule(target, name)
                if sub is not None:
                    yield os.path.realpath(sub)
        for m in _IMPORT.finditer(text):
            for part in m.group(1).split(","):
                name = part.strip().split(" as ")[0].strip()
                if name and re.fullmatch(r"[\w.]+", name):
                    target = self.resolve(path, name, 0)
                    if target is not None:
                        yield target

    def importers(self, path: str, limit: int = 32) -> list[str]:
        """Files that import `path`, directly or through other modules,
        nearest first (at most `limit`)."""
        with self._lock:
            if self._importers is None:
                rev: dict[str, set[str]] = {}
                for src, deps in self.imports.items():
                    for d in deps:
                        rev.setdefault(d, set()).add(src)
                self._importers = rev
            rev = self._importers
        path = os.path.realpath(path)
        seen, order, frontier = {path}, [], [path]
        while frontier and len(order) < limit:
            nxt = []
            for p in frontier:
                for q in sorted(rev.get(p, ())):
                    if q not in seen:
                        seen.add(q)
                        order.append(q)
                        nxt.append(q)
            frontier = nxt
        return order[:limit]


def iter_python_files(paths: Iterable[str]) -> Iterable[str]:
    """Regular `.py` files under `paths`, skipping tool and VCS folders;
    never follows directory symlinks (no cycles) and never recurses."""
    count = 0
    for top in paths:
        top = os.path.realpath(top)
        if os.path.isfile(top):
            if top.endswith((".py", ".pyi")):
                yield top
            continue
        stack = [top]
        while stack:
            d = stack.pop()
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name not in SKIP_DIRS and not e.name.endswith(".egg-info"):
                            subdirs.append(e.path)
                    elif e.name.endswith(".py") and e.is_file(follow_symlinks=False):
                        count += 1
                        if count > MAX_INDEX_FILES:
                            return
                        yield e.path
                except OSError:
                    continue
            stack.extend(reversed(subdirs))
