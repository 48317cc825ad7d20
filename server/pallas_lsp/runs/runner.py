"""Start a run, stream its output, cancel it, and turn it into a RunResult.

Every command is an argument list. The only shell string is the remote
command given to ssh (or to a `tpu` profile's `{command}` placeholder), built
from shlex-quoted argument lists.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable

from pallas_lsp.runs.mapping import (PathMap, RaceParser, dedupe, failure_diagnostic,
                                     race_diagnostics)
from pallas_lsp.runs.static_context import StaticContext, hang_report, with_kernel_findings
from pallas_lsp.runs.model import CODE_FAILURE, RunDiagnostic, RunResult, Status
from pallas_lsp.runs.profiles import Profile, project_profiles, resolve_profile
from pallas_lsp.runs.target import (RunSpecError, Target, find_root, parse_target,
                                    test_def_line)

OnOutput = Callable[[str, str], None]  # (stream "stdout" | "stderr", line without newline)
DEFAULT_TIMEOUT = 300.0  # the editor's `runs.timeoutS` default too: one default
RUNTIME_DIR = ".pallas-lsp/runtime"  # under the remote folder
REPORT_MARKER = "@@pallas-lsp-report@@ "  # = _report.MARKER (not imported: _report is child-side)
_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")
_PYTEST_EXIT = {2: "pytest was interrupted", 3: "pytest had an internal error",
                4: "pytest was given a bad option", 5: "no tests ran (nothing collected)"}


@dataclass
class RunSpec:
    """What to run and where. Only `target` is required."""

    target: str  # "path", "path::test" or a pytest node id
    root: str | None = None  # workspace root (default: nearest project folder of the target)
    cwd: str | None = None  # a relative target is relative to this (default: os.getcwd())
    mode: str | None = None  # "interpret" (default) | "tpu" (no interpret mode: real TPU)
    profile: str | dict | Profile | None = None  # name, dict or Profile (default: local)
    profiles: dict | None = None  # extra named profile dicts (e.g. LSP settings)
    races: bool = False  # InterpretParams(detect_races=True)
    timeout: float | None = None  # seconds (default: profile's, else DEFAULT_TIMEOUT)
    devices: int | None = None  # XLA_FLAGS=--xla_force_host_platform_device_count=N
    python: str | None = None  # local interpreter (default: profile's, else sys.executable)
    env: dict = field(default_factory=dict)  # extra environment for the child
    args: list = field(default_factory=list)  # extra pytest / script arguments
    kind: str = "auto"  # "auto" | "pytest" | "script"
    compile_for: tuple = ()  # TPU generations to compile every pallas_call for ("v5e", ...)
    # With compile_for: the default compile of the CLI and the editor, not one the user asked
    # for. Only in interpret mode; where libtpu is missing (or cannot start) the run is not
    # failed for it, and its summary says that TPU-only errors were not checked.
    compile_auto: bool = False
    # repository profiles the user allowed: True (all), or their fingerprints (profiles.py)
    allow_project_profiles: bool | frozenset = False


@dataclass
class _Plan:
    spec: RunSpec
    target: Target
    root: Path
    profile: Profile
    mode: str
    timeout: float
    devices: int | None
    grace: float
    warnings: tuple = ()  # said at the start of the run's output
    notebook: object = None  # a notebook target's program (engine/cells.Program)


def prepare(spec: RunSpec) -> _Plan:
    """Validate a spec (raises RunSpecError / ProfileError / TargetError)."""
    cwd = Path(spec.cwd) if spec.cwd else Path.cwd()
    target = parse_target(spec.target, cwd, spec.kind)
    root = Path(os.path.abspath(cwd / spec.root)) if spec.root else find_root(target.path)
    if not root.is_dir():
        raise RunSpecError(f"{root}: the workspace root is not a folder")
    profile = resolve_profile(spec.profile, root, spec.profiles, spec.allow_project_profiles)
    _, warnings = project_profiles(root)
    mode = spec.mode or profile.mode or "interpret"
    if mode not in ("interpret", "tpu"):
        raise RunSpecError(f"unknown mode {mode!r} (interpret or tpu)")
    if spec.compile_auto and mode != "interpret":  # on a TPU the run itself compiles
        spec = dataclasses.replace(spec, compile_for=(), compile_auto=False)
    if profile.remote:
        real_root = os.path.realpath(root)
        real_t = os.path.realpath(target.path)
        if not (real_t == real_root or real_t.startswith(real_root.rstrip(os.sep) + os.sep)):
            raise RunSpecError(f"{target.path} is outside the workspace root {root}; a remote "
                               "run copies the root, so the target must be inside it")
    timeout = spec.timeout if spec.timeout is not None else (profile.timeout or DEFAULT_TIMEOUT)
    if not timeout or timeout <= 0:
        raise RunSpecError(f"timeout must be positive, got {timeout!r}")
    devices = spec.devices if spec.devices is not None else profile.devices
    if devices is not None and (not isinstance(devices, int) or devices < 1):
        raise RunSpecError(f"devices must be a positive integer, got {devices!r}")
    for k, v in (spec.env or {}).items():
        if not isinstance(k, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) \
                or not isinstance(v, str):
            raise RunSpecError(f"bad environment variable {k!r}")
    if not all(isinstance(a, str) for a in spec.args or ()):
        raise RunSpecError("args must be strings")
    if spec.compile_for:
        from pallas_lsp.runs.compile_mapping import check_generations
        check_generations(spec.compile_for)
    notebook = _notebook_program(target, spec) if target.kind == "notebook" else None
    grace = profile.kill_grace if profile.kill_grace is not None else (
        20.0 if profile.remote else 5.0)
    return _Plan(spec=spec, target=target, root=root, profile=profile, mode=mode,
                 timeout=float(timeout), devices=devices, grace=float(grace),
                 warnings=tuple(warnings), notebook=notebook)


def _notebook_program(target: Target, spec: RunSpec):
    """A notebook's code cells as the engine reads them (their program lines
    are where a run's frames land); raises RunSpecError for what cannot run."""
    from pallas_lsp.engine.cells import NOTEBOOK, DocumentError, to_program

    try:
        with open(target.path, encoding="utf-8") as fh:
            program = to_program(fh.read(), NOTEBOOK)
    except (OSError, UnicodeDecodeError, DocumentError) as e:
        raise RunSpecError(f"{target.path}: {e}") from None
    if program.note:
        raise RunSpecError(f"{target.path}: {program.note}")
    if spec.args:
        raise RunSpecError("a notebook takes no arguments")
    return program


