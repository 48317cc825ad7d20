"""Runs from the editor: the `pallas-lsp.run` and `pallas-lsp.cancelRun`
commands, output streamed to the client, and the run diagnostics.

The server never runs user code on its own: a run starts only from an
explicit `workspace/executeCommand` (or a save with `runs.runOnSave` on).

* Output: every line goes to `window/logMessage` (type Log, prefixed
  "[run] "); with work-done progress, the latest line is also reported in a
  cancellable progress (at most 10 reports a second). The run ends with a
  one-line summary (progress end, log, `window/showMessage`).
* Cancel: `pallas-lsp.cancelRun`, `window/workDoneProgress/cancel`, a
  `$/cancelRequest` of the run command, a new run of the same file, shutdown.
  Each kills the run's whole process group (`RunHandle.cancel`).
* Diagnostics: kept per file URI here, apart from the engine's findings, and
  published merged with them (`diagnostics_for` is called by the server's own
  publish / pull). Files that are not open get their own publish. A new run
  clears them all; an edit clears that file's. A notebook's are on its
  program's lines (engine/cells.py), kept under its program document and
  split per cell with the engine's (lsp/notebooks.py); a notebook that is not
  open has no cells to show them on.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from pallas_lsp.lsp import convert
from pallas_lsp.lsp.code_lens import RUN_COMMAND, find_sites
from pallas_lsp.lsp.documents import to_fs_path
from pallas_lsp.lsp.positions import LineIndex

if TYPE_CHECKING:  # pragma: no cover
    from pallas_lsp.lsp.client_features import ClientFeatures
    from pallas_lsp.lsp.documents import DocumentStore
    from pallas_lsp.lsp.settings import Settings
    from pallas_lsp.runs import RunDiagnostic, RunResult

log = logging.getLogger(__name__)

CANCEL_COMMAND = "pallas-lsp.cancelRun"
COMMANDS = [RUN_COMMAND, CANCEL_COMMAND]
SOURCE = "pallas-lsp run"
LOG_PREFIX = "[run] "
REPORT_INTERVAL_S = 0.1  # at most 10 progress reports a second
_REQUEST_FAILED = -32803  # LSP's RequestFailed
_TEST_FILE = re.compile(r"(^test_.*\.py$)|(^.*_test\.py$)")
_TEST_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*(\[.*\])?$")


class RunArgsError(ValueError):
    pass


@dataclass(frozen=True)
class RunRequest:
    uri: str
    target: str | None = None
    mode: str | None = None
    races: bool = False
    profile: str | None = None
    kind: str = "auto"
    compile: tuple | None = None  # TPU generations to compile for (None: the default compile)


MAX_URI = 8192  # longer is no file of a workspace; refused without echoing it


def check_uri(uri: Any, command: str) -> str:
    """A command's `uri` argument, validated (raises RunArgsError)."""
    if not isinstance(uri, str) or not uri:
        raise RunArgsError(f"{command}: `uri` (a file URI) is required, got {type(uri).__name__}")
    if len(uri) > MAX_URI:
        raise RunArgsError(f"{command}: `uri` is {len(uri):,} characters long (at most {MAX_URI:,})")
    if "\x00" in uri:
        raise RunArgsError(f"{command}: `uri` holds a NUL character")
    return uri


