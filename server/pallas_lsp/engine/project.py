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

import os
import re
import stat
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from pallas_lsp.engine import syntax
from pallas_lsp.engine.source import Source, decode_bytes, parse

# Top-level modules that are never the user's code (saves resolving them).
LIBRARY_ROOTS = frozenset({
    "jax", "jaxlib", "numpy", "np", "functools", "math", "typing", "dataclasses", "collections",
    "itertools", "os", "sys", "enum", "abc", "re", "logging", "contextlib", "operator", "absl",
    "flax", "optax", "torch", "scipy", "__future__", "json", "time", "pathlib", "string",
    "inspect", "copy", "types", "warnings", "typing_extensions", "einops", "chex", "ml_dtypes",
    "pytest", "unittest", "argparse", "subprocess", "threading", "random", "pickle", "io",
    "collections.abc", "hashlib", "textwrap", "traceback", "weakref", "tensorflow", "transformers"})
_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules",
                       ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build",
                       "dist", ".eggs"})
MAX_FILE_BYTES = 5_000_000  # bigger files are generated code; not indexed
MAX_INDEX_FILES = 20_000
_SOURCE_CACHE_LIMIT = 2_000

# `from .a.b import (x, y)` / `import a.b as c, d` (one line at a time).
_FROM_LINE = re.compile(r"[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+([^#;]*)")
_IMPORT_LINE = re.compile(r"[ \t]*import[ \t]+([^#;]+)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_DOTTED = re.compile(r"[\w.]+")


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
            return decode_bytes(fh.read())
    except (OSError, UnicodeDecodeError, LookupError):
        return None


def _tag(src: Source) -> Source:
    """Mark every node with the source it belongs to, so that a finding on a
    node reached from another file's analysis knows its own file."""
    for node in syntax.walk(src.tree):
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
        self._sources: dict[str, tuple[str, Source]] = {}
        self._isfile: dict[str, bool] = {}
        self._resolved: dict[tuple, str | None] = {}
        self._real: dict[str, str] = {}
        self._bases_of: dict[str | None, list[str]] = {}
        self._lock = threading.Lock()
        self.imports: dict[str, set[str]] = {}  # file -> files it imports (the index)
        # file -> can nothing it imports (transitively) name Pallas? For the
        # command line only, whose texts do not change (relevance.reaches_no_pallas).
        self.pallas_free: dict[str, bool] = {}
        # The command line's texts do not change during a run: a file parsed
        # for an import is not read again for the next importer (one read
        # per module executed in each analysis before: 1,597 on marin_levanter).
        self.fixed_texts = False
        self._importers: dict[str, set[str]] | None = None
        self.evictions = 0  # times the parsed sources were let go (check/collector.py)

    # ------------------------------------------------------------ sources

    def text(self, path: str) -> str | None:
        if self._overlay is not None:
            text = self._overlay(path)
            if text is not None:
                return text
        if self.fixed_texts:
            hit = self._sources.get(path)
            if hit is not None:
                return hit[0]
        return _read_disk(path)

    def source(self, path: str, *, parse_missing: bool = True) -> Source | None:
        """The parsed source of `path` (its current text). With
        `parse_missing=False`, only a source already parsed for the current
        text is returned (never parses: used on the edit path)."""
        text = self.text(path)
        if text is None:
            return None
        with self._lock:
            hit = self._sources.get(path)
        # Keyed by the text itself: usually the very string the Source holds,
        # and comparing it costs less than hashing it (or importing hashlib).
        if hit is not None and hit[0] == text:
            return hit[1]
        if not parse_missing:
            return None
        src = parse(text)
        src.path = path
        _tag(src)
        with self._lock:
            if len(self._sources) >= _SOURCE_CACHE_LIMIT:
                self._sources.clear()
                self.evictions += 1
            self._sources[path] = (text, src)
        return src

    @contextmanager
    def shared_source(self, path: str, text: str) -> Iterator[Source]:
        """The parse of a file the command line checks (`path` its real path):
        the one cached when an earlier analysis read it as an import, if of
        the same text, else a new one. The cached one is lent as the file's
        own: no path while it is analysed (spans in it are this file's), and
        its nodes' `_pl_src` is this very source, which the engine reads as
        "this file". A new parse is not kept: most checked files are not
        imported after they are checked (none of a generated 2,000-file tree,
        33 of marin_levanter's 85), and each tree kept costs memory.
        Not for the editor, whose texts change under it."""
        with self._lock:
            hit = self._sources.get(path)
        if hit is None or hit[0] != text:
            yield parse(text)
            return
        src = hit[1]
        src.path = ""
        try:
            yield src
        finally:
            src.path = path

    def forget(self, path: str) -> None:
        with self._lock:
            self._sources.pop(path, None)
            self._isfile.clear()
            self._resolved.clear()
            self._bases_of.clear()

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
        if not level and module.split(".", 1)[0] in LIBRARY_ROOTS:
            return None
        here = os.path.dirname(self.realpath(importing)) if importing else None
        key = (here, module, level)
        with self._lock:
            if key in self._resolved:
                return self._resolved[key]
        found = self._resolve(here, module, level)
        if found is not None:
            found = self.realpath(found)
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

    def realpath(self, path: str) -> str:
        hit = self._real.get(path)
        if hit is None:
            hit = self._real[path] = os.path.realpath(path)
        return hit

    def _bases(self, here: str | None) -> list[str]:
        hit = self._bases_of.get(here)
        if hit is None:
            hit = self._bases_of[here] = self._compute_bases(here)
        return hit

    def _compute_bases(self, here: str | None) -> list[str]:
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

    def index(self, paths: Iterable[str] | None = None,
              pause: Callable[[], None] | None = None) -> int:
        """Read every Python file under `paths` (default: the roots) and
        record what each imports. Cheap: a scan of import lines, no parse.
        `pause()` is called between files (the server's index waits there
        while the editor is busy). Returns the number of files indexed."""
        files = list(iter_python_files(paths if paths is not None else self.roots))
        workers = min(2, os.cpu_count() or 1)
        if len(files) >= PARALLEL_INDEX_FILES and workers > 1:
            try:
                self._index_in_processes(files, workers)
                if self._overlay is not None:  # open buffers differ from the disk
                    for path in files:
                        if self._overlay(path) is not None:
                            self.update(path)
                return len(files)
            except Exception:  # no processes here (sandbox, limits): one core then
                pass
        for path in files:
            if pause is not None:
                pause()
            self.update(path)
        return len(files)

    def _index_in_processes(self, files: list[str], workers: int) -> None:
        """Big trees: scan on every core (the scan is pure Python, so threads
        would share one). Processes are spawned, never forked: the server
        has threads."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        chunks = [files[i::workers * 4] for i in range(workers * 4)]
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for part in pool.map(_scan_chunk, [(self.roots, c) for c in chunks]):
                with self._lock:
                    self.imports.update(part)
                    self._importers = None

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
        an import inside a function counts too). Only lines that mention
        `import` are looked at; no parse."""
        if "import" not in text:
            return
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if "import" not in line:
                continue
            m = _FROM_LINE.match(line)
            if m is not None:
                dots, module, names = m.group(1), m.group(2), m.group(3)
                if not dots and module.split(".", 1)[0] in LIBRARY_ROOTS:
                    continue
                if "(" in names and ")" not in names:  # a parenthesised list over lines
                    j = i + 1
                    while j < len(lines) and j < i + 200 and ")" not in lines[j - 1]:
                        names += " " + lines[j]
                        j += 1
                target = self.resolve(path, module, len(dots))
                if target is None:
                    continue
                yield target
                for name in _NAME.findall(names.split("#")[0]):
                    if name == "as":
                        continue
                    sub = self.submodule(target, name)
                    if sub is not None:
                        yield self.realpath(sub)
                continue
            m = _IMPORT_LINE.match(line)
            if m is not None:
                for part in m.group(1).split(","):
                    name = part.strip().split(" as ")[0].strip()
                    if name and _DOTTED.fullmatch(name):
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
        path = self.realpath(path)
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


PARALLEL_INDEX_FILES = 8000  # below this one core scans faster than processes start (measured)


def _scan_chunk(job: tuple[list[str], list[str]]) -> dict[str, set[str]]:
    roots, paths = job
    project = Project(roots)
    out = {}
    for path in paths:
        path = os.path.realpath(path)
        text = project.text(path)
        out[path] = set(project.scan_imports(path, text)) if text is not None else set()
    return out


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
