"""Inputs that used to stop the server, lose diagnostics or leak memory
(issue 13, items 2-7), each through a real server over stdio."""
from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import Future

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, client_capabilities

from lsp_harness import (KERNELS, SERVER_COMMAND, kernel_text, kernel_uri, make_client, server_env,
                         start_session, wait_for)

URI = kernel_uri("dma_bugs.py")
BUGS = {"PAL101", "PAL103"}
ZERO = {"diagnostics": {"debounceMs": 0}}
EVIL = {"PALLAS_LSP_ANALYZER": "evil_engine:analyze"}


def raw(client, data: bytes, msg_id: str | None = None) -> Future | None:
    """Write bytes as they are; a future for the response to `msg_id`."""
    fut = None
    if msg_id is not None:
        fut = Future()
        client.protocol._request_futures[msg_id] = fut
    client.protocol.writer.write(data)
    return fut


def frame(obj: dict, length: int | None = None, header: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    body = json.dumps(obj).encode()
    return header % (len(body) if length is None else length) + body


def hover_request(msg_id: str, line: int = 6, character: int = 32) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": URI}, "position": {"line": line, "character": character}}}


async def answer(fut: Future, timeout: float = 10):
    return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)


async def healthy(s) -> None:
    """Still answering a hover, still publishing the right diagnostics."""
    hover = await asyncio.wait_for(s.hover(URI, 6, 32), 10)
    assert hover is not None and "scratch" in hover.contents.value
    s.replace_all(URI, s.texts[URI])
    assert {d.code for d in await s.diagnostics(URI)} == BUGS


# ---------------------------------------------------------------- 2. superseded versions


async def test_rapid_edits_analyse_only_the_newest_version():
    """20 edits while each analysis takes 0.3 s: the old versions are dropped,
    the final diagnostics and a hover come about one analysis later (they
    used to wait behind all 20)."""
    async with start_session("visual-studio-code", init_options=ZERO,
                             PALLAS_LSP_TEST_ANALYSIS_DELAY_MS="300") as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        await s.diagnostics(URI)
        for i in range(20):
            s.replace_all(URI, text + f"\n# edit {i}\n")
            await asyncio.sleep(0.02)
        t0 = time.monotonic()
        hover = await s.hover(URI, 6, 32)
        hover_s = time.monotonic() - t0
        assert {d.code for d in await s.diagnostics(URI)} == BUGS
        final_s = time.monotonic() - t0
        state = await s.server_text(URI)
        assert hover is not None and hover_s < 1.2, hover_s
        assert final_s < 1.5, final_s
        assert state["analyses"] <= 6, state
        assert state["superseded"] >= 10, state


# ---------------------------------------------------------------- 3. a Future per notification


async def test_notifications_leave_no_futures_behind():
    async with start_session("neovim", init_options=ZERO) as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        for i in range(300):
            s.edit(URI, [types.TextEdit(types.Range(types.Position(0, 0), types.Position(0, 0)),
                                        "#" if i % 2 == 0 else "")])
        state = await s.server_text(URI)
        assert state["text"] == s.texts[URI]
        assert state["pending_futures"] <= 3, state["pending_futures"]


# ---------------------------------------------------------------- 4. framing


async def test_a_huge_content_length_is_skipped_and_answered():
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        fut = raw(s.client, frame(hover_request("huge-1"), length=10**12), "huge-1")
        with pytest.raises(JsonRpcException) as info:
            await answer(fut)
        assert info.value.code == types.ErrorCodes.InvalidRequest
        assert "larger than the limit" in info.value.message
        await healthy(s)  # resynchronised on the next header
        assert s.client._server.returncode is None


async def test_headers_in_other_spellings_are_read():
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        for i, header in enumerate([b"content-length: %d\r\n\r\n", b"Content-Length: %d\n\n",
                                    b"CONTENT-LENGTH:%d\r\nContent-Type: application/vscode-jsonrpc; "
                                    b"charset=utf-8\r\n\r\n"]):
            fut = raw(s.client, frame(hover_request(f"h-{i}"), header=header), f"h-{i}")
            result = await answer(fut)
            assert result is not None and "scratch" in json.dumps(result, default=str)
        await healthy(s)


async def test_wrong_lengths_and_garbage_do_not_make_the_server_deaf():
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        short = frame(hover_request("short-1"))
        short_len = len(json.dumps(hover_request("short-1")).encode()) // 2
        fut_short = raw(s.client, frame(hover_request("short-1"), length=short_len), "short-1")
        with pytest.raises(JsonRpcException) as info:
            await answer(fut_short)
        assert info.value.code == -32700  # ParseError, with the request's id
        assert short  # the rest of that body is skipped as garbage
        fut_long = raw(s.client, frame(hover_request("long-1"), length=len(
            json.dumps(hover_request("long-1"))) + 30), "long-1")
        await healthy(s)  # the next message completes the too-long one
        assert await answer(fut_long) is not None  # and it was read as sent
        raw(s.client, b"this is not a header\r\n\r\n{}\r\nContent-Length: abc\r\n\r\n")
        fut = raw(s.client, frame(hover_request("after-garbage")), "after-garbage")
        assert await answer(fut) is not None
        await healthy(s)
        errors = [m.message for m in s.client.log_messages if m.type == types.MessageType.Error]
        assert any("not part of a message" in m for m in errors), errors


