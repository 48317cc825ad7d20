"""Starting and stopping: stdio (run() and `python -m pallas_lsp serve`),
--tcp HOST:PORT, --log-file, a clean stdout, exit codes."""
from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from lsp_harness import (KERNELS, SERVER_COMMAND, kernel_text, kernel_uri, make_client, server_env,
                      start_session, wait_for)

URI = kernel_uri("dma_bugs.py")


async def _roundtrip(client) -> None:
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=KERNELS.as_uri(),
        initialization_options={"diagnostics": {"debounceMs": 0}}))
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=URI, language_id="python", version=1, text=kernel_text("dma_bugs.py"))))
    await wait_for(lambda: client.published[URI])
    assert {d.code for d in client.published[URI][-1].diagnostics} == {"PAL101", "PAL103"}


async def test_python_m_pallas_lsp_serve():
    config = ClientServerConfig(server_command=[sys.executable, "-m", "pallas_lsp", "serve"],
                                server_env=server_env(), client_factory=make_client)
    client = await config.start()
    try:
        await _roundtrip(client)
        await client.shutdown_session()
        assert client._server.returncode == 0
    finally:
        await client.stop()


async def test_stray_output_does_not_corrupt_stdout():
    """The engine (here a stand-in) prints to stdout and writes to fd 1: the
    protocol stream stays clean because fd 1 is the server's alone."""
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 0}},
                             PALLAS_LSP_ANALYZER="evil_engine:analyze") as s:
        s.open(URI, kernel_text("dma_bugs.py") + "\n# PRINT_TO_STDOUT\n")
        assert {d.code for d in await s.diagnostics(URI)} == {"PAL101", "PAL103"}
        assert s.client.error is None


async def test_log_file(tmp_path):
    log = tmp_path / "server.log"
    command = [sys.executable, "-c",
               f"from pallas_lsp.lsp.server import run; run(log_file={str(log)!r})"]
    config = ClientServerConfig(server_command=command, server_env=server_env(PALLAS_LSP_LOG_LEVEL="INFO"),
                                client_factory=make_client)
    client = await config.start()
    try:
        await _roundtrip(client)
        await client.shutdown_session()
    finally:
        await client.stop()
    assert "pallas-lsp" in log.read_text() and "starting (stdio)" in log.read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_tcp():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pallas_lsp", "serve", "--tcp", f"127.0.0.1:{port}"],
                            env=server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        client = make_client()
        for _ in range(100):
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("server did not listen")
        await _roundtrip(client)
        await client.shutdown_async(None)
        client.exit(None)
        assert proc.wait(timeout=20) == 0
        assert proc.stdout.read() == b""  # nothing on stdout in TCP mode either
        await client.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _lsp(message: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(message) + message


def test_exit_codes():
    init = _lsp(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}')
    initialized = _lsp(b'{"jsonrpc":"2.0","method":"initialized","params":{}}')
    shutdown = _lsp(b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}')
    exit_ = _lsp(b'{"jsonrpc":"2.0","method":"exit"}')

    def run(stdin: bytes) -> subprocess.CompletedProcess:
        return subprocess.run(SERVER_COMMAND, input=stdin, env=server_env(), capture_output=True,
                              timeout=60)

    clean = run(init + initialized + shutdown + exit_)
    assert clean.returncode == 0
    assert clean.stdout.startswith(b"Content-Length: ")
    assert run(init + initialized + exit_).returncode == 1  # exit without shutdown
    assert run(init + initialized).returncode == 1  # client went away (EOF)
