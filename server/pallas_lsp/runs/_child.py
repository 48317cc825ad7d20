"""Child side of `pallas-lsp run`: runs inside the user's Python (locally or on
a remote machine) next to the user's tests. Standard library only at import
time; jax is imported when interpret mode is switched on. Nothing here may
import the rest of pallas_lsp: only `pallas_lsp/runs/*.py` is shipped to
remote machines.

Environment (set by the parent):
  PALLAS_LSP_REPORT       path of the JSON report to write, or "-" to write it
                          to the original stderr as one `MARKER {json}` line
  PALLAS_LSP_INTERPRET    "1": force TPU interpret mode (pltpu.set_tpu_interpret_mode)
  PALLAS_LSP_RACES        "1": InterpretParams(detect_races=True)
  PALLAS_LSP_TIMEOUT      seconds; a watchdog writes where the kernel is stuck,
                          then ends the process group (exit code 124)
  PALLAS_LSP_WATCH_STDIN  "1": end the process group when stdin reaches EOF
                          (the SSH connection was closed: cancel / timeout)
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback

MARKER = "@@pallas-lsp-report@@ "
EXIT_HANG = 124
EXIT_STDIN_CLOSED = 143
_MAX_MSG = 20000

_setup_done = False
_lock = threading.RLock()
_report_path = os.environ.get("PALLAS_LSP_REPORT") or None
# Keep the original stderr / stdin: pytest replaces fds 0-2 while capturing.
_err_fd = os.dup(2) if _report_path == "-" else None
_in_fd = None

REPORT: dict = {
    "version": 1,
    "kind": None,  # "pytest" | "script"
    "pid": os.getpid(),
    "host": __import__("socket").gethostname(),
    "cwd": os.getcwd(),
    "pwd": os.environ.get("PWD"),
    "interpret": os.environ.get("PALLAS_LSP_INTERPRET") == "1",
    "current": None,  # {"nodeid", "path", "line"} of the test running now
    "failures": [],
    "hang": None,
    "outcomes": {},
    "finished": False,
    "exit_code": None,
    "interpret_error": None,  # could not switch on interpret mode
    "error": None,  # could not run at all (e.g. pytest missing)
}


# ---------------------------------------------------------------- report


def write_report(final: bool = False) -> None:
    """Write REPORT (whole file, atomically; also at each test start and
    failure, so a killed run still says where it was) or, in stream mode
    (remote runs), one marker line with the final report only."""
    if _report_path is None or (_report_path == "-" and not final):
        return
    with _lock:
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
    with _lock:
        REPORT["current"] = None if nodeid is None else {"nodeid": nodeid, "path": path, "line": line}
        _callback_errors.clear()
    if nodeid is not None:
        write_report()


def count_outcome(outcome: str) -> None:
    with _lock:
        REPORT["outcomes"][outcome] = REPORT["outcomes"].get(outcome, 0) + 1


# ---------------------------------------------------------------- frames


def _frame(fs: traceback.FrameSummary) -> dict:
    return {"file": os.path.abspath(fs.filename), "line": fs.lineno, "name": fs.name,
            "col": getattr(fs, "colno", None), "end_line": getattr(fs, "end_lineno", None),
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


def _type_name(e: BaseException) -> str:
    t = type(e)
    mod = t.__module__
    return t.__qualname__ if mod in ("builtins", "__main__") else f"{mod}.{t.__qualname__}"


def _message(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:  # noqa: BLE001
        text = repr(e)
    return text[:_MAX_MSG]


def original_of(message: str) -> dict | None:
    """`JaxRuntimeError: INTERNAL: CpuCallback error calling callback: <tb>\\n<Type>: <msg>`
    -> the original exception: the last non-empty line of the message."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    last = lines[-1].strip()
    head, sep, rest = last.partition(": ")
    if sep and head and " " not in head:
        return {"type": head, "message": rest}
    if last and " " not in last and last[:1].isupper():  # a bare `AssertionError`
        return {"type": last, "message": ""}
    return {"type": None, "message": last}


def _syntax(e: BaseException) -> dict | None:
    if isinstance(e, SyntaxError) and e.filename and e.lineno:
        return {"file": os.path.abspath(e.filename), "line": e.lineno,
                "col": (e.offset - 1) if e.offset else None}
    return None


def describe_exception(exc: BaseException) -> dict:
    chain = _chain(exc)
    return {
        "syntax": _syntax(exc),
        "type": _type_name(exc),
        "message": _message(exc),
        "original": original_of(_message(exc)) if "CpuCallback error" in _message(exc)
        or type(exc).__name__ == "JaxRuntimeError" else None,
        "frames": tb_frames(exc.__traceback__),
        "chain": [{"type": _type_name(e), "message": _message(e)[:2000], "syntax": _syntax(e),
                   "frames": tb_frames(e.__traceback__)} for e in chain[1:]],
    }


def record_failure(exc: BaseException, *, nodeid: str | None, when: str,
                   test_path: str | None = None, test_line: int | None = None) -> None:
    """Record an exception that failed a test (or the script)."""
    try:
        item = describe_exception(exc)
    except Exception as e:  # noqa: BLE001
        item = {"type": _type_name(exc), "message": f"<could not describe: {e!r}>",
                "frames": [], "chain": []}
    with _lock:
        item.update(nodeid=nodeid, when=when, test_path=test_path, test_line=test_line,
                    callback=[describe_exception(e) for e in _callback_errors[:4]])
        REPORT["failures"].append(item)
    write_report()


