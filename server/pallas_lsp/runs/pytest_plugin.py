"""pytest plugin: `pytest -p pallas_lsp.runs.pytest_plugin ...` runs every Pallas
TPU kernel in TPU interpret mode without editing the tests, resets the
interpreter's state after each test, and records each failure (exception,
user frames, JAX's hidden kernel-line traceback) for `pallas-lsp run`.

Works on its own too: interpret mode is switched on unless
PALLAS_LSP_INTERPRET=0, and races are detected with PALLAS_LSP_RACES=1.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("PALLAS_LSP_INTERPRET", "1")
if os.environ.get("PALLAS_LSP_INTERPRET") == "1":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

from pallas_lsp.runs import _child, _report  # noqa: E402

_failed: set[str] = set()


def pytest_configure(config):
    _report.REPORT["kind"] = "pytest"
    _child.setup()


def pytest_runtest_logstart(nodeid, location):
    path = None
    line = None
    try:
        path = os.path.abspath(location[0])
        line = None if location[1] is None else location[1] + 1
    except Exception:  # noqa: BLE001
        pass
    _report.set_current(nodeid, path, line)


def _location(node):
    path = getattr(node, "path", None) or getattr(node, "fspath", None)
    line = None
    try:
        loc = node.location  # (relpath, 0-based line, name) for items
        line = None if loc[1] is None else loc[1] + 1
    except Exception:  # noqa: BLE001
        pass
    return (str(path) if path is not None else None), line


def pytest_exception_interact(node, call, report):
    """Called for failed setup/call/teardown and for collection errors (not for
    skips or xfails), with the exception itself."""
    excinfo = call.excinfo
    if excinfo is None:
        return
    path, line = _location(node)
    nodeid = getattr(node, "nodeid", None)
    _failed.add(nodeid)
    _report.record_failure(excinfo.value, nodeid=nodeid, when=call.when,
                          test_path=path, test_line=line)


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        if getattr(report, "wasxfail", None) is not None:
            outcome = "xfailed" if report.skipped else "xpassed"
        _report.count_outcome(outcome)
    elif report.when == "teardown" and report.failed:
        _report.count_outcome("error")


def pytest_runtest_logfinish(nodeid, location):
    _child.reset_interpret_state(after_failure=nodeid in _failed)
    _report.set_current(None)


def pytest_collectreport(report):
    if report.failed:
        _report.count_outcome("error")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _report.write_report(final=True)  # the launcher writes it again with the exit code
