"""The language server: the pygls instance and the features it registers.

Thin on purpose: each handler gets a document snapshot, awaits the engine's
Analysis for exactly that text, and hands both to a converter module
(convert, hover, inlay, noqa_edit). Nothing here knows about Pallas.

Start it with `run()` (stdio) or `run(tcp="127.0.0.1:2087")`.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import time
import uuid
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.io_ import StdoutWriter
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification, RPCNotification, RPCRequest

from pallas_lsp import __version__
from pallas_lsp import catalog as _catalog
from pallas_lsp.engine.model import Analysis, Api, Finding, Unknown
from pallas_lsp.lsp import code_lens, convert, editor_features, framing, hover as hover_mod, \
    inlay, limits, noqa_edit, notebooks, settings as settings_mod
from pallas_lsp.lsp.api_docs import ApiDocs
from pallas_lsp.lsp.analyses import AnalysisService, Superseded
from pallas_lsp.lsp.client_features import ClientFeatures
from pallas_lsp.lsp.debounce import Debouncer
from pallas_lsp.lsp.documents import DocumentStore, Snapshot, change_problem, \
    notebook_change_problem, to_fs_path
from pallas_lsp.lsp.workspace import WorkspaceIndex
from pallas_lsp.lsp.jedi_docs import JediDocs
from pallas_lsp.lsp.runs_bridge import CANCEL_COMMAND, RUN_COMMAND, RunManager
from pallas_lsp.lsp.selection import ProjectConfigs, Selected, select
from pallas_lsp.lsp.settings import SECTION, Settings

log = logging.getLogger("pallas_lsp.lsp")

GC_EVERY_S = 5.0  # a collection when the editor is quiet (a full one every sixth)

DOCUMENT_STATE = "pallas-lsp/documentState"  # test hook: the server's copy of a document
_IGNORED = "$/pallas-lsp/ignoredMessage"


# ---------------------------------------------------------------- protocol


class PallasProtocol(LanguageServerProtocol):
    """pygls' protocol with these changes: our own document store (LSP line
    semantics), the position encoding we choose (UTF-8 when offered), an
    error response instead of silence for a request whose params do not
    parse, text changes checked before they are applied, the lifecycle rules
    of the specification (nothing before `initialize`, no requests after
    `shutdown`), and no Future kept per notification."""

    _server: "PallasLanguageServer"
    _initialize_seen = False

    def handle_message(self, message):
        if getattr(message, "jsonrpc", None) == "2.0":
            method = getattr(message, "method", None)
            request = isinstance(message, RPCRequest)
            if not self._initialize_seen:
                if request and method == types.INITIALIZE:
                    self._initialize_seen = True
                elif request:
                    self._refuse(message.id, types.ErrorCodes.ServerNotInitialized,
                                 f"the server is not initialized: send `initialize` before "
                                 f"{method}")
                    return
                elif isinstance(message, RPCNotification) and method != types.EXIT:
                    log.info("dropping %s: it came before initialize", method)
                    return
            elif request and method == types.INITIALIZE:
                self._refuse(message.id, types.ErrorCodes.InvalidRequest,
                             "initialize was already received")
                return
            if request and self._shutdown:
                self._refuse(message.id, types.ErrorCodes.InvalidRequest,
                             f"the server is shut down: {method} is refused (only `exit` is "
                             "accepted after `shutdown`)")
                return
            if request and method == types.SHUTDOWN:
                self._shutdown_id = message.id
            elif method == types.EXIT and not self._shutdown:
                # a client that sends `exit` right behind `shutdown` means a clean
                # exit: wait for the shutdown handler (it stops the runs) to end
                pending = self._request_futures.get(getattr(self, "_shutdown_id", None))
                if pending is not None and not pending.done():
                    loop = asyncio.get_running_loop()
                    pending.add_done_callback(
                        lambda _f: loop.call_soon(super(PallasProtocol, self).handle_message,
                                                  message))
                    return
        super().handle_message(message)

    def _refuse(self, msg_id, code: int, message: str) -> None:
        self._send_response(msg_id, error=types.ResponseError(code=code,
                                                              message=f"pallas-lsp: {message}"))

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None):
        # pygls 2.1.1 puts a Future into _request_futures for every coroutine,
        # thread or generator handler, but only a client request's is removed
        # (by _send_handler_result). Notifications and the inner steps of
        # generator handlers (every didChange) stayed forever: ~1.9 KB each.
        def done(future, msg_id=msg_id, callback=callback):
            if self._request_futures.get(msg_id) is future:
                del self._request_futures[msg_id]
            callback(future)

        super()._execute_handler(msg_id, handler, done, args, kwargs)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        # as pygls', but over a copy: a cancelled Future now removes itself
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def structure_message(self, data: dict[str, Any]):
        if isinstance(data, dict) and "id" not in data \
                and data.get("method") in (types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_OPEN):
            problem = change_problem(data.get("method"), data.get("params"))
            if problem is not None:  # the change is refused, the last good text stays
                self._server.refuse_change(data.get("params"), problem)
                return JsonRPCNotification(method=_IGNORED, jsonrpc="2.0", params=None)
        if isinstance(data, dict) and "id" not in data \
                and data.get("method") == types.NOTEBOOK_DOCUMENT_DID_CHANGE:
            problem = notebook_change_problem(data.get("params"))
            if problem is not None:  # as above: the notebook keeps its last good cells
                self._server.refuse_change(data.get("params"), problem)
                return JsonRPCNotification(method=_IGNORED, jsonrpc="2.0", params=None)
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, JsonRpcInternalError) as exc:
            if isinstance(data, dict) and "id" in data:
                error = types.ResponseError(code=types.ErrorCodes.InvalidParams,
                                            message=f"invalid message: {exc}")
                if "method" in data:  # a request: answer it
                    self._send_response(data["id"], error=error)
                else:  # a malformed response: fail the waiting request
                    self._handle_response(data["id"], None, error)
            return JsonRPCNotification(method=_IGNORED, jsonrpc="2.0", params=None)

    def _handle_cancel_notification(self, msg_id):
        # pygls cancels only the outer future of workspace/executeCommand: a
        # cancelled `pallas-lsp.run` request must stop its run too
        try:
            self._server.runs.cancel_request(msg_id)
        except Exception:
            log.exception("cancelling the run of request %s failed", msg_id)
        super()._handle_cancel_notification(msg_id)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        feats = ClientFeatures.from_capabilities(params.capabilities)
        self._server.feats = feats
        result = yield from super().lsp_initialize(params)
        caps = result.capabilities
        caps.position_encoding = feats.encoding
        if not feats.pull_diagnostics:
            caps.diagnostic_provider = None  # push only: do not invite pulls
        return result

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        self._server.documents.open(params.text_document)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        self._server.documents.change(params, self._server.feats.encoding)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        self._server.documents.close(params.text_document.uri)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    # Notebooks: our store (lsp/notebooks.py, its features), not pygls' workspace.

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: types.DidOpenNotebookDocumentParams):
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: types.DidChangeNotebookDocumentParams):
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: types.DidCloseNotebookDocumentParams):
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


# ---------------------------------------------------------------- server


class PallasLanguageServer(LanguageServer):
    def __init__(self, analyzer=None) -> None:
        super().__init__("pallas-lsp", __version__, protocol_cls=PallasProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=notebooks.SYNC_OPTIONS)
        self.feats = ClientFeatures()
        self.documents = DocumentStore()
        self.notebooks = notebooks.NotebookStore()  # their programs are in `documents`
        self.analyses = AnalysisService(analyzer)
        self.debouncer = Debouncer()
        # The other files of the workspace (helpers, launchers, callers).
        self.project_index = WorkspaceIndex(self._open_text, self._workspace_changed,
                                            self._is_open_path)
        self.analyses.workspace = self.project_index
        # uri -> (files its analysis read, findings it reached in them by path, files it missed)
        self._cross: dict[str, tuple[set, dict, set]] = {}
        self.jedi = JediDocs()  # only for names the import scan cannot place (user re-exports)
        self.api_docs = ApiDocs()  # Pallas API signatures and docs, extracted once per jax
        self.projects = ProjectConfigs(on_error=self.warn)
        self.settings: Settings = settings_mod.DEFAULT
        self.settings_generation = 0
        self.init_options: Any = None
        self._shown_warnings: set[str] = set()
        self._pending_warnings: list[str] = []
        self.initialized = False
        self.first_result = asyncio.Event()  # set when the first diagnostics go out
        self.runs = RunManager(self)  # runs from the editor and their diagnostics
        self.analyses.is_current = self.is_current
        self._told: set[tuple[str, str]] = set()  # (uri, notice kind) already logged
        self._protocol_errors = 0

    # ------------------------------------------------------------ errors

    def report_server_error(self, error: Exception, source) -> None:
        """Log, and tell the client's log: never a popup per failure."""
        log.error("%s: %s", getattr(source, "__name__", source), error)
        try:
            self.window_log_message(types.LogMessageParams(
                type=types.MessageType.Error, message=f"pallas-lsp: {error}"))
        except Exception:
            pass

    # ------------------------------------------------------------ transport

    MAX_PROTOCOL_LOGS = 20  # window/logMessage about broken messages, per session

    def _start_io_async(self, stdin=None, stdout=None) -> None:
        """pygls' stdio loop, with our reader (lsp/framing.py)."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        source = framing.ChunkSource(stdin or sys.stdin.buffer)
        try:
            asyncio.run(self._serve(source.read))
        except BrokenPipeError:
            log.error("the connection to the client is lost; stopping")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        """pygls' TCP server, with our reader."""
        self._stop_event = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await self._serve(lambda: reader.read(framing.CHUNK))
            self.shutdown()

        async def main():
            self._server = await asyncio.start_server(connection, host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass

    async def _serve(self, read) -> None:
        reader = framing.MessageReader(read, self.protocol_problem)
        assert self._stop_event is not None
        await framing.serve(reader, self.protocol, self._stop_event, self.protocol_problem)

    def protocol_problem(self, message: str, msg_id, code: int) -> None:
        """A message that could not be read: answer it when its id is known,
        and tell the client's log (a bounded number of times)."""
        if msg_id is not None:
            self.protocol._send_response(msg_id, error=types.ResponseError(
                code=code, message=f"pallas-lsp: {message}"))
        self._protocol_errors += 1
        if self._protocol_errors > self.MAX_PROTOCOL_LOGS:
            return
        if self._protocol_errors == self.MAX_PROTOCOL_LOGS:
            message += " (further protocol errors go to the server's log only)"
        self.log_to_client(types.MessageType.Error, f"pallas-lsp: {message}")

    def log_to_client(self, kind: types.MessageType, message: str) -> None:
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception as exc:
            log.info("window/logMessage failed: %s", exc)

    def refuse_change(self, params: Any, problem: str) -> None:
        ident = (params.get("textDocument") or params.get("notebookDocument")) \
            if isinstance(params, dict) else None
        uri = ident.get("uri") if isinstance(ident, dict) else None
        if not isinstance(uri, str):
            uri = "?"
        doc = self.documents.get(uri)
        kept = f"; the server keeps version {doc.version}" if doc is not None else ""
        message = f"pallas-lsp: refused a change to {uri}: {problem}{kept}"
        log.error("%s", message)
        self.log_to_client(types.MessageType.Error, message)

    # ------------------------------------------------------------ settings

    def root_path(self) -> str | None:
        try:
            return self.workspace.root_path
        except Exception:
            return None

    def apply_settings(self, *layers: Any) -> None:
        new, warnings = settings_mod.parse(self.init_options, *layers)
        for w in warnings:
            self.warn(w)
        old, self.settings = self.settings, new
        self.jedi.configure(new.python_interpreter, self.root_path())
        self.api_docs.configure(new.python_interpreter)
        self.project_index.configure(self.workspace_roots())
        if new != old:
            self.settings_generation += 1
            self.refresh(inlays=(old.inlay_enable, old.inlay_parameters, old.inlay_assignments)
                         != (new.inlay_enable, new.inlay_parameters, new.inlay_assignments))
            if old.semantic_tokens_enable != new.semantic_tokens_enable and self.initialized \
                    and self.feats.semantic_tokens_refresh:
                self._request_quietly(self.workspace_semantic_tokens_refresh_async(None))
            if old.runs_enable and not new.runs_enable:
                self.runs.cancel()  # runs were turned off (e.g. the workspace is no longer trusted)
            if (old.runs_enable, old.runs_code_lens) != (new.runs_enable, new.runs_code_lens) \
                    and self.initialized and self.feats.code_lens_refresh:
                self._request_quietly(self.workspace_code_lens_refresh_async(None))

    def warn(self, message: str) -> None:
        if message in self._shown_warnings:
            return
        log.warning("%s", message)
        if not self.initialized:
            self._pending_warnings.append(message)
            return
        self._shown_warnings.add(message)
        self.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message=f"pallas-lsp: {message}"))

    def refresh(self, inlays: bool = False) -> None:
        """Settings or project configuration changed: recompute what the
        client shows."""
        if not self.initialized:
            return
        if self.feats.pull_diagnostics and self.feats.diagnostic_refresh:
            self._request_quietly(self.workspace_diagnostic_refresh_async(None))
        for uri in self.documents.uris():  # pushed (a pull client: notebooks only)
            self.schedule_diagnostics(uri, 0.0)
        if inlays and self.feats.inlay_refresh:
            self._request_quietly(self.workspace_inlay_hint_refresh_async(None))

    def preparse(self, uri: str) -> None:
        snap = self.snapshot(uri)
        if snap is not None and self.jedi.available:  # only once jedi has been needed
            self.jedi.preparse(limits.clean_surrogates(snap.text)[0], snap.path)

    async def collect_when_quiet(self) -> None:
        """The cyclic garbage collector runs here, when the editor is quiet,
        not when an allocation happens to trip it: a collection in the middle
        of a keystroke's analysis, or of the publish after it, holds the GIL
        for 5-15 ms (analyses leave no cycles behind; jedi and pygls may)."""
        gc.disable()
        rounds = skipped = 0
        try:
            while True:
                await asyncio.sleep(GC_EVERY_S)
                if self.project_index.wait_left() > 0 and skipped < 6:
                    skipped += 1  # busy: next time (but at least every 30 s)
                    continue
                rounds += 1
                skipped = 0
                gc.collect(2 if rounds % 6 == 0 else 1)
        finally:
            gc.enable()

    async def warm_up_later(self) -> None:
        """Warm the converter's hooks, the catalog, jedi and the catalog's
        source links after the first diagnostics (or 2 s): the editor opens
        its first file right after `initialized`, and those would hold the
        event loop and the GIL (about 30 ms) while people wait for the
        squiggles, not for the hover docs."""
        try:
            await asyncio.wait_for(self.first_result.wait(), 2.0)
        except asyncio.TimeoutError:
            pass
        # ... and once the editor is quiet: the first hovers come right after
        # the first diagnostics, and must not wait behind this.
        since = time.monotonic()
        while (left := self.project_index.wait_left(since)) > 0:
            await asyncio.sleep(left)
        editor_features.warm(self)  # ~15 ms here rather than on the first requests
        await asyncio.sleep(0)  # a request that came meanwhile goes first
        try:  # the catalog (API hovers, code links): ~15 ms of TOML
            _catalog.load()
        except Exception as exc:
            log.info("catalog failed to load: %s", exc)
        # Its own thread: it mostly waits for a child process, and the analysis
        # thread must stay free (a hover waits for the settled names there).
        threading.Thread(target=convert.warm_code_urls, name="pallas-warm", daemon=True).start()
        self.api_docs.allow_extraction()  # a first extraction of the API docs, if needed

    # ------------------------------------------------------------ other files

    def workspace_roots(self) -> list[str]:
        roots = []
        try:
            for folder in (self.workspace.folders or {}).values():
                path = to_fs_path(folder.uri)
                if path:
                    roots.append(path)
        except Exception:
            pass
        root = self.root_path()
        if not roots and root:
            roots.append(root)
        return roots

    def _open_text(self, path: str) -> str | None:
        """Editor buffers take precedence over the disk for other files."""
        real = _realpath(path)
        for uri in self.documents.uris():
            doc = self.documents.get(uri)
            if doc is not None and doc.path and _realpath(doc.path) == real:
                return doc.text
        return None

    def _is_open_path(self, path: str) -> bool:
        return self._open_text(path) is not None

    def _workspace_changed(self, paths: set) -> None:
        """Called on the workspace thread: other files were parsed, indexed or
        analysed; re-check on the event loop."""
        loop = getattr(self, "loop", None)

        def again():
            if paths:  # findings from closed callers changed for these files
                for uri in self.documents.uris():
                    doc = self.documents.get(uri)
                    if doc is not None and doc.path and os.path.realpath(doc.path) in paths:
                        self.analyses.forget(uri)
                        self.schedule_diagnostics(uri, 0.0)
            for uri in self.documents.uris():  # analyses that were missing a file
                if self._cross.get(uri, (set(), {}, set()))[2]:
                    self.analyses.forget(uri)
                    self.schedule_diagnostics(uri, 0.0)
            if self.feats.pull_diagnostics:
                self.refresh()

        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(again)

    def after_analysis(self, snap: Snapshot, analysis: Analysis) -> None:
        """Record what this analysis read and reached in other files, ask for
        what it missed, and re-publish the open files it reports into."""
        if analysis.missing:
            self.project_index.request_parse(analysis.missing)
        old = self._cross.get(snap.uri)
        self._cross[snap.uri] = (set(analysis.deps), dict(analysis.foreign), set(analysis.missing))
        touched = set(analysis.foreign) | (set(old[1]) if old else set())
        if old is not None:
            touched = {p for p in touched if old[1].get(p) != analysis.foreign.get(p)}
        for uri in self.documents.uris():
            doc = self.documents.get(uri)
            if uri != snap.uri and doc is not None and doc.path \
                    and os.path.realpath(doc.path) in touched:
                if self.feats.pull_diagnostics:
                    self.refresh()  # the client pulls again
                    break
                self.schedule_diagnostics(uri, 0.0)

    def _path_of(self, uri: str) -> str | None:
        doc = self.documents.get(uri)
        return doc.path if doc is not None else None

    def schedule_dependents(self, uri: str) -> None:
        """An edit of a helper re-checks the open files that use it (same
        debounce as the file itself), and how its closed callers use it."""
        delay = self.settings.debounce_ms / 1000.0

        async def fresh_dependents() -> list[str]:
            """The open files that use this one, its new text parsed for them
            (the edit path reads only parsed files: they must read this text)."""
            others = self.dependents(uri)
            doc = self.documents.get(uri)
            if others and doc is not None and doc.path:
                await self.analyses.parse_edited(doc.path)
            for other in others:
                self.analyses.forget(other)
            return others

        async def recheck():
            for other in await fresh_dependents():
                await self.publish(other)
            doc = self.documents.get(uri)
            if doc is not None and doc.path:
                self.project_index.file_changed(doc.path, doc.text)

        async def recheck_pulled():
            await fresh_dependents()
            self.refresh()

        self.debouncer.schedule(uri + "#dependents", delay,
                                recheck_pulled if self.feats.pull_diagnostics else recheck)

    async def settle_open_callers(self, uri: str, limit: int = 20) -> None:
        """Pull clients ask for one file at a time: make sure the other open
        files that may launch kernels reaching into this one have been
        analysed at their current version, so their findings here are known."""
        doc = self.documents.get(uri)
        if doc is None or not doc.path:
            return
        real = os.path.realpath(doc.path)
        importers = set(self.project_index.project.importers(real)) \
            if self.project_index.indexed.is_set() else None
        for other in self.documents.uris()[:limit]:
            odoc = self.documents.get(other)
            if other == uri or odoc is None or not odoc.path:
                continue
            if importers is not None and os.path.realpath(odoc.path) not in importers \
                    and real not in self._cross.get(other, (set(),))[0]:
                continue
            snap = odoc.snapshot()
            if self.analyses.cached(snap) is None or other not in self._cross:
                try:
                    analysis = await self.analyses.get(snap)
                except Superseded:
                    continue
                if self.is_current(snap):
                    self.after_analysis(snap, analysis)

    def dependents(self, uri: str) -> list[str]:
        """Open documents whose last analysis read this document's file."""
        doc = self.documents.get(uri)
        if doc is None or not doc.path:
            return []
        real = os.path.realpath(doc.path)
        return [other for other, cross in self._cross.items()
                if other != uri and real in cross[0] and self.documents.get(other) is not None]

    def cross_file_findings(self, path: str | None, uri: str) -> list[Finding]:
        """Findings in this file that kernels launched in other files reach:
        from open documents' analyses and from closed callers."""
        if not path:
            return []
        real = self.project_index.project.realpath(path)  # cached: every hover asks
        out = [f for other, cross in self._cross.items() if other != uri
               for f in cross[1].get(real, ())]
        return out + self.project_index.from_callers(real)

    def _request_quietly(self, coro) -> None:
        async def run():
            try:
                await coro
            except Exception as exc:
                log.info("client request failed: %s", exc)

        asyncio.ensure_future(run())

    async def pull_configuration(self) -> None:
        if not self.feats.configuration:
            return
        try:
            result = await self.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section=SECTION)]))
        except Exception as exc:
            log.info("workspace/configuration failed: %s", exc)
            return
        value = result[0] if isinstance(result, (list, tuple)) and result else None
        self.apply_settings(value)

    # ------------------------------------------------------------ analysis

    def snapshot(self, uri: str) -> Snapshot | None:
        if self.notebooks.of_cell(uri) is not None:
            return None  # a cell: its notebook's
        doc = self.documents.get(uri)
        if doc is None or notebooks.is_notebook_json(uri, doc.text):
            return None  # a notebook's JSON opened as text: not Python
        return doc.snapshot()

    async def analysis_for(self, uri: str) -> tuple[Snapshot, Analysis] | None:
        """The current version and its analysis; ContentModified when a newer
        version arrives before this one was analysed."""
        self.project_index.touch()  # a request: background work waits
        snap = self.snapshot(uri)
        if snap is None:
            return None
        try:
            return snap, await self.analyses.get(snap)
        except Superseded:
            raise JsonRpcContentModified("the document changed before it was analysed") from None

    def is_current(self, snap: Snapshot) -> bool:
        doc = self.documents.get(snap.uri)
        return doc is not None and doc.version == snap.version and doc.text == snap.text

    def selected(self, snap: Snapshot, analysis: Analysis) -> list[Selected]:
        findings = list(analysis.findings)
        extra = self.cross_file_findings(snap.path, snap.uri)
        if extra:
            seen = {(f.code, f.span) for f in findings}
            for f in extra:
                if (f.code, f.span) not in seen:
                    seen.add((f.code, f.span))
                    findings.append(f)
        return select(findings, self.settings, self.projects.for_path(snap.path), snap.path)

    def diagnostics(self, snap: Snapshot, analysis: Analysis) -> list[types.Diagnostic]:
        """The engine's diagnostics, what could not be analysed (on line 1) and
        the last run's (source "pallas-lsp run")."""
        notes = []
        for notice in self.analyses.notices(snap):
            self.tell_once(snap.uri, notice)
            if notice.severity != "log":
                notes.append(types.Diagnostic(
                    range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                    message=notice.message, source=convert.SOURCE,
                    severity=convert.LEVELS.get(notice.severity)))
        return self.notebooks.relocate(
            notes + [convert.to_diagnostic(s, snap.uri, snap.index, self.feats, self.settings)
                     for s in self.selected(snap, analysis)]
            + self.runs.merged_for(snap.uri, snap.index), self.feats.encoding)

    def tell_once(self, uri: str, notice: limits.Notice) -> None:
        if (uri, notice.kind) in self._told:
            return
        self._told.add((uri, notice.kind))
        kind = types.MessageType.Warning if notice.severity != "warning" \
            else types.MessageType.Error
        message = notice.message
        self.log_to_client(kind, message if message.startswith("pallas-lsp") else
                           f"pallas-lsp: {message}")

    def schedule_diagnostics(self, uri: str, delay_s: float | None = None) -> None:
        # Notebook cells are pushed to every client: editors do not pull them.
        if self.feats.pull_diagnostics and self.notebooks.by_program(uri) is None:
            return
        if delay_s is None:  # an edit: the pause ends, the diagnostics are there
            debounce = self.settings.debounce_ms / 1000.0
            delay_s = debounce - self.analyses.lead_s(self._path_of(uri), debounce)
        self.debouncer.schedule(uri, delay_s, lambda: self.publish(uri))

    async def publish(self, uri: str) -> None:
        try:
            got = await self.analysis_for(uri)
        except JsonRpcContentModified:
            return  # a newer version replaced this one and has its own publish
        if got is None:
            return
        snap, analysis = got
        if not self.is_current(snap):
            return  # a newer version exists and has its own publish scheduled
        self.after_analysis(snap, analysis)
        diagnostics = self.diagnostics(snap, analysis)
        notebook = self.notebooks.by_program(uri)
        if notebook is None:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics, version=snap.version))
        elif notebook.view is not None and notebook.view.generation == snap.version:
            for params in notebook.publications(notebook.view, diagnostics, self.feats.encoding):
                self.text_document_publish_diagnostics(params)
        self.first_result.set()

    def forget_document(self, uri: str) -> None:
        """A closed document: nothing pending, nothing cached, and the files
        it reported into shown again without its findings."""
        self.debouncer.cancel(uri)
        self.analyses.close(uri)
        cross = self._cross.pop(uri, None)
        for other in self.documents.uris():
            doc = self.documents.get(other)
            if cross and cross[1] and doc is not None and doc.path \
                    and os.path.realpath(doc.path) in cross[1]:
                self.schedule_diagnostics(other, 0.0)


