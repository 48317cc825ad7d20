"""No request kills the server: a failing handler answers with an error
response, malformed messages are answered or dropped, cancelled requests are
dropped, and the engine's failures never reach the client."""
from __future__ import annotations

import asyncio
import json
from concurrent.futures import Future

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from lsp_harness import kernel_text, kernel_uri, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("dma_bugs.py")
EVIL = {"PALLAS_LSP_ANALYZER": "evil_engine:analyze"}
ZERO = {"diagnostics": {"debounceMs": 0}}


async def alive(s) -> None:
    """The server still answers and still analyses."""
    s.open(kernel_uri("unicode_kernel.py"), kernel_text("unicode_kernel.py"))
    assert {d.code for d in await s.diagnostics(kernel_uri("unicode_kernel.py"))} == {"PAL101", "PAL103"}


def send_raw(client, payload: dict | bytes, msg_id: str | None = None) -> Future | None:
    """Write a raw message to the server; return a future for its response."""
    fut = None
    if msg_id is not None:
        fut = Future()
        client.protocol._request_futures[msg_id] = fut
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return fut


async def test_handler_exception_is_an_error_response():
    async with start_session("visual-studio-code", init_options=ZERO, **EVIL) as s:
        text = kernel_text("dma_bugs.py") + "\n# BOOM_HOVER\n"
        s.open(URI, text)
        line = text.count("\n") - 1
        with pytest.raises(JsonRpcException) as info:
            await s.hover(URI, line, 3)
        assert info.value.code == types.ErrorCodes.InternalError
        with pytest.raises(JsonRpcException):
            await s.inlay_hints(URI)
        assert await s.diagnostics(URI)  # diagnostics unaffected
        await alive(s)


async def test_spans_outside_the_text_are_clamped():
    async with start_session("neovim", **EVIL) as s:
        text = kernel_text("dma_bugs.py") + "# BAD_SPANS\n"
        s.open(URI, text)
        diags = await s.diagnostics(URI)
        last = len(text.splitlines())
        for d in diags:
            assert d.range.start <= d.range.end
            assert d.range.end.line <= last
        everything = types.Range(types.Position(0, 0), types.Position(10**6, 0))
        actions = await s.code_actions(URI, everything)
        assert actions
        await alive(s)


async def test_engine_exception_is_one_diagnostic_on_line_1_not_a_crash():
    async with start_session("emacs", init_options=ZERO, **EVIL) as s:
        s.open(URI, kernel_text("dma_bugs.py") + "\n# RAISE_IN_ENGINE\n")
        (d,) = await s.diagnostics(URI)
        assert d.range.start.line == 0 and "could not analyse" in d.message
        assert "RuntimeError: the engine raised" in d.message
        assert [m for m in s.client.log_messages if "could not analyse" in m.message]
        await alive(s)


async def test_invalid_params_are_answered():
    async with start_session("visual-studio-code") as s:
        fut = send_raw(s.client, {"jsonrpc": "2.0", "id": "bad-1", "method": "textDocument/hover",
                                  "params": {"textDocument": 42, "position": "here"}}, "bad-1")
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(asyncio.wrap_future(fut), 10)
        assert info.value.code == types.ErrorCodes.InvalidParams
        await alive(s)


async def test_garbage_and_unknown_methods():
    async with start_session("visual-studio-code") as s:
        send_raw(s.client, b"{not json at all")
        send_raw(s.client, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"x": 1}})
        fut = send_raw(s.client, {"jsonrpc": "2.0", "id": "bad-2", "method": "pallas/noSuchThing",
                                  "params": {}}, "bad-2")
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(asyncio.wrap_future(fut), 10)
        assert info.value.code == types.ErrorCodes.MethodNotFound
        await alive(s)


async def test_requests_on_unknown_documents():
    async with start_session("neovim") as s:
        uri = "file:///nowhere/never_opened.py"
        assert await s.hover(uri, 0, 0) is None
        assert await s.inlay_hints(uri, 0, 5) is None
        rng = types.Range(types.Position(0, 0), types.Position(1, 0))
        assert await s.code_actions(uri, rng) is None
        report = await s.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert not report.items
        # a change for a document that was never opened is ignored
        s.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="x")]))
        await alive(s)


async def test_cancelled_request_is_dropped():
    """A hover waiting for a slow analysis is cancelled: the answer is
    RequestCancelled, and the server carries on."""
    async with start_session("visual-studio-code", init_options=ZERO,
                             PALLAS_LSP_TEST_ANALYSIS_DELAY_MS="600") as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=URI),
                                   position=types.Position(6, 32))
        fut = s.client.protocol.send_request(types.TEXT_DOCUMENT_HOVER, params, msg_id="cancel-me")
        await asyncio.sleep(0.05)
        s.client.cancel_request(types.CancelParams(id="cancel-me"))
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(asyncio.wrap_future(fut), 10)
        assert info.value.code == types.LSPErrorCodes.RequestCancelled
        hover = await s.hover(URI, 6, 32)  # the same request, not cancelled, works
        assert hover is not None and "scratch" in hover.contents.value


async def test_code_action_for_a_changed_document_is_content_modified():
    async with start_session("visual-studio-code", init_options=ZERO,
                             PALLAS_LSP_TEST_ANALYSIS_DELAY_MS="300") as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        rng = types.Range(types.Position(8, 0), types.Position(9, 0))
        pending = asyncio.ensure_future(s.code_actions(URI, rng))
        await asyncio.sleep(0.05)
        s.replace_all(URI, text + "\n")
        with pytest.raises(JsonRpcException) as info:
            await pending
        assert info.value.code == types.LSPErrorCodes.ContentModified
        assert await s.code_actions(URI, rng)  # asked again: answered


async def test_no_error_popups_during_normal_use(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    await session.diagnostics(URI)
    await session.hover(URI, 8, 20)
    await session.inlay_hints(URI)
    assert not [m for m in session.client.messages if m.type == types.MessageType.Error]
