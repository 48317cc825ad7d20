"""Finding the file behind `from m import f`, for the engine's imports.py.

jedi settles what the AST cannot: packages on the project's path, re-exports
through `__init__.py`, aliases. Lookups are cached, so each import costs jedi
once per process; the server calls this off the edit path (see lsp/).
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


class ImportResolver:
    """engine.imports.Resolver backed by jedi, with a plain file-system
    fallback for relative imports when jedi is unavailable."""

    def __init__(self, root: str | os.PathLike | None = None, python: str | None = None,
                 overlay=None):
        self._root = Path(root).resolve() if root else None
        self._python = python
        self._overlay = overlay  # callable(path) -> text | None (open editor buffers)
        self._cache: dict[tuple, tuple[str, str] | None] = {}
        self._lock = threading.Lock()
        self._project = None

    # -------------------------------------------------------------- protocol

    def locate(self, importing_path: str | None, module: str, name: str,
               level: int) -> tuple[str, str] | None:
        base = str(Path(importing_path).resolve().parent) if importing_path else ""
        key = (base, module, name, level)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        found = self._jedi(importing_path, module, name, level)
        if found is None and level:
            found = self._relative(importing_path, module, name, level)
        if found is not None and any(m in found[0] for m in _LIBRARY_MARKERS):
            found = None  # library code is not the user's helper
        with self._lock:
            self._cache[key] = found
        return found

    def source(self, path: str) -> str | None:
        if self._overlay is not None:
            text = self._overlay(path)
            if text is not None:
                return text
        try:
            return Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def cached(self, importing_path: str | None, module: str, name: str, level: int) -> bool:
        base = str(Path(importing_path).resolve().parent) if importing_path else ""
        return (base, module, name, level) in self._cache

    # -------------------------------------------------------------- backends

    def _jedi(self, importing_path, module, name, level):
        try:
            import jedi
        except ImportError:
            return None
        code = f"from {'.' * level}{module} import {name}\n"
        try:
            if self._project is None:
                root = self._root or (Path(importing_path).parent if importing_path else Path.cwd())
                kwargs = {}
                if self._python:
                    kwargs["environment_path"] = self._python
                self._project = jedi.Project(str(root), **kwargs)
            script = jedi.Script(code, path=importing_path, project=self._project)
            defs = script.goto(1, len(code) - 2, follow_imports=True)
        except Exception as exc:  # jedi raises many things on odd input
            log.debug("jedi could not resolve %s: %s", code.strip(), exc)
            return None
        for d in defs:
            if d.type == "function" and d.module_path is not None:
                return str(d.module_path), d.name
        return None

    def _relative(self, importing_path, module, name, level):
        if not importing_path:
            return None
        base = Path(importing_path).resolve().parent
        for _ in range(level - 1):
            base = base.parent
        parts = module.split(".") if module else []
        candidate = base.joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return str(path), name
        return None
