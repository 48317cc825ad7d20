"""The workspace as one project, kept off the edit path.

The edit path analyses a document with only the other files already parsed
(`parse_missing=False`) and publishes at once. Everything slower runs here,
on one background thread, and reports back with `on_change(paths)`:

- parsing the files an analysis asked for (its imports of imports);
- indexing the workspace folders (who imports whom; a scan of import lines);
- analysing the callers of an open helper module that are not open
  themselves, so that the helper gets the findings its callers' kernels
  reach in it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from pallas_lsp.engine import analyze
from pallas_lsp.engine.model import Finding
from pallas_lsp.engine.project import Project
from pallas_lsp.lsp.goto import launches_of

log = logging.getLogger(__name__)

MAX_CALLERS = 16  # closed callers analysed for one open helper module
MAX_KERNEL_FILES = 2000  # files analysed to find kernels for workspace/symbol
# Background work starts only after the editor has been quiet this long: an
# analysis holds the GIL for tens of milliseconds, and a hover or the next
# keystroke's diagnostics must not wait behind it.
IDLE_S = 0.3
MAX_DEFER_S = 1.5  # ... but never longer than this (a client may poll without pause)
_LAUNCH_TEXT = re.compile(r"pallas_call|core_map|emit_pipeline|\bkernel\s*\(")


class WorkspaceIndex:
    def __init__(self, overlay: Callable[[str], str | None],
                 on_change: Callable[[set[str]], None],
                 is_open: Callable[[str], bool] = lambda path: False):
        self._overlay = overlay
        self._on_change = on_change
        self._is_open = is_open
        self.project = Project([], overlay=overlay)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pallas-workspace")
        self._lock = threading.Lock()
        self._pending: set = set()
        # helper path -> caller path -> findings the caller's kernels reach in the helper
        self._from_callers: dict[str, dict[str, list[Finding]]] = {}
        # kernel file -> caller path -> launches of its kernels there (goto.Launched)
        self._launches_from: dict[str, dict[str, list]] = {}
        # file -> (text digest, launches its analysis found), for workspace/symbol
        self._kernel_files: dict[str, tuple[bytes, list]] = {}
        self.kernels_scanned = threading.Event()
        self.indexed = threading.Event()
        self.generation = 0  # bumps when the project is replaced (new roots)
        self._last_activity = 0.0

    # ------------------------------------------------------------ setup

    def configure(self, roots: Iterable[str]) -> None:
        roots = [r for r in roots if r and os.path.isdir(r)]
        if roots == self.project.roots and self.generation:
            return
        self.project = Project(roots, overlay=self._overlay)
        self.generation += 1
        self.indexed.clear()
        with self._lock:
            self._from_callers.clear()
            self._launches_from.clear()
            self._kernel_files.clear()
        self.kernels_scanned.clear()
        self._submit(("index",), self._index, self.project)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def touch(self) -> None:
        """The editor did something (an edit, a request): background work
        waits until it has been quiet for IDLE_S."""
        self._last_activity = time.monotonic()

    def wait_left(self, since: float | None = None) -> float:
        """Seconds until the editor will have been quiet for IDLE_S; with
        `since` (when the work was asked for), at most until MAX_DEFER_S
        after it."""
        now = time.monotonic()
        left = IDLE_S - (now - self._last_activity)
        if since is not None:
            left = min(left, since + MAX_DEFER_S - now)
        return max(0.0, left)

    def _wait_until_idle(self) -> None:
        since = time.monotonic()
        while (left := self.wait_left(since)) > 0:
            time.sleep(left)

    # ------------------------------------------------------------ requests

    def request_parse(self, paths: Iterable[str]) -> None:
        """Parse these files in the background, then say so."""
        for path in paths:
            self._submit(("parse", path), self._parse, self.project, path)

    def file_changed(self, path: str | None, text: str | None = None) -> None:
        """A file was edited or saved: re-index it and re-check how its
        closed callers use it."""
        if not path:
            return
        self._submit(("update", path), self._update, self.project, path, text)

    def disk_changed(self, path: str | None, deleted: bool) -> None:
        """A file changed on disk outside the editor (watched files): forget a
        deleted file and what it reported into others; re-check, against the
        new text, the files a changed one calls into."""
        if path:
            self._submit(("disk", path, deleted), self._disk_changed, self.project, path, deleted)

    def refresh_callers(self, path: str | None) -> None:
        if path:
            self._submit(("callers", path), self._callers, self.project, path)

    def launches_into(self, path: str | None) -> list:
        """Launches, in closed callers, of kernels defined in `path`."""
        if not path:
            return []
        with self._lock:
            per = dict(self._launches_from.get(self.project.realpath(path), {}))
        return [item for caller, found in per.items() if not self._is_open(caller)
                for item in found]

    def scan_kernels(self) -> None:
        """Find the kernels of the closed files (for workspace/symbol), in the
        background; `kernels_scanned` is set when done."""
        self._submit(("kernels",), self._scan_kernels, self.project)

    def kernel_launches(self) -> list:
        with self._lock:
            files = dict(self._kernel_files)
        return [item for path, (_, found) in files.items() if not self._is_open(path)
                for item in found]

    def from_callers(self, path: str | None) -> list[Finding]:
        if not path:
            return []
        with self._lock:
            per = dict(self._from_callers.get(self.project.realpath(path), {}))
        # A caller opened since: its own analysis (its buffer) speaks for it. A
        # caller deleted since (a client that does not watch files): gone.
        return [f for caller, found in per.items()
                if not self._is_open(caller) and os.path.exists(caller) for f in found]

    # ------------------------------------------------------------ background work

    def _submit(self, key: tuple, fn, *args) -> None:
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)

        def job():
            self._wait_until_idle()
            with self._lock:
                self._pending.discard(key)
            try:
                fn(*args)
            except Exception:  # background work must never take the server down
                log.exception("workspace job %s failed", key)

        try:
            self._pool.submit(job)
        except RuntimeError:  # shut down
            pass

    def _index(self, project: Project) -> None:
        # A big workspace takes seconds: between files it steps aside while the
        # editor is busy, so an edit's analysis never shares the GIL with it.
        n = project.index(pause=self._wait_until_idle)
        log.info("indexed %d files in %s", n, project.roots)
        self.indexed.set()
        self._on_change(set())

    def _parse(self, project: Project, path: str) -> None:
        if project.source(path) is not None:
            self._on_change({path})

    def _update(self, project: Project, path: str, text: str | None) -> None:
        project.update(path, text)
        real = os.path.realpath(path)
        # Only a file something imports has callers to re-check.
        if self.indexed.is_set() and (project.importers(real, limit=1)
                                      or real in self._from_callers):
            self._callers(project, path)

    def _disk_changed(self, project: Project, path: str, deleted: bool) -> None:
        real = os.path.realpath(path)
        targets = set(project.imports.get(real, ()))
        with self._lock:  # the files this one reported into, as a caller
            targets |= {t for t, per in self._from_callers.items() if real in per}
            targets |= {t for t, per in self._launches_from.items() if real in per}
        if deleted:
            project.remove(real)
            with self._lock:
                for table in (self._from_callers, self._launches_from):
                    table.pop(real, None)
                    for per in table.values():
                        per.pop(real, None)
                self._kernel_files.pop(real, None)
            self._on_change(set(targets) | {real})
        else:
            self._update(project, path, None)
            targets |= set(project.imports.get(real, ()))  # what the new text imports
        for target in targets:
            self._callers(project, target)

    def _callers(self, project: Project, path: str) -> None:
        """Analyse the closed files that import `path` (nearest first) and
        keep what their kernels reach in it."""
        if not self.indexed.wait(timeout=30):
            return
        real = os.path.realpath(path)
        found: dict[str, list[Finding]] = {}
        launched: dict[str, list] = {}
        for caller in project.importers(real, limit=MAX_CALLERS):
            if self._is_open(caller):
                continue  # its own analysis (on the edit path) reports into `path`
            self._wait_until_idle()  # one analysis at a time, none during typing
            text = project.text(caller)
            if text is None:
                continue
            analysis = analyze(text, caller, project=project)
            if analysis.foreign.get(real):
                found[caller] = analysis.foreign[real]
            into = [item for item in launches_of(analysis, caller) if item.kernel_path == real]
            if into:
                launched[caller] = into
        with self._lock:
            old = self._from_callers.get(real)
            self._from_callers[real] = found
            self._launches_from[real] = launched
        if old != found:
            self._on_change({real})

    def _scan_kernels(self, project: Project) -> None:
        try:
            if not self.indexed.wait(timeout=30):
                return
            with self._lock:
                paths = sorted(project.imports)
            done = 0
            for path in paths:
                if done >= MAX_KERNEL_FILES:
                    break
                if self._is_open(path):
                    continue  # the server has its analysis
                text = project.text(path)
                if text is None or not _LAUNCH_TEXT.search(text):
                    continue
                digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                         digest_size=16).digest()
                with self._lock:
                    hit = self._kernel_files.get(path)
                if hit is not None and hit[0] == digest:
                    continue
                done += 1
                self._wait_until_idle()
                found = launches_of(analyze(text, path, project=project), path)
                with self._lock:
                    self._kernel_files[path] = (digest, found)
        finally:
            self.kernels_scanned.set()
