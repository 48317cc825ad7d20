"""Child side of `pallas-lsp run`: the report the child writes for the parent
(`REPORT`: what ran, the failures as exceptions turned into frames, the hang,
the outcomes) and how it is written. Standard library only; imported by the
other child-side modules (`_child`, `_compile`, `launcher`, `pytest_plugin`),
never by the rest of pallas_lsp: only `pallas_lsp/runs/*.py` is shipped to
remote machines.

Environment (set by the parent):
  PALLAS_LSP_REPORT       path of the JSON report to write, or "-" to write it
                          to the original stderr as one `MARKER {json}` line
"""
from __future__ import annotations

import json
import os
import threading
import traceback

MARKER = "@@pallas-lsp-report@@ "
_MAX_MSG = 20000

lock = threading.RLock()  # guards REPORT and callback_errors (watchdog and hooks too)
_report_path = os.environ.get("PALLAS_LSP_REPORT") or None
# Keep the original stderr: pytest replaces fds 0-2 while capturing.
_err_fd = os.dup(2) if _report_path == "-" else None

REPORT: dict = {
    "version": 1,
    "kind": None,  # "pytest" | "script"
    "pid": os.getpid(),
    "host": __import__("socket").gethostname(),
    "cwd": os.getcwd(),
    "pwd": os.environ.get("PWD"),
    "interpret": os.environ.get("PALLAS_LSP_INTERPRET") == "1",
    "current": None,  # {"nodeid", "path", "line"} of the test running now
    "dispatched": None,  # the pallas_call bound last: {"kernel", "site", "nodeid"} (_dispatch)
    "failures": [],
    "hang": None,
    "outcomes": {},
    "finished": False,
    "exit_code": None,
    "interpret_error": None,  # could not switch on interpret mode
    "error": None,  # could not run at all (e.g. pytest missing)
}


# exceptions logged by jax._src.callback during the current test (_child's log handler)
callback_errors: list[BaseException] = []
# kernels ({name, file, line}) the current test bound (_dispatch.py): a failure names them
kernels_this_test: list[dict] = []
# Code compiled under a name that is not its file (a notebook's cells, `_notebook_kernel`):
# that name -> (the file it comes from, the line of the file its first line is on (0-based),
# how messages name it: "cell 3").
renamed: dict[str, tuple[str, int, str]] = {}


def where(filename: str, line: int | None) -> tuple[str, int | None]:
    """(absolute file, 1-based line) of a code position, through `renamed`."""
    moved = renamed.get(filename)
    if moved is not None:
        return moved[0], None if line is None else line + moved[1]
    return os.path.abspath(filename), line


# ---------------------------------------------------------------- report


def write_report(final: bool = False) -> None:
    """Write REPORT (whole file, atomically; also at each test start and
    failure, so a killed run still says where it was) or, in stream mode
    (remote runs), one marker line with the final report only."""
    if _report_path is None or (_report_path == "-" and not final):
        return
    with lock:
        REPORT["finished"] = REPORT["finished"] or final
        text = json.dumps(REPORT, ensure_ascii=True, default=str)
        if _report_path == "-":
            try:
                os.write(_err_fd, ("\n" + MARKER + text + "\n").encode("ascii"))
            except OSError:
                pass
            return
        tmp = f"{_report_path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, _report_path)
        except OSError:
            pass


def set_current(nodeid: str | None, path: str | None = None, line: int | None = None) -> None:
    with lock:
        REPORT["current"] = None if nodeid is None else {"nodeid": nodeid, "path": path, "line": line}
        callback_errors.clear()
        if nodeid is not None:
            kernels_this_test.clear()
    if nodeid is not None:
        write_report()


def count_outcome(outcome: str) -> None:
    with lock:
        REPORT["outcomes"][outcome] = REPORT["outcomes"].get(outcome, 0) + 1


# ---------------------------------------------------------------- frames


def _frame(fs: traceback.FrameSummary) -> dict:
    file, line = where(fs.filename, fs.lineno)
    return {"file": file, "line": line, "name": fs.name,
            "col": getattr(fs, "colno", None),
            "end_line": where(fs.filename, getattr(fs, "end_lineno", None))[1],
            "end_col": getattr(fs, "end_colno", None)}