def start_run(spec: RunSpec, on_output: OnOutput | None = None,
              on_done: Callable[[RunResult], None] | None = None) -> "RunHandle":
    """Validate `spec` (raises RunSpecError for a bad target / profile / option)
    and start the run in a background thread. `on_output(stream, line)` gets
    every output line as it comes (from that thread); `on_done(result)` is
    called once at the end."""
    plan = prepare(spec)
    handle = RunHandle(plan, on_output, on_done)
    handle._thread.start()
    return handle


def run(spec: RunSpec, on_output: OnOutput | None = None) -> RunResult:
    """Blocking form of start_run."""
    return start_run(spec, on_output).result()


class RunHandle:
    def __init__(self, plan: _Plan, on_output: OnOutput | None,
                 on_done: Callable[[RunResult], None] | None):
        self.plan = plan
        self._on_output = on_output
        self._on_done = on_done
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._result: RunResult | None = None
        self._thread = threading.Thread(target=self._main, name="pallas-lsp-run", daemon=True)

    # ------------------------------------------------------------ public

    def cancel(self) -> None:
        """Stop the run: kills the current process group (the remote side ends
        when its connection closes). Returns at once; result() says cancelled."""
        self._cancel.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            _stop(proc, hard=True)

    def result(self, timeout: float | None = None) -> RunResult:
        if not self._done.wait(timeout):
            raise TimeoutError("the run is still going")
        assert self._result is not None
        return self._result

    def done(self) -> bool:
        return self._done.is_set()

    @property
    def pid(self) -> int | None:
        """Process (and process group) id of the command running now."""
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------ internals

    def _main(self) -> None:
        t0 = time.monotonic()
        self._commands: list[list[str]] = []
        self._argv: list[str] = []
        self._tail: collections.deque = collections.deque(maxlen=40)
        self._races = RaceParser()
        self._stream_reports: list[dict] = []
        for warning in self.plan.warnings:
            self._emit("stderr", f"pallas-lsp: {warning}")
        self._tmp = tempfile.mkdtemp(prefix="pallas-lsp-run-")
        try:
            result = self._execute()
        except Exception as e:  # noqa: BLE001 - a run must always end with a result
            result = RunResult(status=Status.ERROR, error=f"internal error: {e!r}")
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self._cancel.is_set() and result.status is not Status.CANCELLED:
            result.status = Status.CANCELLED
        result.duration = time.monotonic() - t0
        result.commands = self._commands
        result.argv = result.argv or self._argv
        result.summary = _summary(self.plan, result)
        self._result = result
        self._done.set()
        if self._on_done is not None:
            try:
                self._on_done(result)
            except Exception:  # noqa: BLE001
                pass

    def _emit(self, stream: str, line: str) -> None:
        if stream == "stderr" and REPORT_MARKER in line:
            try:
                self._stream_reports.append(json.loads(line.split(REPORT_MARKER, 1)[1]))
            except ValueError:
                pass
            return
        if stream == "stdout":
            self._races.feed(line)
        self._tail.append(line)
        if self._on_output is not None:
            try:
                self._on_output(stream, line)
            except Exception:  # noqa: BLE001
                pass

    def _exec(self, argv: list[str], *, cwd: str | None = None, env: dict | None = None,
              feed: Callable | None = None, keep_stdin: bool = False,
              deadline: float | None = None) -> tuple[int | None, str]:
        """Run one command in its own process group, under the reaper
        (_reaper.py: it ends every process the command started, setsid()
        escapes included), streaming its output. Returns (exit code or None,
        how it ended: "exit" | "timeout" | "cancelled")."""
        self._commands.append(list(argv))
        if self._cancel.is_set():
            return None, "cancelled"
        exe = argv[0] if os.sep in argv[0] else \
            shutil.which(argv[0], path=(env if env is not None else os.environ).get("PATH"))
        if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
            raise _StartError(f"cannot start {argv[0]!r}: "
                              + ("Permission denied" if exe and os.path.exists(exe)
                                 else "No such file or directory"))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _REAPER, "--", exe, *argv[1:]], cwd=cwd, env=env,
                stdin=subprocess.PIPE if (feed or keep_stdin) else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise _StartError(f"cannot start {argv[0]!r}: {e.strerror or e}") from e
        with self._lock:
            self._proc = proc
        if self._cancel.is_set():
            _stop(proc, hard=True)
        readers = [threading.Thread(target=self._read, args=(pipe, name), daemon=True)
                   for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
        for t in readers:
            t.start()
        if feed is not None:
            threading.Thread(target=_feed, args=(feed, proc.stdin), daemon=True).start()
        how = "exit"
        stopping = None  # when the reaper was asked to stop
        while not _exited(proc.pid):
            now = time.monotonic()
            if self._cancel.is_set() and how != "cancelled":
                how, stopping = "cancelled", now
                _stop(proc, hard=True)
            elif how == "exit" and deadline is not None and now > deadline:
                how, stopping = "timeout", now
                _stop(proc, hard=False)
            elif stopping is not None and now - stopping > _REAPER_GRACE_S:
                _killpg(proc.pid, signal.SIGKILL)  # the reaper does not answer: the group at least
            time.sleep(0.02)
        # The leader has exited but is not reaped yet, so its group id cannot be
        # reused: end whatever it left behind, forget it (cancel() must not signal
        # a reaped group), then reap.
        _killpg(proc.pid, signal.SIGKILL)
        with self._lock:
            self._proc = None
        rc = proc.wait()
        for t in readers:
            t.join(5)
        if keep_stdin and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        if self._cancel.is_set():
            how = "cancelled"
        return rc, how

    def _read(self, pipe, name: str) -> None:
        try:
            for raw in iter(pipe.readline, b""):
                self._emit(name, raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    # ------------------------------------------------------------ the run

    def _execute(self) -> RunResult:
        plan = self.plan
        runtime = Path(self._tmp) / "stage" / RUNTIME_DIR
        _stage_runtime(runtime)
        pm = PathMap(root=plan.root, excluded=[os.path.realpath(self._tmp)])
        if plan.notebook is not None:  # its frames are on the program's lines
            pm.programs[os.path.realpath(plan.target.path)] = plan.notebook
        if not plan.profile.remote:
            pm.extra_files.append(os.path.realpath(plan.target.path))
        try:
            if plan.profile.remote:
                rc, how, report_list = self._run_remote(runtime, pm)
            else:
                rc, how, report_list = self._run_local(runtime, pm)
        except _StartError as e:
            return RunResult(status=Status.ERROR, error=str(e), argv=self._argv)
        res = self._interpret(rc, how, report_list, pm)
        if plan.spec.compile_for:
            from pallas_lsp.runs.compile_mapping import apply_compiles
            apply_compiles(res, report_list, pm, self._fallback(), list(self._tail),
                           auto=plan.spec.compile_auto)
        return res

    def _launcher_args(self) -> list[str]:
        plan, t = self.plan, self.plan.target
        if t.kind == "pytest":
            return ["-m", "pallas_lsp.runs.launcher", "--pytest", "--", t.nodeid(plan.root),
                    "--capture=tee-sys", *plan.spec.args]
        if t.kind == "notebook":
            starts = ",".join(f"{c.index}:{c.start}" for c in plan.notebook.cells)
            return ["-m", "pallas_lsp.runs.launcher", "--notebook", t.relpath(plan.root), starts]
        return ["-m", "pallas_lsp.runs.launcher", t.relpath(plan.root), *plan.spec.args]

    def _child_env(self, base: dict, report: str, pythonpath: str, remote: bool) -> dict:
        plan = self.plan
        env = dict(base)
        env.update({
            "PALLAS_LSP_REPORT": report,
            "PALLAS_LSP_INTERPRET": "1" if plan.mode == "interpret" else "0",
            "PALLAS_LSP_RACES": "1" if plan.spec.races else "0",
            "PALLAS_LSP_TIMEOUT": f"{plan.timeout:g}",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": pythonpath,
        })
        if remote and plan.profile.watch_stdin:
            env["PALLAS_LSP_WATCH_STDIN"] = "1"
        else:
            env.pop("PALLAS_LSP_WATCH_STDIN", None)
        if plan.mode == "interpret":
            env["JAX_PLATFORMS"] = "cpu"
        env.update(plan.profile.env)
        env.update(plan.spec.env or {})
        if plan.spec.compile_for:
            env["PALLAS_LSP_COMPILE"] = ",".join(plan.spec.compile_for)
            if plan.spec.compile_auto:
                env["PALLAS_LSP_COMPILE_AUTO"] = "1"
            else:
                env.pop("PALLAS_LSP_COMPILE_AUTO", None)
        if plan.devices:
            flags = _DEVICE_FLAG.sub("", env.get("XLA_FLAGS", "")).strip()
            env["XLA_FLAGS"] = (flags + " " if flags else "") + \
                f"--xla_force_host_platform_device_count={plan.devices}"
        return env

    def _run_local(self, runtime: Path, pm: PathMap):
        plan = self.plan
        python = plan.spec.python or plan.profile.python or sys.executable
        exe = shutil.which(python) if os.sep not in python else python
        if not exe or not os.path.exists(exe):
            raise _StartError(f"Python interpreter not found: {python}")
        report = os.path.join(self._tmp, "report.json")
        old = os.environ.get("PYTHONPATH")
        pythonpath = str(runtime) + (os.pathsep + old if old else "")
        env = self._child_env(dict(os.environ), report, pythonpath, remote=False)
        argv = [exe, *self._launcher_args()]
        self._argv = argv
        pm.add_prefix(str(plan.root))
        rc, how = self._exec(argv, cwd=str(plan.root), env=env,
                             deadline=time.monotonic() + plan.timeout + plan.grace)
        reports = []
        try:
            with open(report, encoding="utf-8") as fh:
                reports.append(json.load(fh))
        except (OSError, ValueError):
            pass
        return rc, how, reports

    # ------------------------------------------------------------ remote

    def _remote_argv(self, command: str) -> list[str]:
        p = self.plan.profile
        if p.kind == "ssh":
            return [*_ssh_base(p), p.host, command]
        values = dict(p.vars, remote_dir=p.remote_dir, remote_python=p.remote_python)
        out = []
        for part in p.command:
            if part == "{command}":
                out.append(command)
            else:
                out.append(re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                                  lambda m: values.get(m.group(1), m.group(0)), part))
        return out

    def _run_remote(self, runtime: Path, pm: PathMap):
        plan, p = self.plan, self.plan.profile
        d = p.remote_dir
        copy_deadline = time.monotonic() + p.copy_timeout
        copied = False
        if p.kind == "ssh" and p.copy in ("auto", "rsync") and shutil.which("rsync"):
            rc, how = self._exec(_rsync_argv(p, plan.root, runtime.parent.parent),
                                 deadline=copy_deadline)
            if how != "exit":
                return rc, how, []
            if rc == 0:
                copied = True
            elif p.copy == "rsync" or rc not in (12, 14, 127):
                raise _StartError(f"copying the workspace with rsync failed (exit {rc}): "
                                  + " | ".join(list(self._tail)[-3:]))
        elif p.copy == "rsync":
            raise _StartError("`copy = \"rsync\"` but rsync is not installed here")
        if not copied:
            tar_cmd = " ".join([shlex.join(["mkdir", "-p", "--", d]), "&&",
                                shlex.join(["tar", "-x", "-f", "-", "-C", d])])
            workspace = None if p.copy == "none" else plan.root
            rc, how = self._exec(self._remote_argv(tar_cmd),
                                 feed=lambda out: _write_tar(out, workspace, runtime.parent.parent,
                                                             p.exclude),
                                 deadline=copy_deadline)
            if how != "exit":
                return rc, how, []
            if rc != 0:
                raise _StartError(f"copying the workspace to {p.host or p.name}:{d} failed "
                                  f"(exit {rc}): " + " | ".join(list(self._tail)[-3:]))
        self._tail.clear()
        env = self._child_env({}, "-", RUNTIME_DIR, remote=True)
        env_args = [f"{k}={v}" for k, v in env.items()]
        command = " ".join([shlex.join(["cd", "--", d]), "&&", "exec",
                            shlex.join(["env", *env_args, p.remote_python,
                                        *self._launcher_args()])])
        argv = self._remote_argv(command)
        self._argv = argv
        rc, how = self._exec(argv, keep_stdin=True,
                             deadline=time.monotonic() + plan.timeout + plan.grace)
        # Each marker is a snapshot of one child's whole report: keep the last per
        # process (several with a multi-worker TPU command).
        latest: dict = {}
        for r in self._stream_reports:
            latest[(r.get("host"), r.get("pid"))] = r
            pm.add_prefix(r.get("cwd"))
            pm.add_prefix(r.get("pwd"))
        return rc, how, list(latest.values())

    # ------------------------------------------------------------ result

    def _interpret(self, rc: int | None, how: str, reports: list[dict], pm: PathMap) -> RunResult:
        plan = self.plan
        fallback = self._fallback()
        static = StaticContext(pm)
        diags: list[RunDiagnostic] = []
        outcomes: dict = {}
        for r in reports:
            for k, v in (r.get("outcomes") or {}).items():
                outcomes[k] = outcomes.get(k, 0) + v
            for f in r.get("failures") or []:
                diags.append(with_kernel_findings(failure_diagnostic(f, pm, fallback),
                                                  f.get("kernels"), pm, static))
        for r in reports:  # a notebook's race lines name its cells' compiled names
            pm.renamed.update((name, tuple(where[:2])) for name, where in
                              (r.get("renamed") or {}).items())
        diags += race_diagnostics(self._races.blocks, pm)
        hangs = [r["hang"] for r in reports if r.get("hang")]
        res = RunResult(status=Status.FAILED, argv=self._argv, exit_code=rc, tests=outcomes)
        if how == "cancelled":
            res.status = Status.CANCELLED
            res.diagnostics = dedupe(diags)
            return res
        if hangs or how == "timeout":
            hd = []
            for h in hangs:
                hd += hang_report(h, pm, fallback, plan.timeout, static)
            if not hd:  # killed from outside: the report says where it was
                last = reports[-1] if reports else {}
                hd += hang_report({"current": last.get("current"),
                                   "dispatched": last.get("dispatched"), "timeout": plan.timeout},
                                  pm, fallback, plan.timeout, static)
            res.status = Status.TIMEOUT
            res.diagnostics = dedupe(hd + diags)
            return res
        res.diagnostics = dedupe(diags)
        tail = " | ".join(x for x in list(self._tail)[-4:] if x.strip())
        if not reports:
            if plan.profile.kind == "ssh" and rc == 255:
                res.status, res.error = Status.ERROR, f"ssh failed: {tail}"
            else:
                res.status = Status.ERROR
                res.error = f"the run did not start (exit {rc}): {tail}"
            return res
        child_error = next((r.get("error") for r in reports if r.get("error")), None)
        interpret_error = next((r.get("interpret_error") for r in reports
                                if r.get("interpret_error")), None)
        if child_error:
            res.status, res.error = Status.ERROR, child_error
        elif interpret_error and plan.mode == "interpret":
            # every result would be meaningless; keep the diagnostics anyway
            res.status = Status.ERROR
            res.error = f"could not switch on TPU interpret mode: {interpret_error}"
            if "No module named 'jax" in str(interpret_error):
                res.error += (" (jax is not installed for the Python that runs it: "
                              "`pip install 'pallas-lsp[run]'` there installs jax for CPU)")
        elif rc == 0 and not diags:
            res.status = Status.PASSED
        elif diags:
            res.status = Status.FAILED
        elif plan.target.kind == "pytest" and rc in _PYTEST_EXIT:
            res.status, res.error = Status.ERROR, f"{_PYTEST_EXIT[rc]}: {tail}"
        else:
            res.status = Status.FAILED
            cur = next((r.get("current") for r in reversed(reports) if r.get("current")), None)
            what = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
            path, line = fallback
            if cur and cur.get("path") and pm.local(cur["path"]):
                path, line = pm.local(cur["path"]), max((cur.get("line") or 1) - 1, 0)
            res.diagnostics = [RunDiagnostic(
                path=pm.display(path), span=pm.span(path, line + 1), code=CODE_FAILURE,
                message=f"The run failed ({what}) without a Python exception"
                        + (f" in {cur['nodeid']}" if cur else "") + (f": {tail}" if tail else ""),
                test=cur.get("nodeid") if cur else None)]
        return res

    def _fallback(self) -> tuple[str, int]:
        t = self.plan.target
        if t.path.is_file():
            return str(t.path), test_def_line(t.path, t.test_function()) or 0
        return str(t.path), 0


class _StartError(Exception):
    pass


# ---------------------------------------------------------------- helpers


def _exited(pid: int) -> bool:
    """True once `pid` has exited; does not reap it (WNOWAIT)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_REAPER = str(Path(__file__).resolve().parent / "_reaper.py")
_REAPER_GRACE_S = 3.0  # the reaper's own grace is 1 s


def _stop(proc: subprocess.Popen, hard: bool) -> None:
    """Ask the reaper to end the command and all it started: SIGTERM (then
    SIGKILL after 1 s), or SIGKILL at once when `hard`."""
    try:
        os.kill(proc.pid, signal.SIGUSR1 if hard else signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(fn, stdin) -> None:
    try:
        fn(stdin)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass


def _stage_runtime(dest: Path) -> None:
    """Copy the child's code (pallas_lsp/__init__.py, pallas_lsp/runs/*.py)."""
    here = Path(__file__).resolve().parent
    pkg = dest / "pallas_lsp"
    (pkg / "runs").mkdir(parents=True, exist_ok=True)
    init = here.parent / "__init__.py"
    (pkg / "__init__.py").write_bytes(init.read_bytes() if init.is_file() else b"")
    for f in here.glob("*.py"):
        shutil.copyfile(f, pkg / "runs" / f.name)


def _excluded(rel: str, name: str, patterns) -> bool:
    for pat in patterns:
        if "/" in pat:
            if fnmatch(rel, pat.lstrip("/")):
                return True
        elif fnmatch(name, pat):
            return True
    return False


def _write_tar(out, workspace: Path | None, stage: Path, exclude) -> None:
    """An uncompressed tar stream of the workspace (minus `exclude`) and the
    staged runtime (`.pallas-lsp/runtime/...`)."""

    def norm(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti

    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        if workspace is not None:
            for dirpath, dirnames, filenames in os.walk(workspace):
                rel_dir = os.path.relpath(dirpath, workspace)
                rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
                keep = []
                for dn in sorted(dirnames):
                    rel = f"{rel_dir}/{dn}" if rel_dir else dn
                    if _excluded(rel, dn, exclude) or rel == ".pallas-lsp":
                        continue
                    keep.append(dn)
                    if os.path.islink(os.path.join(dirpath, dn)):
                        tar.add(os.path.join(dirpath, dn), arcname=rel, recursive=False,
                                filter=norm)
                dirnames[:] = [dn for dn in keep if not os.path.islink(os.path.join(dirpath, dn))]
                for fn in sorted(filenames):
                    rel = f"{rel_dir}/{fn}" if rel_dir else fn
                    if _excluded(rel, fn, exclude):
                        continue
                    try:
                        tar.add(os.path.join(dirpath, fn), arcname=rel, recursive=False,
                                filter=norm)
                    except OSError:
                        continue
        tar.add(stage / ".pallas-lsp", arcname=".pallas-lsp", filter=norm)


def _ssh_base(p: Profile) -> list[str]:
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={p.strict_host_key_checking}",
            "-o", f"ConnectTimeout={p.connect_timeout}"]
    if p.known_hosts:
        argv += ["-o", f'UserKnownHostsFile="{p.known_hosts}"']
    if p.identity_file:
        argv += ["-i", p.identity_file, "-o", "IdentitiesOnly=yes"]
    if p.port:
        argv += ["-p", str(p.port)]
    if p.user:
        argv += ["-l", p.user]
    for opt in p.ssh_options:
        argv += ["-o", opt]
    return argv


def _rsync_argv(p: Profile, root: Path, stage: Path) -> list[str]:
    mkdir = shlex.join(["mkdir", "-p", "--", p.remote_dir]) + " && rsync"
    argv = ["rsync", "-a", "--protect-args", "-e", shlex.join(_ssh_base(p)), "--rsync-path", mkdir]
    argv += [f"--exclude={pat}" for pat in p.exclude]
    argv += ["--", f"{root}/", f"{stage}/.pallas-lsp",
             f"{p.host}:{p.remote_dir}/"]
    return argv


def _summary(plan: _Plan, r: RunResult) -> str:
    n = len(r.diagnostics)
    parts = [f"{n} diagnostic{'s' if n != 1 else ''}"]
    if r.tests:
        order = ["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
        counts = ", ".join(f"{r.tests[k]} {k}" for k in sorted(r.tests, key=lambda k: (
            order.index(k) if k in order else 99, k)))
        parts.append(counts)
    where = f"{plan.profile.name}, {plan.mode}" + (", races" if plan.spec.races else "")
    if plan.spec.compile_for and r.compile_skipped:
        parts.append(f"TPU-only errors not checked: {r.compile_skipped}")
    elif plan.spec.compile_for:
        where += ", compile " + ",".join(plan.spec.compile_for)
        parts.append(_compiled_count(r))
    status = r.status.value
    if r.status is Status.TIMEOUT:
        status = f"timeout after {plan.timeout:g} s"
    head = f"pallas-lsp run {plan.spec.target}: {status}"
    if r.status is Status.ERROR and r.error:
        head += f": {r.error}"
    return f"{head} ({'; '.join(parts)}) in {r.duration:.1f} s [{where}]".replace("\n", " ")


def _compiled_count(r: RunResult) -> str:
    ok = len(r.compiles)
    # compile_mapping's diagnostics (PAL4xx, PAL903, or a static rule's code such as
    # PAL305 that the compiler refused) all say which generations they are for
    failed = sum(1 for d in r.diagnostics if d.code == "PAL903" or d.code.startswith("PAL4")
                 or "(compiling for TPU " in d.message)
    return f"{ok} compiled, {failed} compile error{'s' if failed != 1 else ''}"
