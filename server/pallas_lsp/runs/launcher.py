"""Run a script or pytest with TPU interpret mode forced on, without editing it.

    python -m pallas_lsp.runs.launcher script.py [ARGS...]
    python -m pallas_lsp.runs.launcher --pytest [PYTEST ARGS...]
    python -m pallas_lsp.runs.launcher --notebook NOTEBOOK.ipynb INDEX:LINE,...

The script runs as `__main__` (runpy), with `sys.argv = [script, *ARGS]` and
the script's folder first on sys.path, as `python script.py` would. pytest runs
in this process with `-p pallas_lsp.runs.pytest_plugin`. A notebook runs in a
Jupyter kernel (`_notebook.py`; INDEX:LINE: each code cell's first line in the
notebook's program, engine/cells.py). What the child reports
and how is set by environment variables: see `pallas_lsp.runs._child` and `_report`.
"""
from __future__ import annotations

import os
import sys

from pallas_lsp.runs import _child, _report

USAGE = ("usage: python -m pallas_lsp.runs.launcher (script.py [ARGS...] | --pytest "
         "[PYTEST ARGS...] | --notebook NOTEBOOK.ipynb INDEX:LINE,...)")


def _run_script(script: str, args: list[str]) -> int:
    import runpy
    import traceback

    _report.REPORT["kind"] = "script"
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(path)
    _report.set_current(script, path, 1)
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # noqa: BLE001 - report everything, like the interpreter would
        _report.record_failure(e, nodeid=script, when="script", test_path=path, test_line=1)
        traceback.print_exc()
        code = 1
    _report.count_outcome("passed" if code == 0 else "failed")
    return code


def _run_pytest(args: list[str]) -> int:
    try:
        import pytest
    except ImportError as e:
        msg = f"pytest is not installed in {sys.executable} ({e})"
        _report.REPORT["error"] = msg
        print(f"pallas-lsp: {msg}", file=sys.stderr)
        return 4
    _report.REPORT["kind"] = "pytest"
    plugin = "pallas_lsp.runs.pytest_plugin"
    if plugin not in args:
        args = ["-p", plugin, *args]
    return int(pytest.main(args))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == "--notebook" and len(argv) == 3:  # the kernel sets itself up and reports
        from pallas_lsp.runs import _notebook
        starts = dict(tuple(map(int, pair.split(":"))) for pair in argv[2].split(",") if pair)
        return _notebook.run(argv[1], starts)
    _child.setup()
    try:
        if argv[0] == "--pytest":
            rest = argv[1:]
            if rest[:1] == ["--"]:
                rest = rest[1:]
            code = _run_pytest(rest)
        else:
            if argv[0] == "--":
                argv = argv[1:]
            code = _run_script(argv[0], argv[1:])
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
    _report.finish(code)
    return code


def _exit(code: int) -> None:
    """Exit normally, unless threads the interpreter left blocked (simulated
    cores after a failure) would keep the process alive: then run the atexit
    handlers and leave without waiting for them."""
    import threading

    stuck = [t for t in threading.enumerate()
             if t is not threading.current_thread() and not t.daemon and t.is_alive()]
    if not stuck:
        sys.exit(code)
    import atexit

    try:
        atexit._run_exitfuncs()
    except Exception:  # noqa: BLE001
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
