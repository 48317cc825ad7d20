"""Import resolution for the server, kept off the edit path.

The engine asks `locate()` while it analyses. A cached answer is returned at
once; an unknown import returns None (the engine treats the helper as
Unknown, so nothing is reported) and is resolved with jedi on a background
thread, after which `on_resolved` asks the server to analyse again.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from pallas_lsp.resolve import ImportResolver

log = logging.getLogger(__name__)


class BackgroundResolver:
    def __init__(self, on_resolved: Callable[[], None],
                 overlay: Callable[[str], str | None] | None = None):
        self._on_resolved = on_resolved
        self._overlay = overlay
        self._resolver = ImportResolver(overlay=overlay)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pallas-imports")
        self._pending: set[tuple] = set()
        self._lock = threading.Lock()

    def configure(self, root: str | None, python: str | None) -> None:
        self._resolver = ImportResolver(root, python, overlay=self._overlay)

    def locate(self, importing_path, module, name, level):
        resolver = self._resolver
        if resolver.cached(importing_path, module, name, level):
            return resolver.locate(importing_path, module, name, level)
        key = (importing_path, module, name, level)
        with self._lock:
            if key in self._pending:
                return None
            self._pending.add(key)
        self._pool.submit(self._resolve, resolver, key)
        return None

    def source(self, path: str) -> str | None:
        return self._resolver.source(path)

    def _resolve(self, resolver: ImportResolver, key: tuple) -> None:
        try:
            found = resolver.locate(*key)
        except Exception:
            log.exception("resolving %s failed", key)
            found = None
        with self._lock:
            self._pending.discard(key)
        if found is not None:
            self._on_resolved()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def path_of(uri: str) -> str | None:
    return str(Path(uri[7:])) if uri.startswith("file://") else None
