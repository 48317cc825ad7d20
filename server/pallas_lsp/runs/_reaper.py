"""Run a command and end, with it, everything it started.

    python -I -S _reaper.py -- ARGV...

A process-group kill misses a grandchild that called `setsid()` (or a
daemon that double-forked): it keeps the run's output pipes open, so the
result waited for the pipes. This small parent makes itself a *child
subreaper* (Linux `PR_SET_CHILD_SUBREAPER`): every orphan among the run's
descendants is re-parented to it instead of to init, so the run's whole
tree, escaped processes included, is its descendants in /proc.

* When the command ends, whatever it left behind is killed, and this
  process exits with the command's status (the same signal if it was
  killed by one).
* SIGTERM (stop softly): SIGTERM to every descendant, SIGKILL one second
  later. SIGUSR1 (stop now): SIGKILL to every descendant.

Standard library only, no pallas_lsp imports: the runner starts it by path.
Without /proc (macOS) it falls back to the command's process group.
"""
from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 1.0


class _Wake(Exception):
    pass


_state: dict = {"stop": None, "waiting": False, "child": None}


def _subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:  # noqa: BLE001 - without it, setsid escapes are still killed while attached
        pass


def descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc (empty without /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        try:
            ppid = int(data[data.rfind(b")") + 2:].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            out.append(child)
            stack.append(child)
    return out


def _kill_all(sig: int) -> None:
    pids = descendants(os.getpid())
    if not pids and _state.get("child"):  # no /proc: at least the command itself
        pids = [_state["child"]]
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _on_signal(signum, frame) -> None:
    _state["stop"] = "hard" if signum in (signal.SIGUSR1, signal.SIGALRM) else (
        _state["stop"] or "soft")
    if _state["waiting"]:
        raise _Wake()


def _reap(block: bool) -> list[tuple[int, int]]:
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block and not out else os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: _reaper.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    _subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM):
        signal.signal(sig, _on_signal)
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"pallas-lsp: cannot start {argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(127)
    _state["child"] = pid
    for fd in (0, 1):  # the command has them; the pipes must close when it is gone
        try:
            os.close(fd)
        except OSError:
            pass
    status = None
    acted = None
    while status is None:
        stop = _state["stop"]
        if stop != acted:
            acted = stop
            if stop == "soft":
                _kill_all(signal.SIGTERM)
                signal.setitimer(signal.ITIMER_REAL, GRACE_S)  # then SIGALRM: hard
            elif stop == "hard":
                _kill_all(signal.SIGKILL)
        try:
            _state["waiting"] = True
            if _state["stop"] != acted:
                continue
            reaped = _reap(block=True)
        except _Wake:
            continue
        finally:
            _state["waiting"] = False
        if not reaped:
            break  # no children at all (cannot happen before the command ends)
        for child, st in reaped:
            if child == pid:
                status = st
    # the command is gone: nothing it started outlives it
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = descendants(os.getpid())
        _reap(block=False)
        if not left:
            break
        _kill_all(signal.SIGKILL)
        time.sleep(0.01)
    _reap(block=False)
    if status is None:
        return 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    if os.WIFSIGNALED(status):  # end the same way, so the runner sees the signal
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