# ---------------------------------------------------------------- features


_REAL: dict[str, str] = {}


def _realpath(path: str) -> str:
    """realpath, remembered: the engine asks for other files' text on the
    edit path, once per import, and every lookup compares open documents."""
    hit = _REAL.get(path)
    if hit is None:
        if len(_REAL) > 10_000:
            _REAL.clear()
        hit = _REAL[path] = os.path.realpath(path)
    return hit


async def _admit() -> None:
    """Let the event loop run once before a request does any work: a
    $/cancelRequest already read from the client cancels it here, before it
    runs (pygls cancels the handler's task)."""
    await asyncio.sleep(0)


def _kind_wanted(only: list[str] | None, kind: str) -> bool:
    if not only:
        return True
    return any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(span, start, end) -> bool:
    return (span.line, span.col) <= (end.line, end.col) and (start.line, start.col) <= (span.end_line, span.end_col)


def create_server(analyzer=None) -> PallasLanguageServer:
    """A new server with every feature registered. `analyzer` replaces the
    engine's analyze (benchmarks of the LSP layer, tests)."""
    server = PallasLanguageServer(analyzer)

    @server.feature(types.INITIALIZE)
    def initialize(ls: PallasLanguageServer, params: types.InitializeParams):
        ls.init_options = settings_mod.unwrap(params.initialization_options)
        ls.apply_settings()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: PallasLanguageServer, params: types.InitializedParams):
        ls.initialized = True
        ls.loop = asyncio.get_running_loop()
        for message in ls._pending_warnings:
            ls.warn(message)
        ls._pending_warnings.clear()
        ls.jedi.configure(ls.settings.python_interpreter, ls.root_path())
        asyncio.ensure_future(ls.warm_up_later())
        asyncio.ensure_future(ls.collect_when_quiet())
        ls.api_docs.configure(ls.settings.python_interpreter)
        registrations = []
        if ls.feats.dynamic_configuration:
            registrations.append(types.Registration(
                id=str(uuid.uuid4()), method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                register_options=types.DidChangeConfigurationRegistrationOptions(section=SECTION)))
        if ls.feats.watched_files:  # re-read [tool.pallas-lsp] when a pyproject.toml changes,
            # and follow Python files changed or deleted outside the editor
            registrations.append(types.Registration(
                id=str(uuid.uuid4()), method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[
                    types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                    types.FileSystemWatcher(glob_pattern="**/*.py")])))
        if registrations:
            try:
                await ls.client_register_capability_async(
                    types.RegistrationParams(registrations=registrations))
            except Exception as exc:
                log.info("client/registerCapability failed: %s", exc)
        await ls.pull_configuration()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: PallasLanguageServer, params):
        for uri in ls.documents.uris():
            ls.debouncer.cancel(uri)
        await ls.runs.shutdown(5.0)  # no run outlives the server

    @server.feature(types.EXIT)
    def exit_(ls: PallasLanguageServer, params):
        ls.runs.cancel_all(wait_s=2.0)

    # ---------------------------------------------------------- documents

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PallasLanguageServer, params: types.DidOpenTextDocumentParams):
        ls.project_index.touch()
        ls.runs.opened(params.text_document.uri)
        ls.schedule_diagnostics(params.text_document.uri, 0.0)
        ls.project_index.refresh_callers(ls._path_of(params.text_document.uri))
        if ls.settings.hover_jedi and ls.initialized and ls.jedi.available:
            # After the first diagnostics are out: jedi's parse competes for the GIL.
            asyncio.get_running_loop().call_later(0.5, ls.preparse, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PallasLanguageServer, params: types.DidChangeTextDocumentParams):
        uri = params.text_document.uri
        ls.project_index.touch()
        ls.runs.clear_file(uri)  # an edit clears the file's run diagnostics
        ls.schedule_diagnostics(uri)
        ls.schedule_dependents(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PallasLanguageServer, params: types.DidSaveTextDocumentParams):
        uri = params.text_document.uri
        if uri.endswith("pyproject.toml"):
            ls.projects.invalidate()
            ls.settings_generation += 1
            ls.refresh()
        elif ls.documents.get(uri) is not None:
            ls.schedule_diagnostics(uri, 0.0)
            ls.runs.start_on_save(uri)  # only with runs.runOnSave (off by default)
            ls.project_index.file_changed(ls._path_of(uri))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PallasLanguageServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        ls.forget_document(uri)
        run_diags = ls.runs.closed(uri)  # run diagnostics stay until the next run
        if not ls.feats.pull_diagnostics or run_diags:
            ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=run_diags))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: PallasLanguageServer,
                                       params: types.DidChangeConfigurationParams):
        if ls.feats.configuration:
            await ls.pull_configuration()
        else:
            ls.apply_settings(params.settings)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: PallasLanguageServer, params: types.DidChangeWatchedFilesParams):
        if any(c.uri.endswith("pyproject.toml") for c in params.changes):
            ls.projects.invalidate()
            ls.settings_generation += 1
            ls.refresh()
        for change in params.changes[:10_000]:  # a checkout of a branch: bounded
            if not change.uri.endswith(".py") or ls.documents.get(change.uri) is not None:
                continue  # an open file's buffer speaks for it, not its disk
            try:
                path = to_fs_path(change.uri) if change.uri.startswith("file:") else None
            except Exception:  # a malformed URI: nothing of ours
                path = None
            ls.project_index.disk_changed(path, deleted=change.type == types.FileChangeType.Deleted)

    # ---------------------------------------------------------- pull diagnostics

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, types.DiagnosticOptions(
        identifier="pallas-lsp", inter_file_dependencies=False, workspace_diagnostics=False))
    async def diagnostic(ls: PallasLanguageServer, params: types.DocumentDiagnosticParams):
        await _admit()
        uri = params.text_document.uri
        got = None
        for attempt in range(3):  # the document may change while the engine runs
            try:
                got = await ls.analysis_for(uri)
            except JsonRpcContentModified:
                if attempt == 2:
                    raise
                continue
            if got is None:
                return types.RelatedFullDocumentDiagnosticReport(items=[])
            snap, analysis = got
            if ls.is_current(snap):
                break
        ls.first_result.set()
        ls.after_analysis(snap, analysis)
        await ls.settle_open_callers(uri)
        cross = ls.cross_file_findings(snap.path, uri)
        result_id = (f"{snap.version}:{ls.settings_generation}:{ls.runs.generation}:"
                     f"{len(snap.text)}:{hash(snap.text)}:{hash(tuple(cross))}")
        if params.previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return types.RelatedFullDocumentDiagnosticReport(
            items=ls.diagnostics(snap, analysis), result_id=result_id)

    # ---------------------------------------------------------- hover

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @notebooks.in_cells(notebooks.HOVER)
    async def hover(ls: PallasLanguageServer, params: types.HoverParams):
        await _admit()
        settings = ls.settings
        if not settings.hover_enable:
            return None
        got = await ls.analysis_for(params.text_document.uri)
        if got is None:
            return None
        snap, analysis = got
        index = snap.index
        pos = index.from_client(params.position.line, params.position.character, ls.feats.encoding)
        line_text = index.line_text(pos.line)
        sections: list[str] = []
        span = None
        jax_root = ls.api_docs.jax_root() if settings.python_interpreter else None

        # 1. a diagnostic under the cursor: its catalog entry
        seen: set[str] = set()
        for sel in hover_mod.findings_at(ls.selected(snap, analysis), pos.line, pos.col):
            code = sel.finding.code
            if code in seen:
                continue
            seen.add(code)
            entry = convert.catalog_entry(code)
            sections.append(hover_mod.catalog_section(
                code, hover_mod.jax_location(entry, jax_root), sel.finding.text))
            span = span or sel.finding.span

        # 2. a code in a `# noqa: PAL103` comment
        code = hover_mod.noqa_code_at(line_text, pos.col)
        if code and code not in seen:
            entry = convert.catalog_entry(code)
            sections.append(hover_mod.catalog_section(code, hover_mod.jax_location(entry, jax_root)))

        # 3. a name inside a kernel: what the engine inferred
        info = analysis.name_at(pos.line, pos.col)
        if info is not None and not isinstance(info.value, (Api, Unknown)) \
                and info.value.describe() != "unknown":
            sections.append(hover_mod.name_section(info))
            span = span or info.span

        # 4. a Pallas API: signature and docs (extracted from the user's jax), the
        # errors it can raise. Only Pallas APIs: other names are the Python
        # language server's job (Pylance, jedi-language-server).
        word = hover_mod.word_at(line_text, pos.line, pos.col)
        if word is not None and (info is None or isinstance(info.value, (Api, Unknown))):
            api_name = hover_mod.api_name_from_imports(word.dotted, index.lines)
            if api_name is not None and ls.api_docs.state == "loading":
                await asyncio.to_thread(ls.api_docs.ready.wait, 0.5)  # the cache: milliseconds
            doc = ls.api_docs.lookup(api_name) if api_name is not None else None
            if api_name is None and settings.hover_jedi \
                    and hover_mod.imported_from_user_code(word.dotted, index.lines):
                # `from mypkg.common import pl`: only jedi can follow that import
                text, _, _ = limits.clean_surrogates(snap.text)
                doc = await ls.jedi.lookup(text, snap.path, pos.line, word.span.end_col,
                                           settings.jedi_timeout_ms / 1000.0)
                api_name = hover_mod.api_name_from_jedi(doc)
                if api_name is not None:
                    doc = ls.api_docs.lookup(api_name) or doc
            if api_name:
                sections.append(hover_mod.api_section(
                    api_name, doc if doc is not None and doc.is_pallas else None,
                    hover_mod.entries_for_api(api_name)))
                span = span or word.span

        # 5. on a TPU pallas_call: its scoped VMEM estimate (PAL404's numbers)
        sections.extend(hover_mod.launch_sections(analysis, pos.line, pos.col))

        text = hover_mod.join_sections(sections)
        if not text:
            return None
        if ls.feats.markdown_hover:
            contents = types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)
        else:
            contents = types.MarkupContent(kind=types.MarkupKind.PlainText,
                                           value=hover_mod.to_plaintext(text))
        rng = convert.to_range(span, index, ls.feats.encoding) if span is not None else None
        return types.Hover(contents=contents, range=rng)

    # ---------------------------------------------------------- code actions

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, convert.FIX_ALL_KIND],
        resolve_provider=False))
    @notebooks.in_cells(notebooks.CODE_ACTIONS)
    async def code_action(ls: PallasLanguageServer, params: types.CodeActionParams):
        await _admit()
        got = await ls.analysis_for(params.text_document.uri)
        if got is None:
            return None
        snap, analysis = got
        if not ls.is_current(snap):
            raise JsonRpcContentModified("the document changed while computing code actions")
        feats, index = ls.feats, snap.index
        start = index.from_client(params.range.start.line, params.range.start.character, feats.encoding)
        end = index.from_client(params.range.end.line, params.range.end.character, feats.encoding)
        selected = ls.selected(snap, analysis)
        only = params.context.only if params.context else None
        actions: list[types.CodeAction] = []
        if _kind_wanted(only, types.CodeActionKind.QuickFix):
            fixes, disables = [], []
            for sel in selected:
                f = sel.finding
                if not _overlaps(f.span, start, end):
                    continue
                diag = convert.to_diagnostic(sel, snap.uri, index, feats, ls.settings)
                for fix in f.fixes:
                    fixes.append(convert.fix_action(fix, diag, snap.uri, snap.version, index, feats))
                edit = noqa_edit.noqa_edit(index.line_text(f.span.line), f.span.line, f.code)
                if edit is not None:
                    disables.append(types.CodeAction(
                        title=f"Disable {f.code} for this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        edit=convert.workspace_edit(
                            snap.uri, snap.version,
                            convert.to_text_edits([edit], index, feats.encoding), feats)))
            actions += fixes + _dedupe(disables)
        if _kind_wanted(only, convert.FIX_ALL_KIND):
            edits = convert.fix_all_edits(selected)
            if edits:
                actions.append(types.CodeAction(
                    title="pallas-lsp: fix all safely fixable problems",
                    kind=convert.FIX_ALL_KIND,
                    edit=convert.workspace_edit(
                        snap.uri, snap.version,
                        convert.to_text_edits(edits, index, feats.encoding), feats)))
        return actions

    # ---------------------------------------------------------- inlay hints

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    @notebooks.in_cells(notebooks.INLAY_HINTS)
    async def inlay_hint(ls: PallasLanguageServer, params: types.InlayHintParams):
        await _admit()
        if not ls.settings.inlay_enable:
            return []
        got = await ls.analysis_for(params.text_document.uri)
        if got is None:
            return None
        snap, analysis = got
        if not ls.is_current(snap):
            raise JsonRpcContentModified("the document changed while computing inlay hints")
        return inlay.inlay_hints(analysis.names, snap.index, ls.feats.encoding, ls.settings,
                                 params.range.start.line, params.range.end.line)

    # ---------------------------------------------------------- runs

    @server.command(RUN_COMMAND)
    async def run_command(ls: PallasLanguageServer, *args):
        """{"uri", "target"?, "mode"?, "races"?, "profile"?} -> {status, summary, diagnostics}"""
        return await ls.runs.run_command(*args)

    @server.command(CANCEL_COMMAND)
    def cancel_run_command(ls: PallasLanguageServer, *args):
        return ls.runs.cancel_command(*args)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def work_done_progress_cancel(ls: PallasLanguageServer, params: types.WorkDoneProgressCancelParams):
        ls.runs.cancel_token(params.token)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lenses(ls: PallasLanguageServer, params: types.CodeLensParams):
        settings = ls.settings
        if not (settings.runs_enable and settings.runs_code_lens):
            return []
        snap = ls.snapshot(params.text_document.uri)
        if snap is None or not snap.path:
            return []
        try:
            return code_lens.code_lenses(snap.uri, snap.text, snap.path, snap.index,
                                         ls.feats.encoding)
        except Exception:  # lenses are a convenience: never an error
            log.exception("code lenses for %s failed", snap.uri)
            return []

    # ---------------------------------------------------------- test hook

    @server.feature(DOCUMENT_STATE)
    def document_state(ls: PallasLanguageServer, params):
        uri = getattr(params, "uri", None)
        doc = (ls.documents.get(uri) or ls.notebooks.cell_document(uri)) if uri else None
        if doc is None:
            return None
        return {"uri": doc.uri, "version": doc.version, "text": doc.text,
                "analyses": ls.analyses.runs, "superseded": ls.analyses.superseded,
                "pending_futures": len(ls.protocol._request_futures),
                "api_docs": ls.api_docs.state, "jedi": ls.jedi.available}

    editor_features.register(server)
    notebooks.register(server)
    return server