def parse_run_args(args: Any) -> RunRequest:
    """The one argument object of `pallas-lsp.run` (raises RunArgsError)."""
    if isinstance(args, (list, tuple)):
        if len(args) != 1:
            raise RunArgsError(f"{RUN_COMMAND} takes one argument object "
                               '{"uri", "target", "mode", "races", "profile"}')
        args = args[0]
    if not isinstance(args, dict):
        raise RunArgsError(f"{RUN_COMMAND}: the argument must be an object, got {type(args).__name__}")
    unknown = set(args) - {"uri", "target", "mode", "races", "profile", "kind", "compile"}
    if unknown:
        names = sorted(_short(k, 40) for k in unknown)
        raise RunArgsError(f"{RUN_COMMAND}: unknown argument(s) {', '.join(names[:5])}"
                           + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    uri = check_uri(args.get("uri"), RUN_COMMAND)
    target = args.get("target")
    if target is not None and (not isinstance(target, str) or len(target) > MAX_URI
                               or "\x00" in target):
        raise RunArgsError(f"{RUN_COMMAND}: `target` must be a string (at most {MAX_URI:,} "
                           "characters, no NUL) or null")
    mode = args.get("mode")
    if mode is not None and mode not in ("interpret", "tpu"):
        raise RunArgsError(f'{RUN_COMMAND}: `mode` must be "interpret" or "tpu", got {_short(mode, 80)}')
    races = args.get("races", False)
    if races is None:
        races = False
    if not isinstance(races, bool):
        raise RunArgsError(f"{RUN_COMMAND}: `races` must be true or false")
    profile = args.get("profile")
    if profile is not None and (not isinstance(profile, str) or not profile.strip()):
        raise RunArgsError(f"{RUN_COMMAND}: `profile` must be a profile name or null")
    kind = args.get("kind") or "auto"
    if kind not in ("auto", "pytest", "script"):
        raise RunArgsError(f'{RUN_COMMAND}: `kind` must be "auto", "pytest" or "script"')
    compile_for = args.get("compile")
    if compile_for is None:
        pass  # runs.compileByDefault decides
    elif compile_for is False or compile_for == []:
        compile_for = ()
    elif compile_for is True:
        compile_for = ("*",)  # the runs.compileGenerations setting
    elif isinstance(compile_for, list) and all(isinstance(g, str) for g in compile_for):
        compile_for = tuple(compile_for)
    else:
        raise RunArgsError(f'{RUN_COMMAND}: `compile` must be true, false or a list of TPU '
                           'generations such as ["v5e", "v6e"]')
    return RunRequest(uri=uri, target=target or None, mode=mode, races=races,
                      profile=profile.strip() if profile else None, kind=kind,
                      compile=compile_for)


def is_test_file(path: str, text: str | None = None) -> bool:
    """What runOnSave runs: `test_*.py` / `*_test.py`, or a file with a test
    that runs a kernel."""
    if _TEST_FILE.match(os.path.basename(path)):
        return True
    return text is not None and any(s.kind == "pytest" for s in find_sites(text, path))


@dataclass
class ActiveRun:
    id: int
    uri: str
    target: str
    key: str  # real path of the target file: one run per file
    future: asyncio.Future
    handle: Any = None
    token: str | None = None
    begun: bool = False
    finished: bool = False
    last_report: float = 0.0
    pending: str | None = None
    flush: asyncio.TimerHandle | None = None
    lines: int = 0
    request_id: Any = None  # the pallas-lsp.run request's id ($/cancelRequest)
    started: float = field(default_factory=time.monotonic)


class RunsHost(Protocol):
    """What RunManager uses of the server (`lsp/server.py`'s PallasLanguageServer,
    a pygls LanguageServer): its state, and the pygls calls it makes."""

    settings: "Settings"
    feats: "ClientFeatures"
    documents: "DocumentStore"
    notebooks: Any  # lsp/notebooks.NotebookStore
    initialized: bool
    protocol: Any
    workspace: Any
    work_done_progress: Any

    def root_path(self) -> str | None: ...

    def schedule_diagnostics(self, uri: str, delay_s: float | None = None) -> None: ...

    def _request_quietly(self, coro) -> None: ...

    def window_show_message_request_async(self, params: types.ShowMessageRequestParams) -> Any: ...

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    def window_log_message(self, params: types.LogMessageParams) -> None: ...

    def workspace_diagnostic_refresh_async(self, params: None) -> Any: ...

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...


class RunManager:
    """One per server: the runs going on and the run diagnostics."""

    def __init__(self, server: RunsHost):
        self.server = server
        self.runs: dict[int, ActiveRun] = {}
        self._next_id = 1
        self.store: dict[str, list["RunDiagnostic"]] = {}  # file URI -> diagnostics
        self.generation = 0  # bumped whenever the store changes (pull result ids)
        self._pushed: set[str] = set()  # URIs published on their own (not open)
        self._allowed: set[str] = set()  # repository profiles allowed in this session

    # ------------------------------------------------------------ commands

    async def run_command(self, *args: Any) -> dict:
        """`pallas-lsp.run`: start a run, stream it, and answer with its
        summary once it has finished."""
        if not self.server.settings.runs_enable:
            raise JsonRpcException(code=_REQUEST_FAILED,
                                   message="pallas-lsp: runs are disabled (pallas-lsp.runs.enable)")
        from pallas_lsp.runs.profiles import ProjectProfileNotAllowed

        try:
            req = parse_run_args(args)
        except RunArgsError as exc:
            raise JsonRpcInvalidParams(message=str(exc)) from None
        try:
            active = self.start(req)
        except ProjectProfileNotAllowed as exc:  # the repository's profile: ask the user
            if not await self._consent(exc.project):
                raise JsonRpcException(code=_REQUEST_FAILED, message=f"pallas-lsp: {exc}") from None
            active = self.start(req)
        active.request_id = getattr(self.server.protocol, "msg_id", None)
        try:
            result = await asyncio.shield(active.future)
        except asyncio.CancelledError:  # $/cancelRequest of the command: stop the run too
            if active.handle is not None:
                active.handle.cancel()
            raise
        return {"status": result.status.value, "summary": result.summary,
                "diagnostics": len(result.diagnostics), "tests": dict(result.tests),
                "compiled": [c["text"] for c in result.compiles],
                "duration": round(result.duration, 3), "error": result.error}

    async def _consent(self, project) -> bool:
        """Ask before a profile of the repository's pyproject.toml runs
        anything ("Allow": this session; "Always allow": remembered in the
        user's config folder). Both hold for that exact content only."""
        from pallas_lsp.runs import consent

        allow, always = "Allow", "Always allow"
        try:
            choice = await self.server.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=f"pallas-lsp: the run profile '{project.name}' comes from the "
                            f"repository ({project.source}), not from your settings. It would "
                            f"{project.summary}. Allow it?",
                    actions=[types.MessageActionItem(title=t) for t in (allow, always, "Cancel")]))
        except Exception as exc:  # no answer: no run
            log.info("window/showMessageRequest failed: %s", exc)
            return False
        title = getattr(choice, "title", None)
        if title not in (allow, always):
            return False
        self._allowed.add(project.fingerprint)
        if title == always:
            try:
                consent.remember(project.fingerprint, project.name, project.source)
            except OSError as exc:
                self._log(f"pallas-lsp: could not remember the choice: {exc}",
                          types.MessageType.Warning)
        return True

    def allowed_roots(self) -> list[str]:
        """Real paths of the folders runs may touch: the workspace folders
        and the root, plus the user's `runs.allowedRoots`."""
        folders: list[str] = []
        try:
            for folder in (self.server.workspace.folders or {}).values():
                if folder.uri.startswith("file:"):
                    folders.append(to_fs_path(folder.uri))
        except Exception:  # not initialized
            pass
        root = self.server.root_path()
        if root:
            folders.append(root)
        folders += list(self.server.settings.runs_allowed_roots)
        return [f for f in dict.fromkeys(folders) if f and os.path.isdir(f)]

    def cancel_command(self, *args: Any) -> dict:
        """`pallas-lsp.cancelRun` with {"uri"} (runs started from that file or
        of that target file) or nothing (every run)."""
        uri = None
        if args:
            arg = args[0] if len(args) == 1 else None
            if isinstance(arg, dict) and set(arg) <= {"uri"}:
                uri = arg.get("uri")
            elif isinstance(arg, str):
                uri = arg
            elif arg is not None or len(args) > 1:
                raise JsonRpcInvalidParams(message=f'{CANCEL_COMMAND} takes {{"uri": ...}} or nothing')
            if uri is not None:
                try:
                    uri = check_uri(uri, CANCEL_COMMAND)
                except RunArgsError as exc:
                    raise JsonRpcInvalidParams(message=str(exc)) from None
        return {"cancelled": self.cancel(uri)}

    # ------------------------------------------------------------ runs

    def _spec(self, req: RunRequest):
        from pallas_lsp.runs import RunSpec
        from pallas_lsp.runs.target import TargetError

        from pallas_lsp.runs import consent

        notebook = self.server.notebooks.of_cell(req.uri)  # a cell runs its notebook
        uri = notebook.uri if notebook is not None else req.uri
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if not path:
            raise TargetError(f"{_short(req.uri, 80)}: only file URIs can be run")
        roots = self.allowed_roots()
        cwd = _folder_of(path, roots)
        if cwd is None:
            raise TargetError(f"{_short(path, 200)} is not inside a workspace folder; pallas-lsp runs only "
                              "files of the open workspace (pallas-lsp.runs.allowedRoots in "
                              "your settings allows more folders)")
        target = req.target
        if target is None:
            target = path
        elif target.startswith("::"):
            target = path + target
        elif "::" not in target and not os.path.exists(os.path.join(cwd, target)) \
                and _TEST_NAME.match(target):
            target = f"{path}::{target}"  # a bare test name: in the file of `uri`
        elif "::" in target and _TEST_NAME.match(target) \
                and not os.path.exists(os.path.join(cwd, target.split("::", 1)[0])):
            target = f"{path}::{target}"  # Class::test
        if _folder_of(os.path.join(cwd, target.split("::", 1)[0]), roots) is None:
            raise TargetError(f"{target.split('::', 1)[0]} is outside the workspace folders "
                              "(after following symbolic links); pallas-lsp.runs.allowedRoots "
                              "in your settings allows more folders")
        prefix = cwd.rstrip(os.sep) + os.sep
        if target.startswith(prefix):  # shorter summaries: relative to the workspace
            target = target[len(prefix):]
        s = self.server.settings
        auto = req.compile is None and s.runs_compile_by_default
        if req.compile is None:
            compile_for = s.runs_compile_generations if auto else ()
        else:
            compile_for = s.runs_compile_generations if req.compile == ("*",) else req.compile
        return RunSpec(target=target, cwd=cwd, mode=req.mode, races=req.races,
                       profile=req.profile or s.runs_profile,
                       profiles=dict(s.runs_profiles) or None,
                       python=s.python_interpreter, timeout=float(s.runs_timeout_s),
                       devices=s.runs_devices, kind=req.kind,
                       compile_for=compile_for, compile_auto=auto,
                       allow_project_profiles=frozenset(self._allowed | consent.allowed()))

    def start(self, req: RunRequest) -> ActiveRun:
        """Validate and start a run (raises JsonRpcInvalidParams for a bad
        target, profile or option). The progress is set up in the background."""
        from pallas_lsp.runs import start_run
        from pallas_lsp.runs.profiles import ProjectProfileNotAllowed
        from pallas_lsp.runs.target import RunSpecError

        loop = asyncio.get_running_loop()
        try:
            spec = self._spec(req)
        except RunSpecError as exc:
            raise JsonRpcInvalidParams(message=str(exc)) from None
        run_id = self._next_id
        self._next_id += 1
        active = ActiveRun(id=run_id, uri=req.uri, target=spec.target, key="",
                           future=loop.create_future())

        def on_output(stream: str, line: str) -> None:  # reader threads
            _call_soon(loop, self._on_line, active, line)

        def on_done(result) -> None:  # the run's thread
            _call_soon(loop, self._on_done, active, result)

        try:
            handle = start_run(spec, on_output=on_output, on_done=on_done)
        except ProjectProfileNotAllowed:
            raise  # run_command asks the user
        except RunSpecError as exc:
            raise JsonRpcInvalidParams(message=str(exc)) from None
        active.handle = handle
        plan = getattr(handle, "plan", None)
        tpath = getattr(getattr(plan, "target", None), "path", None) or to_fs_path(req.uri)
        active.key = os.path.realpath(str(tpath))
        # one run per file: the new one replaces the old one
        for other in list(self.runs.values()):
            if other.key == active.key:
                other.handle.cancel()
        self.runs[run_id] = active
        self.clear_all()
        log.info("run %d started: %s", run_id, spec.target)
        self._warn_if_unsaved(req.uri)
        if self.server.feats.work_done_progress:
            asyncio.ensure_future(self._begin_progress(active, spec))
        return active

    def _warn_if_unsaved(self, uri: str) -> None:
        doc = self.server.documents.get(uri)
        if doc is None or not doc.path:
            return
        try:
            with open(doc.path, encoding="utf-8", newline="") as fh:
                saved = fh.read()
        except (OSError, UnicodeDecodeError):
            return
        if saved != doc.text:
            self._log(f"pallas-lsp run: {os.path.basename(doc.path)} has unsaved changes; "
                      "the run uses the saved file", types.MessageType.Warning)

    async def _begin_progress(self, active: ActiveRun, spec) -> None:
        token = f"pallas-lsp-run-{uuid.uuid4()}"
        progress = self.server.work_done_progress
        try:
            await progress.create_async(token)
        except Exception as exc:  # the client refused: no progress, the log still works
            log.info("window/workDoneProgress/create failed: %s", exc)
            return
        if active.finished:  # the run ended while the client was answering
            progress.tokens.pop(token, None)
            return
        active.token = token
        where = f"{spec.mode or 'interpret'}" + (", races" if spec.races else "") + (
            f", compile {','.join(spec.compile_for)}" if spec.compile_for else "")
        progress.begin(token, types.WorkDoneProgressBegin(
            title="pallas-lsp run", message=f"{spec.target} [{where}]", cancellable=True))
        active.begun = True
        if active.pending:
            self._report(active)

    def cancel(self, uri: str | None = None) -> int:
        """Cancel the runs started from `uri` or running that file (all runs
        when None). Returns how many were cancelled."""
        key = None
        if uri:
            path = to_fs_path(uri) if uri.startswith("file:") else uri
            key = os.path.realpath(path) if path else None
        n = 0
        for active in list(self.runs.values()):
            if uri is None or active.uri == uri or active.key == key:
                active.handle.cancel()
                n += 1
        return n

    def cancel_request(self, request_id: Any) -> None:
        """$/cancelRequest of a `pallas-lsp.run` request."""
        for active in list(self.runs.values()):
            if active.request_id is not None and str(active.request_id) == str(request_id):
                active.handle.cancel()

    def cancel_token(self, token: Any) -> None:
        """window/workDoneProgress/cancel"""
        for active in list(self.runs.values()):
            if active.token is not None and active.token == token:
                active.handle.cancel()

    def cancel_all(self, wait_s: float = 0.0) -> None:
        """Cancel every run (shutdown / exit); wait up to `wait_s` seconds for
        their process groups to be gone."""
        handles = [a.handle for a in self.runs.values() if a.handle is not None]
        for h in handles:
            h.cancel()
        deadline = time.monotonic() + wait_s
        for h in handles:
            try:
                h.result(max(0.0, deadline - time.monotonic()))
            except Exception:
                pass

    async def shutdown(self, wait_s: float) -> None:
        """Cancel every run and wait (without blocking the loop) until they
        have ended."""
        active = list(self.runs.values())
        for a in active:
            a.handle.cancel()
        if active:
            await asyncio.wait([a.future for a in active], timeout=wait_s)

    def start_on_save(self, uri: str) -> None:
        """runs.runOnSave: a saved test file runs (interpret mode)."""
        s = self.server.settings
        if not (s.runs_enable and s.runs_run_on_save) or not uri.startswith("file:"):
            return
        path = to_fs_path(uri)
        doc = self.server.documents.get(uri)
        if not path or not is_test_file(path, doc.text if doc is not None else None):
            return

        async def go():
            try:
                await self.run_command({"uri": uri})
            except Exception as exc:
                log.info("run on save of %s failed: %s", uri, exc)

        asyncio.ensure_future(go())

    # ------------------------------------------------------------ streaming

    def _on_line(self, active: ActiveRun, line: str) -> None:
        if active.finished:
            return
        active.lines += 1
        self._log(LOG_PREFIX + line)
        if not line.strip():
            return
        active.pending = line
        if not active.begun:
            return
        now = time.monotonic()
        wait = REPORT_INTERVAL_S - (now - active.last_report)
        if wait <= 0:
            self._report(active)
        elif active.flush is None:
            active.flush = asyncio.get_running_loop().call_later(wait, self._flush, active)

    def _flush(self, active: ActiveRun) -> None:
        active.flush = None
        if not active.finished and active.pending is not None:
            self._report(active)

    def _report(self, active: ActiveRun) -> None:
        line, active.pending = active.pending, None
        active.last_report = time.monotonic()
        if line is None or active.token is None:
            return
        try:
            self.server.work_done_progress.report(active.token, types.WorkDoneProgressReport(
                message=_short(line), cancellable=True))
        except Exception as exc:
            log.info("progress report failed: %s", exc)

    def _log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        try:
            self.server.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception as exc:
            log.info("window/logMessage failed: %s", exc)

    def _on_done(self, active: ActiveRun, result: "RunResult") -> None:
        from pallas_lsp.runs import Status

        active.finished = True
        if active.flush is not None:
            active.flush.cancel()
            active.flush = None
        self.runs.pop(active.id, None)
        if result.status is not Status.CANCELLED and result.diagnostics:
            self.add(result.diagnostics)
        summary = result.summary or f"pallas-lsp run {active.target}: {result.status.value}"
        for c in result.compiles:  # `compile`: one line per kernel and generation compiled
            self._log(c["text"], types.MessageType.Info)
        self._log(summary, types.MessageType.Info)
        if active.token is not None:
            progress = self.server.work_done_progress
            try:
                progress.end(active.token, types.WorkDoneProgressEnd(message=_short(summary)))
            except Exception as exc:
                log.info("progress end failed: %s", exc)
            progress.tokens.pop(active.token, None)
        if result.status is not Status.CANCELLED:
            level = types.MessageType.Info if result.status is Status.PASSED \
                else types.MessageType.Error
            try:
                self.server.window_show_message(types.ShowMessageParams(type=level, message=summary))
            except Exception as exc:
                log.info("window/showMessage failed: %s", exc)
        if not active.future.done():
            active.future.set_result(result)

    # ------------------------------------------------------------ diagnostics store

    def add(self, diagnostics: list["RunDiagnostic"]) -> None:
        changed = set()
        for d in diagnostics:
            uri = self._uri_for(d.path)
            if d.path.lower().endswith(".ipynb") and self.server.notebooks.by_program(uri) is None:
                continue  # a notebook not open: no cell to show it on
            self.store.setdefault(uri, []).append(d)
            changed.add(uri)
        self.generation += 1
        self._publish(changed)

    def clear_all(self) -> None:
        if not self.store:
            return
        changed = set(self.store)
        self.store.clear()
        self.generation += 1
        self._publish(changed)

    def clear_file(self, uri: str) -> bool:
        """An edit of `uri`: drop its run diagnostics. The edit's own publish,
        or the client's next pull, shows the rest."""
        if self.store.pop(uri, None) is None:
            return False
        self.generation += 1
        if uri in self._pushed:
            self._pushed.discard(uri)
            self._push(uri, [])
        return True

    def _separate(self, uri: str) -> bool:
        """Do `uri`'s run diagnostics go in a publish of their own? Yes when
        the file is not open, and for a client that pulls but cannot be told
        to pull again (no workspace/diagnostic/refresh)."""
        feats = self.server.feats
        if self.server.notebooks.by_program(uri) is not None:
            return False  # a notebook's cells: pushed with the engine's, split per cell
        return self.server.documents.get(uri) is None or \
            (feats.pull_diagnostics and not feats.diagnostic_refresh)

    def merged_for(self, uri: str, index: LineIndex) -> list[types.Diagnostic]:
        """What goes with the engine's diagnostics of an open document."""
        if self._separate(uri):
            return []
        return self.diagnostics_for(uri, index)

    def opened(self, uri: str) -> None:
        """`uri` was opened: with push, its run diagnostics now go out with the
        engine's (same URI: that publish replaces this one); with pull and
        refresh they are pulled, so the separate publish is cleared."""
        if uri in self._pushed and not self._separate(uri):
            self._pushed.discard(uri)
            if self.server.feats.pull_diagnostics:
                self._push(uri, [])

    def closed(self, uri: str) -> list[types.Diagnostic]:
        """`uri` was closed: what to publish for it (its run diagnostics, read
        against the file on disk)."""
        diags = self.diagnostics_for(uri)
        if diags:
            self._pushed.add(uri)
        return diags

    def _publish(self, uris: set[str]) -> None:
        server = self.server
        refresh = False
        for uri in uris:
            if not self._separate(uri):
                if server.feats.pull_diagnostics and server.notebooks.by_program(uri) is None:
                    refresh = True
                else:
                    server.schedule_diagnostics(uri, 0.0)
            else:
                doc = server.documents.get(uri)
                diags = self.diagnostics_for(uri, doc.index if doc is not None else None)
                if diags or uri in self._pushed:
                    self._push(uri, diags)
                if diags:
                    self._pushed.add(uri)
                else:
                    self._pushed.discard(uri)
        if refresh and server.feats.diagnostic_refresh and server.initialized:
            server._request_quietly(server.workspace_diagnostic_refresh_async(None))

    def _push(self, uri: str, diags: list[types.Diagnostic]) -> None:
        try:
            self.server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diags))
        except Exception as exc:
            log.info("publishing run diagnostics for %s failed: %s", uri, exc)

    def _uri_for(self, path: str) -> str:
        real = os.path.realpath(path)
        for uri in self.server.documents.uris():
            doc = self.server.documents.get(uri)
            if doc is not None and doc.path and os.path.realpath(doc.path) == real:
                return uri
        return Path(path).as_uri()

    def _index_for(self, path: str, cache: dict) -> LineIndex | None:
        real = os.path.realpath(path)
        if real in cache:
            return cache[real]
        index = None
        text = self.server.documents.text_for_path(path)
        if text is None:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                text = None
        if text is not None:
            index = LineIndex(text)
        cache[real] = index
        return index

    def diagnostics_for(self, uri: str, index: LineIndex | None = None) -> list[types.Diagnostic]:
        """The run diagnostics of `uri` as LSP diagnostics, positions from
        `index` (the open document's), else from the file on disk."""
        found = self.store.get(uri)
        if not found:
            return []
        feats, settings = self.server.feats, self.server.settings
        cache: dict = {}
        if index is None:
            index = self._index_for(found[0].path, cache)
        else:
            cache[os.path.realpath(found[0].path)] = index
        out = []
        for d in found:
            message = d.message
            related = None
            if d.related:
                if feats.related_information:
                    related = [types.DiagnosticRelatedInformation(
                        location=types.Location(self._uri_for(r.path), _range(
                            r.span, self._index_for(r.path, cache), feats.encoding)),
                        message=r.message) for r in d.related]
                else:
                    message += "".join(f"\n{Path(r.path).name}:{r.span.line + 1}: {r.message}"
                                       for r in d.related)
            description = None
            if feats.code_description:
                url = convert.code_url(d.code, settings)
                if url:
                    description = types.CodeDescription(href=url)
            level = getattr(d.severity, "value", str(d.severity))
            out.append(types.Diagnostic(
                range=_range(d.span, index, feats.encoding), message=message,
                severity=convert.LEVELS.get(level, types.DiagnosticSeverity.Error),
                code=d.code, code_description=description, source=SOURCE,
                related_information=related))
        return out


# ---------------------------------------------------------------- helpers


def _range(span, index: LineIndex | None, encoding: str) -> types.Range:
    if index is None:  # the file cannot be read: code points as they are
        return types.Range(types.Position(span.line, span.col),
                           types.Position(span.end_line, span.end_col))
    return convert.to_range(span, index, encoding)


def _inside(path: str, folder: str) -> bool:
    p, f = os.path.abspath(path), os.path.abspath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _folder_of(path: str, folders: list[str]) -> str | None:
    """The folder of `folders` that holds `path` once every symbolic link is
    resolved (the innermost one), as it was given; None when outside all."""
    real = os.path.realpath(path)
    inside = [f for f in folders if _inside(real, os.path.realpath(f))]
    return max(inside, key=lambda f: len(os.path.realpath(f))) if inside else None


def _short(value: Any, limit: int = 200) -> str:
    """One line for a progress report or an error message (any value; never
    the whole of a huge input)."""
    line = (value if isinstance(value, str) else repr(value)).replace("\t", " ").strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _call_soon(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the loop is closed: the server is exiting
        pass