# ---------------------------------------------------------------- jax hooks


_callback_errors: list[BaseException] = []


class _CallbackLogHandler(logging.Handler):
    """Keeps the exceptions logged by `jax._src.callback` ("jax.io_callback
    failed"). For a failing read inside the simulated TPU, the logged exception
    still has the JaxStackTraceBeforeTransformation cause with the kernel line,
    while the JaxRuntimeError that reaches the caller has lost it."""

    def __init__(self):
        super().__init__(logging.ERROR)

    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            with _lock:
                if len(_callback_errors) < 16:
                    _callback_errors.append(record.exc_info[1])


def enable_interpret_mode() -> None:
    """Force TPU interpret mode for every pallas_call / core_map / kernel in
    this process (overrides `interpret=` arguments)."""
    if os.environ.get("PALLAS_LSP_INTERPRET") != "1":
        return
    try:
        from jax.experimental.pallas import tpu as pltpu
        params = pltpu.InterpretParams(detect_races=os.environ.get("PALLAS_LSP_RACES") == "1")
        pltpu.set_tpu_interpret_mode(params)
    except Exception as e:  # noqa: BLE001 - report it; the tests then show what happens
        REPORT["interpret_error"] = f"{_type_name(e)}: {e}"
        print(f"pallas-lsp: could not switch on TPU interpret mode: {e!r}", file=sys.stderr)


def reset_interpret_state(after_failure: bool) -> None:
    """Between tests: the interpreter's shared memory, and (after a failure) the
    runtime tokens that otherwise poison later multi-device kernels."""
    if "jax" not in sys.modules:
        return
    try:
        from jax.experimental.pallas import tpu as pltpu
        pltpu.reset_tpu_interpret_mode_state()
    except Exception:  # noqa: BLE001
        pass
    if after_failure:
        try:
            from jax._src import dispatch
            dispatch.runtime_tokens.clear()
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------- watchdogs


_WAIT_FUNCS = {"dma_wait": "DMA wait", "semaphore_wait": "semaphore wait",
               "_barrier_wait": "barrier wait", "barrier_wait": "barrier wait"}


def _source_info_frames(source_info) -> list[dict]:
    try:
        tb = source_info.traceback.as_python_traceback()
        return tb_frames(tb)
    except Exception:  # noqa: BLE001
        pass
    try:
        return [{"file": f.file_name, "line": f.start_line, "name": f.function_name,
                 "col": getattr(f, "start_column", None), "end_line": None, "end_col": None}
                for f in source_info.traceback.frames][::-1]
    except Exception:  # noqa: BLE001
        return []


def collect_hang() -> dict:
    """Where every thread is: the interpreter's wait callbacks (with the kernel
    line of the wait when JAX passed its source_info) and each stack."""
    waits, stacks = [], []
    main_id = threading.main_thread().ident
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        stacks.append({"main": ident == main_id, "frames": stack_frames(frame)})
        f = frame
        while f is not None:
            code = f.f_code
            if code.co_name in _WAIT_FUNCS and "pallas" in code.co_filename:
                src = f.f_locals.get("source_info")
                waits.append({"kind": _WAIT_FUNCS[code.co_name],
                              "frames": _source_info_frames(src) if src is not None else []})
                break
            f = f.f_back
    return {"waits": waits, "stacks": stacks}


def _end_process_group(code: int) -> None:
    """Exit now; also stop the rest of our process group when we lead it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    try:
        if os.getpgrp() == os.getpid():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.killpg(os.getpgrp(), signal.SIGTERM)
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)


def _watchdog(seconds: float) -> None:
    time.sleep(seconds)
    with _lock:
        hang = collect_hang()
        hang["timeout"] = seconds
        hang["current"] = REPORT["current"]
        REPORT["hang"] = hang
    msg = (f"\npallas-lsp: no result after {seconds:g} s; the kernel is probably waiting for a "
           "DMA or semaphore that is never signalled. Stopping.\n")
    try:
        os.write(2, msg.encode())
    except OSError:
        pass
    write_report(final=True)
    _end_process_group(EXIT_HANG)


def _stdin_watch() -> None:
    while True:
        try:
            data = os.read(_in_fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
    _end_process_group(EXIT_STDIN_CLOSED)


def setup() -> None:
    """Idempotent: log handler, watchdogs, interpret mode."""
    global _setup_done, _in_fd
    if _setup_done:
        return
    _setup_done = True
    logging.getLogger("jax._src.callback").addHandler(_CallbackLogHandler())
    timeout = os.environ.get("PALLAS_LSP_TIMEOUT")
    if timeout:
        try:
            seconds = float(timeout)
        except ValueError:
            seconds = 0
        if seconds > 0:
            threading.Thread(target=_watchdog, args=(seconds,), daemon=True,
                             name="pallas-lsp-watchdog").start()
    if os.environ.get("PALLAS_LSP_WATCH_STDIN") == "1":
        try:
            _in_fd = os.dup(0)
            threading.Thread(target=_stdin_watch, daemon=True, name="pallas-lsp-stdin").start()
        except OSError:
            pass
    enable_interpret_mode()
    if os.environ.get("PALLAS_LSP_COMPILE"):
        from pallas_lsp.runs import _compile
        _compile.install()


def finish(exit_code: int) -> None:
    with _lock:
        REPORT["exit_code"] = int(exit_code) if isinstance(exit_code, int) else 1
        REPORT["current"] = None
    write_report(final=True)
