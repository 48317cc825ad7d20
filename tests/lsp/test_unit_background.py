"""Background work yields to the editor: the workspace's jobs wait until
the editor has been quiet for a moment (but never forever), and the catalog's
source links are located in a child process, not on the server's GIL."""
from __future__ import annotations

import itertools
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


def test_the_index_steps_aside_between_files_while_the_editor_is_busy(tmp_path):
    for i in range(40):
        (tmp_path / f"m{i:02}.py").write_text(f"import m{(i + 1) % 40:02}\n")
    index = _index()
    stamps: list[float] = []
    update = index.project.__class__.update

    def timed_update(project, path, text=None):
        stamps.append(time.monotonic())
        if len(stamps) == 10:
            index.touch()  # an edit arrives while the index runs
        update(project, path, text)

    index.project.__class__.update = timed_update
    try:
        index.configure([str(tmp_path)])
        assert index.indexed.wait(workspace.IDLE_S + 5.0)
    finally:
        index.project.__class__.update = update
        index.shutdown()
    assert len(stamps) == 40
    # The file after the edit waited until the editor had been quiet for
    # IDLE_S; the others did not wait at all.
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert gaps[9] >= workspace.IDLE_S * 0.9
    assert max(gaps[:9] + gaps[10:]) < workspace.IDLE_S / 2


def test_code_sites_are_located_by_a_child_process(monkeypatch):
    monkeypatch.setattr(convert, "_LOCATED", {})
    convert._default_code_url.cache_clear()
    convert.warm_code_urls()
    entries = catalog.load()
    assert set(convert._LOCATED) == set(entries)
    for code in ("PAL101", "PAL112"):  # the same answer as in this process
        assert convert._LOCATED[code] == catalog.find_in_installed_jax(entries[code])
    convert._default_code_url.cache_clear()