def tb_frames(tb) -> list[dict]:
    try:
        return [_frame(fs) for fs in traceback.extract_tb(tb)]
    except Exception:  # noqa: BLE001 - a broken traceback must not break the report
        return []


def stack_frames(frame) -> list[dict]:
    try:
        return [_frame(fs) for fs in traceback.extract_stack(frame)]
    except Exception:  # noqa: BLE001
        return []


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen, e = [], set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(e)
        e = e.__cause__ if e.__cause__ is not None else (
            None if e.__suppress_context__ else e.__context__)
    return out


def type_name(e: BaseException) -> str:
    t = type(e)
    mod = t.__module__
    return t.__qualname__ if mod in ("builtins", "__main__") else f"{mod}.{t.__qualname__}"


def _message(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:  # noqa: BLE001
        text = repr(e)
    for name, (path, _, label) in renamed.items():  # `kernel at <cell file>:1` as a cell
        for form in (name, os.path.basename(name)):  # (a SyntaxError says the base name)
            if form in text:
                text = text.replace(form, f"{os.path.basename(path)}:{label}")
    return text[:_MAX_MSG]


# Lines a JAX / XLA error ends with that are no exception of their own.
_TRAILERS = ("See https://", "Please file an issue", "Please report a bug", "-----",
             "For simplicity, JAX")


def original_of(message: str) -> dict | None:
    """`JaxRuntimeError: INTERNAL: CpuCallback error calling callback: <tb>\\n<Type>: <msg>`
    -> the original exception: the last non-empty line of the message. None for
    an error that wraps nothing (a TPU compiler's `RESOURCE_EXHAUSTED: E1001 ...`
    ending with a link): its own text is the message."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    while lines and lines[-1].strip().startswith(_TRAILERS):
        lines.pop()
    if len(lines) < 2:
        return None
    last = lines[-1].strip()
    head, sep, rest = last.partition(": ")
    if sep and head and " " not in head:
        return {"type": head, "message": rest}
    if last and " " not in last and last[:1].isupper():  # a bare `AssertionError`
        return {"type": last, "message": ""}
    if "CpuCallback error" in message:
        return {"type": None, "message": last}
    return None


def _syntax(e: BaseException) -> dict | None:
    if isinstance(e, SyntaxError) and e.filename and e.lineno:
        file, line = where(e.filename, e.lineno)
        return {"file": file, "line": line,
                "col": (e.offset - 1) if e.offset else None}
    return None


def describe_exception(exc: BaseException) -> dict:
    chain = _chain(exc)
    return {
        "syntax": _syntax(exc),
        "type": type_name(exc),
        "message": _message(exc),
        "original": original_of(_message(exc)) if "CpuCallback error" in _message(exc)
        or type(exc).__name__ == "JaxRuntimeError" else None,
        "frames": tb_frames(exc.__traceback__),
        "chain": [{"type": type_name(e), "message": _message(e)[:2000], "syntax": _syntax(e),
                   "frames": tb_frames(e.__traceback__)} for e in chain[1:]],
    }


def record_failure(exc: BaseException, *, nodeid: str | None, when: str,
                   test_path: str | None = None, test_line: int | None = None) -> None:
    """Record an exception that failed a test (or the script)."""
    try:
        item = describe_exception(exc)
    except Exception as e:  # noqa: BLE001
        item = {"type": type_name(exc), "message": f"<could not describe: {e!r}>",
                "frames": [], "chain": []}
    with lock:
        item.update(nodeid=nodeid, when=when, test_path=test_path, test_line=test_line,
                    callback=[describe_exception(e) for e in callback_errors[:4]],
                    kernels=[dict(k) for k in kernels_this_test])
        REPORT["failures"].append(item)
    write_report()


def source_info_frames(source_info) -> list[dict]:
    try:
        tb = source_info.traceback.as_python_traceback()
        return tb_frames(tb)
    except Exception:  # noqa: BLE001
        pass
    try:
        return [dict(zip(("file", "line"), where(f.file_name, f.start_line)),
                     name=f.function_name, col=getattr(f, "start_column", None),
                     end_line=None, end_col=None)
                for f in source_info.traceback.frames][::-1]
    except Exception:  # noqa: BLE001
        return []


def finish(exit_code: int) -> None:
    with lock:
        REPORT["exit_code"] = int(exit_code) if isinstance(exit_code, int) else 1
        REPORT["current"] = None
    write_report(final=True)