# ---------------------------------------------------------------- 5. what cannot be analysed


async def test_a_lone_surrogate_does_not_hide_the_diagnostics():
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        text = kernel_text("dma_bugs.py") + "\n# broken: \udc80\n"
        s.open(URI, text)
        assert {d.code for d in await s.diagnostics(URI)} == BUGS
        hover = await s.hover(URI, 6, 32)
        assert hover is not None and "scratch" in hover.contents.value
        await wait_for(lambda: [m for m in s.client.log_messages if "surrogate" in m.message])


async def test_a_buffer_over_the_limit_is_analysed_up_to_the_limit():
    async with start_session("neovim", init_options=ZERO) as s:
        text = kernel_text("dma_bugs.py") + "\n\ndef padding():\n" + "    x = 1  # pad\n" * 340_000
        assert len(text) > 5_000_000
        s.open(URI, text)
        diags = await s.diagnostics(URI, timeout=60)
        assert BUGS <= {d.code for d in diags}
        (note,) = [d for d in diags if d.code is None]
        assert note.range.start.line == 0 and "checked only lines 1-" in note.message
        assert "5,000,000" in note.message
        await wait_for(lambda: [m for m in s.client.log_messages if "checked only" in m.message])


async def test_a_memory_error_still_checks_the_first_part_and_says_so():
    async with start_session("emacs", init_options=ZERO, **EVIL) as s:
        text = (kernel_text("dma_bugs.py") + "\n\ndef padding():\n" + "    x = 1\n" * 400
                + "\n\ndef hog():\n    pass  # MEMORY_HOG\n")
        s.open(URI, text)
        diags = await s.diagnostics(URI)
        assert BUGS <= {d.code for d in diags}
        (note,) = [d for d in diags if d.code is None]
        assert note.range.start.line == 0 and "did not fit in memory" in note.message


# ---------------------------------------------------------------- 6. invalid changes


def did_change(uri: str, version: int, change: dict) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})


@pytest.mark.parametrize("change", [
    {"text": None},
    {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": None},
    {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 3}}, "text": "x"},
    {"range": {"start": {"line": 0, "character": -5}, "end": {"line": 0, "character": 3}}, "text": "x"},
], ids=["null-text", "null-text-in-range", "negative-line", "negative-character"])
async def test_an_invalid_change_is_refused_and_the_text_kept(change):
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        await s.diagnostics(URI)
        raw(s.client, did_change(URI, 2, change))
        state = await s.server_text(URI)
        assert state["text"] == text and state["version"] == 1
        await wait_for(lambda: [m for m in s.client.log_messages
                                if m.type == types.MessageType.Error and "refused a change" in m.message])
        s.versions[URI] = 2
        await healthy(s)


# ---------------------------------------------------------------- 7. lifecycle


async def test_requests_before_initialize_and_after_shutdown_are_refused():
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(),
                                client_factory=make_client)
    client = await config.start()
    try:
        # (raw: pytest-lsp's client itself refuses to send requests this early)
        for request in [hover_request("early-hover"),
                        {"jsonrpc": "2.0", "id": "early-run", "method": "workspace/executeCommand",
                         "params": {"command": "pallas-lsp.run", "arguments": [{"uri": URI}]}}]:
            with pytest.raises(JsonRpcException) as info:
                await answer(raw(client, frame(request), request["id"]))
            assert info.value.code == types.ErrorCodes.ServerNotInitialized
        await client.initialize_session(types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), root_uri=KERNELS.as_uri(),
            initialization_options=ZERO))
        with pytest.raises(JsonRpcException) as info:  # initialize is sent once
            await asyncio.wait_for(client.initialize_async(types.InitializeParams(
                capabilities=types.ClientCapabilities())), 10)
        assert info.value.code == types.ErrorCodes.InvalidRequest
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=URI, language_id="python", version=1, text=kernel_text("dma_bugs.py"))))
        assert await client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(URI), types.Position(6, 32))) is not None
        await client.shutdown_async(None)
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
                types.TextDocumentIdentifier(URI), types.Position(6, 32))), 10)
        assert info.value.code == types.ErrorCodes.InvalidRequest
        client.exit(None)
        await wait_for(lambda: client._server.returncode is not None, 20)
        assert client._server.returncode == 0
    finally:
        await client.stop()