def _dedupe(actions: list[types.CodeAction]) -> list[types.CodeAction]:
    seen, out = set(), []
    for a in actions:
        if a.title not in seen:
            seen.add(a.title)
            out.append(a)
    return out


# ---------------------------------------------------------------- running


def setup_logging(log_file: str | None = None, level: str | None = None) -> None:
    """Logs go to stderr or `log_file`, never to stdout (the protocol's)."""
    level = (level or os.environ.get("PALLAS_LSP_LOG_LEVEL") or "INFO").upper()
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level, logging.INFO))
    # pygls logs every message body at INFO
    logging.getLogger("pygls").setLevel(max(root.level, logging.WARNING))


def _protocol_stdout():
    """Keep fd 1 for the protocol alone: move it to a private descriptor and
    point fd 1 and sys.stdout at stderr, so a stray print() (ours, jedi's or
    a C library's) cannot corrupt the message stream."""
    try:
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
        return out
    except (AttributeError, OSError, ValueError):
        return sys.stdout.buffer


def parse_hostport(tcp: str) -> tuple[str, int]:
    host, sep, port = tcp.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", tcp
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def run(tcp: str | None = None, log_file: str | None = None) -> None:
    """Serve LSP on stdio (default) or on `tcp` ("HOST:PORT"). Exits the
    process when the client disconnects: 0 after a shutdown request, else 1."""
    setup_logging(log_file)
    server = create_server()
    # Full collections over everything the server and jedi keep alive showed
    # up as 100-500 ms edit stalls. Long-lived objects are frozen out of the
    # collector: now, and again after each jedi lookup (jedi_docs.py).
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)  # fewer young collections: each analysis makes ~10^5 objects
    log.info("pallas-lsp %s starting (%s)", __version__, f"tcp {tcp}" if tcp else "stdio")
    try:
        if tcp:
            host, port = parse_hostport(tcp)
            server.start_tcp(host, port)
        else:
            server.start_io(sys.stdin.buffer, _protocol_stdout())
    except (SystemExit, KeyboardInterrupt):  # `exit` notification (TCP), Ctrl-C
        pass
    except Exception:
        log.exception("the server stopped on an error")
    finally:
        code = 0 if server.protocol._shutdown else 1
        try:
            server.runs.cancel_all(wait_s=3.0)  # the client went away: no orphans
        except Exception:
            pass
        logging.shutdown()
        # the stdin reader thread may still block in readline(); don't wait for it
        os._exit(code)
