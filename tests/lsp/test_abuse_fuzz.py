"""One server, random edits interleaved with every abuse case of issue 13
(broken framing, huge lengths, garbage, invalid changes, lone surrogates, a
buffer over the engine's limit, deep JSON, protocol misuse). After each step
it must still answer a hover and publish the right diagnostics for a known
buggy kernel, and its copy of the edited document must equal the client's."""
from __future__ import annotations

import asyncio
import json
import random

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from lsp_harness import KERNELS, kernel_text, start_session
from test_hardening import URI, ZERO, did_change, frame, healthy, hover_request, raw

SCRATCH = (KERNELS / "fuzz_abuse_scratch.py").as_uri()
BIG = (KERNELS / "fuzz_abuse_big.py").as_uri()
SNIPPETS = ["pltpu.make_async_copy(", "scratch[...]", ".at[0]", "\n    ", "(", ")", "# noqa",
            "\udc80", "\ud800x", "🚀", "\r\n", "\x0c", "\u2028", '"""', "\\", "é"]


def position(text: str, offset: int) -> types.Position:
    before = text[:offset].replace("\r\n", "\n").replace("\r", "\n")
    lines = before.split("\n")
    return types.Position(len(lines) - 1, len(lines[-1].encode("utf-16-le", "surrogatepass")) // 2)


def utf16(text: str) -> bytes:
    """A document as LSP defines it: UTF-16 code units. Edits can leave a
    lone high and a lone low surrogate side by side in the client's copy;
    on the wire that is one character, which the server rightly holds as such."""
    return text.encode("utf-16-le", "surrogatepass")


def random_edit(s, rnd: random.Random) -> None:
    text = s.texts[SCRATCH]
    start = rnd.randrange(len(text) + 1)
    if 0 < start < len(text) and text[start - 1] == "\r" and text[start] == "\n":
        start -= 1
    end = min(len(text), start + rnd.choice([0, 0, 1, 5, 40]))
    if 0 < end < len(text) and text[end - 1] == "\r" and text[end] == "\n":
        end -= 1
    new = rnd.choice(SNIPPETS) if rnd.random() < 0.8 else ""
    s.versions[SCRATCH] += 1
    s.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=SCRATCH, version=s.versions[SCRATCH]),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(position(text, start), position(text, end)), text=new)]))
    s.texts[SCRATCH] = text[:start] + new + text[end:]


def abuse_cases(s, rnd: random.Random):
    """Each returns an optional future for an answer that must come."""
    n = {"i": 0}

    def next_id(tag: str) -> str:
        n["i"] += 1
        return f"{tag}-{n['i']}"

    def huge():
        i = next_id("huge")
        return raw(s.client, frame(hover_request(i), length=rnd.choice([10**12, 2**63, 10**6 * 70])), i)

    def header_spelling():
        i = next_id("spelled")
        return raw(s.client, frame(hover_request(i), header=rnd.choice(
            [b"content-length: %d\n\n", b"CONTENT-LENGTH : %d\r\n\r\n", b"Content-Length:%d\n\r\n"])), i)

    def short():
        body = json.dumps(hover_request(next_id("short"))).encode()
        raw(s.client, b"Content-Length: %d\r\n\r\n" % rnd.randrange(1, len(body)) + body)

    def long():
        i = next_id("long")
        body = json.dumps(hover_request(i)).encode()
        return raw(s.client, b"Content-Length: %d\r\n\r\n" % (len(body) + rnd.randrange(1, 60)) + body, i)

    def garbage():
        raw(s.client, rnd.choice([b"\r\n\r\n", b"hello\n", b"Content-Length: x\r\n\r\n{}",
                                  bytes(rnd.randrange(256) for _ in range(300)), b"\x00" * 50,
                                  b"Content-Length: 5\r\n\r\n[1,2]", b"Content-Length: 4\r\n\r\nnull"]))

    def deep_json():
        depth = rnd.choice([10_000, 200_000])
        raw(s.client, frame({"jsonrpc": "2.0", "method": "$/x"}) +
            b"Content-Length: %d\r\n\r\n" % (2 * depth) + b"[" * depth + b"]" * depth)

    def invalid_change():
        change = rnd.choice([{"text": None}, {"text": 5},
                             {"range": {"start": {"line": -1, "character": 0},
                                        "end": {"line": 0, "character": 0}}, "text": "x"},
                             {"range": {"start": {"line": 0, "character": 0},
                                        "end": {"line": 0, "character": 2**40}}, "text": "x"},
                             {"range": "everything", "text": "x"}])
        raw(s.client, did_change(SCRATCH, s.versions[SCRATCH] + 1, change))

    def invalid_open():
        raw(s.client, frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": SCRATCH + "x", "languageId": "python", "version": 1, "text": None}}}))

    def protocol_misuse():
        i = next_id("misuse")
        return raw(s.client, frame(rnd.choice([
            {"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {"capabilities": {}}},
            {"jsonrpc": "2.0", "id": i, "method": "pallas/none", "params": {}},
            {"jsonrpc": "2.0", "id": i, "method": "textDocument/hover",
             "params": {"textDocument": 7, "position": None}},
            {"jsonrpc": "1.0", "id": i, "method": "textDocument/hover"},
        ])), None)

    def cancel_unknown():
        raw(s.client, frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "nope"}}))

    def surrogate_doc():
        s.versions[SCRATCH] += 1
        text = s.texts[SCRATCH] + "\n# lone \udc80 and \ud83d\n"
        s.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=SCRATCH, version=s.versions[SCRATCH]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        s.texts[SCRATCH] = text

    return [huge, header_spelling, short, long, garbage, deep_json, invalid_change, invalid_open,
            protocol_misuse, cancel_unknown, surrogate_doc]


async def test_random_edits_and_abuse_keep_the_server_right():
    rnd = random.Random(13)
    async with start_session("visual-studio-code", init_options=ZERO) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        s.open(SCRATCH, kernel_text("dma_bugs.py"))
        await healthy(s)
        # once: a buffer over the engine's limit, analysed up to the limit
        s.open(BIG, kernel_text("dma_bugs.py") + "\n\ndef pad():\n" + "    x = 1\n" * 520_000)
        big = await s.diagnostics(BIG, timeout=60)
        assert {"PAL101", "PAL103"} <= {d.code for d in big}
        s.close(BIG)
        cases = abuse_cases(s, rnd)
        steps = 0
        for round_ in range(4):
            order = cases[:]
            rnd.shuffle(order)
            for case in order:
                for _ in range(rnd.randrange(0, 25)):
                    random_edit(s, rnd)
                fut = case()
                if fut is not None:  # a request: some answer must come (result or error)
                    try:
                        await asyncio.wait_for(asyncio.wrap_future(fut), 15)
                    except JsonRpcException:
                        pass
                await healthy(s)
                steps += 1
                state = await s.server_text(SCRATCH)
                assert utf16(state["text"]) == utf16(s.texts[SCRATCH]), \
                    f"diverged after {case.__name__}"
        assert steps == 4 * len(cases)
        assert s.client._server.returncode is None
