"""End-to-end helpers: a real pallas-lsp process over stdio, driven by
pytest-lsp's LanguageClient with the recorded capabilities of real editors."""
from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KERNELS = HERE / "kernels"

# The server as editors start it.
SERVER_COMMAND = [sys.executable, "-m", "pallas_lsp", "serve"]

CLIENTS = ["visual-studio-code", "neovim", "emacs"]


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO / "server"), str(HERE)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PALLAS_LSP_LOG_LEVEL", "WARNING")
    env.update(extra)
    return env


def make_client() -> LanguageClient:
    """pytest-lsp's client, but keeping every publishDiagnostics (with its
    version) and answering client/registerCapability like an editor."""
    client = LanguageClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features.pop(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    register_lsp_features(client, features)
    client.published = defaultdict(list)  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    client.inlay_refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams):
        client.published[params.uri].append(params)
        client.diagnostics[params.uri] = params.diagnostics

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(client: LanguageClient, params: types.RegistrationParams):
        client.registrations.extend(params.registrations)

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(client: LanguageClient, params):
        client.inlay_refreshes += 1

    return client


class Session:
    """A started, initialized server and the document helpers tests need."""

    def __init__(self, client: LanguageClient, spec: str, result: types.InitializeResult):
        self.client = client
        self.spec = spec
        self.result = result
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

    @property
    def encoding(self) -> str:
        return self.result.capabilities.position_encoding or "utf-16"

    @property
    def pull(self) -> bool:
        return self.result.capabilities.diagnostic_provider is not None

    def open(self, uri: str, text: str) -> None:
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

    def replace_all(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def edit(self, uri: str, edits: list[types.TextEdit]) -> None:
        """Apply edits (client positions) locally and send them incrementally."""
        text = apply_text_edits(self.texts[uri], edits, self.encoding)
        self.versions[uri] += 1
        changes = [types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                   for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                                   reverse=True)]
        self.texts[uri] = text
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=changes))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            types.TextDocumentIdentifier(uri=uri)))

    async def diagnostics(self, uri: str, timeout: float = 15.0) -> list[types.Diagnostic]:
        """Diagnostics for the current version: pulled, or waited for."""
        if self.pull:
            report = await self.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            return list(report.items)
        version = self.versions[uri]
        published = await wait_for(lambda: [p for p in self.client.published[uri]
                                            if p.version == version], timeout)
        return list(published[-1].diagnostics)

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return await self.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, character)))

    async def code_actions(self, uri: str, rng: types.Range, diagnostics=(), only=None):
        return await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
            context=types.CodeActionContext(diagnostics=list(diagnostics), only=only)))

    async def inlay_hints(self, uri: str, start: int = 0, end: int | None = None):
        if end is None:
            end = self.texts[uri].count("\n") + 1
        return await self.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(start, 0), types.Position(end, 0))))

    async def server_text(self, uri: str) -> dict | None:
        """The server's copy of a document (custom request pallas-lsp/documentState)."""
        result = await self.client.protocol.send_request_async("pallas-lsp/documentState", {"uri": uri})
        return result._asdict() if hasattr(result, "_asdict") else result

    def apply_workspace_edit(self, edit: types.WorkspaceEdit) -> None:
        """Apply a server-provided WorkspaceEdit as the editor would."""
        by_uri: dict[str, list[types.TextEdit]] = defaultdict(list)
        if edit.document_changes:
            for change in edit.document_changes:
                uri = change.text_document.uri
                assert change.text_document.version in (None, self.versions[uri]), "stale edit"
                by_uri[uri].extend(change.edits)
        for uri, edits in (edit.changes or {}).items():
            by_uri[uri].extend(edits)
        for uri, edits in by_uri.items():
            self.edit(uri, edits)


async def wait_for(predicate, timeout: float = 15.0, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------- text model (client side)


def split_lines(text: str) -> list[str]:
    """LSP lines: split on \\r\\n, \\r or \\n only (independent of the server's code)."""
    lines, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\r" and text[i + 1:i + 2] == "\n":
            lines.append("".join(cur)); cur = []; i += 2; continue
        if ch in "\r\n":
            lines.append("".join(cur)); cur = []; i += 1; continue
        cur.append(ch); i += 1
    lines.append("".join(cur))
    return lines


def to_units(s: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    if encoding == "utf-16":
        return len(s.encode("utf-16-le")) // 2
    return len(s)


def offset_of(text: str, pos: types.Position, encoding: str) -> int:
    lines = split_lines(text)
    # absolute offsets of line starts
    starts, i = [], 0
    for line_no, line in enumerate(lines):
        starts.append(i)
        i += len(line)
        if i < len(text):
            i += 2 if text[i:i + 2] == "\r\n" else 1
    if pos.line >= len(lines):
        return len(text)
    line = lines[pos.line]
    units = 0
    for col, ch in enumerate(line):
        if units >= pos.character:
            return starts[pos.line] + col
        units += to_units(ch, encoding)
    return starts[pos.line] + len(line)


def position_of(text: str, line: int, col: int, encoding: str) -> types.Position:
    """Code-point column -> client position."""
    return types.Position(line, to_units(split_lines(text)[line][:col], encoding))


def apply_text_edits(text: str, edits: list[types.TextEdit], encoding: str) -> str:
    spans = sorted(((offset_of(text, e.range.start, encoding), offset_of(text, e.range.end, encoding),
                     e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def find(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """(line, code-point col) of the n-th occurrence of `needle`."""
    idx = -1
    for _ in range(occurrence + 1):
        idx = text.index(needle, idx + 1)
    before = text[:idx]
    line = len(split_lines(before)) - 1
    return line, len(split_lines(before)[-1])


# ---------------------------------------------------------------- fixtures


@contextlib.asynccontextmanager
async def start_session(spec: str, init_options=None, configuration=None, root: Path | None = None,
                        **env: str):
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(**env),
                                client_factory=make_client)
    client = await config.start()
    if configuration is not None:
        client.set_configuration(configuration)
    root = root or KERNELS
    params = types.InitializeParams(
        capabilities=client_capabilities(spec),
        root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options=init_options,
    )
    result = await client.initialize_session(params)
    session = Session(client, spec, result)
    try:
        yield session
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        await client.stop()


@pytest.fixture(params=CLIENTS)
async def session(request):
    """A server initialized by each recorded client, with a zero debounce."""
    async with start_session(request.param, init_options={"diagnostics": {"debounceMs": 0}}) as s:
        yield s


def kernel_text(name: str) -> str:
    return (KERNELS / name).read_text(encoding="utf-8")


def kernel_uri(name: str) -> str:
    return (KERNELS / name).as_uri()
