"""Child side of `pallas-lsp run`: runs inside the user's Python (locally or on
a remote machine) next to the user's tests, and sets the process up: jax's
callback log, TPU interpret mode (and its reset between tests), the watchdogs,
`--compile`. Standard library only at import time; jax is imported when
interpret mode is switched on. Nothing here may import the rest of pallas_lsp
(only its child-side siblings): only `pallas_lsp/runs/*.py` is shipped to
remote machines. The report itself is `_report.py`.

Environment (set by the parent):
  PALLAS_LSP_INTERPRET    "1": force TPU interpret mode (pltpu.set_tpu_interpret_mode)
  PALLAS_LSP_RACES        "1": InterpretParams(detect_races=True)
  PALLAS_LSP_TIMEOUT      seconds; a watchdog writes where the kernel is stuck,
                          then ends the process group (exit code 124)
  PALLAS_LSP_WATCH_STDIN  "1": end the process group when stdin reaches EOF
                          (the SSH connection was closed: cancel / timeout)
  PALLAS_LSP_COMPILE      generations to compile for (`_compile.py`)
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from pallas_lsp.runs._report import REPORT, callback_errors, lock, source_info_frames, \
    stack_frames, type_name, write_report

EXIT_HANG = 124
EXIT_STDIN_CLOSED = 143

_setup_done = False
# Keep the original stdin: pytest replaces fds 0-2 while capturing.
_in_fd = None
# Process groups that end with this process's (a notebook's kernel: a session of its own).
also_end: list[int] = []


# ---------------------------------------------------------------- jax hooks


class _CallbackLogHandler(logging.Handler):
    """Keeps the exceptions logged by `jax._src.callback` ("jax.io_callback
    failed"). For a failing read inside the simulated TPU, the logged exception
    still has the JaxStackTraceBeforeTransformation cause with the kernel line,
    while the JaxRuntimeError that reaches the caller has lost it."""

    def __init__(self):
        super().__init__(logging.ERROR)

    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            with lock:
                if len(callback_errors) < 16:
                    callback_errors.append(record.exc_info[1])


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
        REPORT["interpret_error"] = f"{type_name(e)}: {e}"
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
                              "frames": source_info_frames(src) if src is not None else []})
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
    for pgid in also_end:
        try:
            os.killpg(pgid, signal.SIGKILL)
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
    with lock:
        hang = collect_hang()
        hang["timeout"] = seconds
        hang["current"] = REPORT["current"]
        hang["dispatched"] = REPORT.get("dispatched")
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


def watch_stdin() -> None:
    """End the process group when stdin reaches EOF (the SSH connection closed)."""
    global _in_fd
    try:
        _in_fd = os.dup(0)
        threading.Thread(target=_stdin_watch, daemon=True, name="pallas-lsp-stdin").start()
    except OSError:
        pass


def setup() -> None:
    """Idempotent: log handler, watchdogs, interpret mode."""
    global _setup_done
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
        watch_stdin()
    enable_interpret_mode()
    if os.environ.get("PALLAS_LSP_COMPILE"):
        from pallas_lsp.runs import _compile
        _compile.install()
    from pallas_lsp.runs import _dispatch
    _dispatch.install()
