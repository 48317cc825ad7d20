"""Background work yields to the editor: the workspace's jobs wait until
the editor has been quiet for a moment (but never forever), and the catalog's
source links are located in a child process, not on the server's GIL."""
from __future__ import annotations

import threading
import time

from pallas_lsp import catalog
from pallas_lsp.lsp import convert, workspace
from pallas_lsp.lsp.workspace import WorkspaceIndex


def _index() -> WorkspaceIndex:
    return WorkspaceIndex(overlay=lambda path: None, on_change=lambda paths: None)


def test_a_job_waits_while_the_editor_is_busy():
    index = _index()
    ran = threading.Event()
    index.touch()
    index._submit(("test",), ran.set)
    # Keep the editor busy for less than MAX_DEFER_S: the job must not start.
    busy_until = time.monotonic() + workspace.IDLE_S * 2
    while time.monotonic() < busy_until:
        index.touch()
        assert not ran.is_set()
        time.sleep(0.02)
    # Quiet now: it runs within IDLE_S (plus scheduling slack).
    assert ran.wait(workspace.IDLE_S + 2.0)
    index.shutdown()


def test_a_job_is_never_deferred_past_max_defer():
    index = _index()
    ran = threading.Event()
    start = time.monotonic()
    index.touch()
    index._submit(("test",), ran.set)
    while not ran.is_set() and time.monotonic() - start < workspace.MAX_DEFER_S + 3.0:
        index.touch()  # a client that polls without pause
        time.sleep(0.02)
    assert ran.is_set(), "starved by a polling client"
    assert time.monotonic() - start >= workspace.MAX_DEFER_S - 0.1
    index.shutdown()


def test_code_sites_are_located_by_a_child_process(monkeypatch):
    monkeypatch.setattr(convert, "_LOCATED", {})
    convert._default_code_url.cache_clear()
    convert.warm_code_urls()
    entries = catalog.load()
    assert set(convert._LOCATED) == set(entries)
    for code in ("PAL101", "PAL112"):  # the same answer as in this process
        assert convert._LOCATED[code] == catalog.find_in_installed_jax(entries[code])
    convert._default_code_url.cache_clear()
