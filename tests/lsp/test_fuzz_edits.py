"""Random editing sessions through the real server (hypothesis).

Thousands of incremental edits (insertions, deletions, replacements,
half-typed lines, pasted junk, emoji, CJK, CR/CRLF line breaks, characters
that str.splitlines treats as line breaks but LSP does not) on real kernel
files, interleaved with hover, inlay hint, code action and diagnostic
requests. The server must stay alive, answer every request without an
internal error, keep its copy of each document identical to the client's,
and only ever report positions that exist in the document.
"""
from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from lsp_harness import KERNELS, REPO, split_lines, start_session, to_units

CORPUS_FILES = sorted(KERNELS.glob("*.py")) + sorted((REPO / "tests" / "oracle" / "fixtures").glob("*.py"))[:24]
CORPUS = [p.read_text(encoding="utf-8") for p in CORPUS_FILES]

SNIPPETS = [
    "pltpu.make_async_copy(", "scratch[...]", "scratch", ".at[0]", "sems.at[slot]", "sems[0]",
    "copy.start()", ".wait()", "\n    ", "\n", "    ", "(", ")", "[", "]", ":", ",", "=",
    "def kernel(x_ref, o_hbm, buf, sems):\n", "pl.pallas_call(", "scratch_shapes=[",
    "pltpu.SemaphoreType.DMA((2,))", "pltpu.VMEM((8, 128), jnp.float32)", "# noqa: PAL101",
    "# noqa", "#", "'", '"', '"""', "'''", "\\", "lambda s: ", "for i in range(2):\n        ",
    "🚀", "👩‍👩‍👧", "数据", "並列コピー", "é", "\u0301", "\r\n", "\r", "\t", "\x0c", "\x0b", "\u2028",
    "\u2029", "\x85", "\x1c", "\ufeff", "\x00", "𝔘𝔫𝔦", "\U0010ffff",
]

text_piece = st.one_of(
    st.sampled_from(SNIPPETS),
    st.text(max_size=12),  # arbitrary Unicode (no lone surrogates)
    st.lists(st.sampled_from(SNIPPETS), min_size=2, max_size=6).map("".join),
    # pasted junk: a slice of another kernel file
    st.tuples(st.integers(0, len(CORPUS) - 1), st.integers(0, 10**6), st.integers(1, 400)).map(
        lambda t: CORPUS[t[0]][t[1] % len(CORPUS[t[0]]):][: t[2]]),
)

edit_op = st.tuples(
    st.sampled_from(["insert", "insert", "insert", "delete", "replace", "multi", "request"]),
    st.integers(0, 10**9), st.integers(0, 400), text_piece,
    st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 40), text_piece), min_size=2, max_size=4),
)

session_plan = st.tuples(st.integers(0, len(CORPUS) - 1), st.lists(edit_op, min_size=15, max_size=60))


class Harness:
    """A server process and its client on a private event loop, shared by all
    examples of one test (hypothesis drives a synchronous function)."""

    def __init__(self, spec: str):
        self.loop = asyncio.new_event_loop()
        self._cm = start_session(spec, init_options={"diagnostics": {"debounceMs": 0}})
        self.s = self.loop.run_until_complete(self._cm.__aenter__())
        self.ids = itertools.count()
        self.edits = 0
        self.requests = 0

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60))

    def close(self):
        try:
            self.loop.run_until_complete(self._cm.__aexit__(None, None, None))
        finally:
            self.loop.close()


@pytest.fixture(scope="module", params=["visual-studio-code", "neovim"])
def harness(request):
    h = Harness(request.param)
    yield h
    h.close()
    # the budget: this module must replay thousands of edits in total
    print(f"\n{request.param}: {h.edits} edits, {h.requests} requests")
    assert h.edits >= 1500


def snap(text: str, offset: int) -> int:
    """A code-point offset an editor can express: never inside \\r\\n."""
    offset = offset % (len(text) + 1)
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1
    return offset


def position(text: str, offset: int, encoding: str) -> types.Position:
    before = text[:offset]
    lines = split_lines(before)
    return types.Position(len(lines) - 1, to_units(lines[-1], encoding))


def check_position(text: str, pos: types.Position, encoding: str) -> None:
    lines = split_lines(text)
    assert 0 <= pos.line < len(lines), (pos, len(lines))
    line = lines[pos.line]
    boundaries = {to_units(line[:i], encoding) for i in range(len(line) + 1)}
    assert pos.character in boundaries, (pos, line)


async def request_something(h: Harness, uri: str, a: int, b: int) -> None:
    s, text, enc = h.s, h.s.texts[uri], h.s.encoding
    start = snap(text, a)
    end = max(start, snap(text, start + b))
    p, q = position(text, start, enc), position(text, end, enc)
    h.requests += 1
    kind = a % 4
    try:
        if kind == 0:
            hover = await s.hover(uri, p.line, p.character)
            if hover is not None and hover.range is not None:
                check_position(text, hover.range.start, enc)
                check_position(text, hover.range.end, enc)
        elif kind == 1:
            for hint in await s.inlay_hints(uri, p.line, q.line + 1) or []:
                check_position(text, hint.position, enc)
        elif kind == 2:
            actions = await s.code_actions(uri, types.Range(p, q))
            for action in actions or []:
                for change in action.edit.document_changes or []:
                    for edit in change.edits:
                        check_position(text, edit.range.start, enc)
                        check_position(text, edit.range.end, enc)
        else:
            for d in await s.diagnostics(uri):
                check_position(text, d.range.start, enc)
                check_position(text, d.range.end, enc)
    except JsonRpcException as exc:
        # an answer, but an internal error would be a server bug
        assert exc.code != types.ErrorCodes.InternalError, exc


async def replay(h: Harness, start_text: str, ops) -> None:
    s, enc = h.s, h.s.encoding
    uri = (KERNELS / f"fuzz_{next(h.ids)}.py").as_uri()
    s.open(uri, start_text)
    for kind, a, b, piece, multi in ops:
        text = s.texts[uri]
        if kind == "request":
            await request_something(h, uri, a, b)
            continue
        if kind == "multi":  # several changes in one notification, applied in order
            changes = []
            for ma, mb, mpiece in multi:
                start = snap(text, ma)
                end = max(start, snap(text, start + mb))
                changes.append(types.TextDocumentContentChangePartial(
                    range=types.Range(position(text, start, enc), position(text, end, enc)), text=mpiece))
                text = text[:start] + mpiece + text[end:]
            s.texts[uri] = text
            s.versions[uri] += 1
            s.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=s.versions[uri]),
                content_changes=changes))
            h.edits += len(changes)
            continue
        start = snap(text, a)
        end = start if kind == "insert" else max(start, snap(text, start + b))
        new = "" if kind == "delete" else piece
        s.edit(uri, [types.TextEdit(types.Range(position(text, start, enc), position(text, end, enc)), new)])
        assert s.texts[uri] == text[:start] + new + text[end:]
        h.edits += 1
        if a % 7 == 0:  # now and then, check the server's copy mid-stream
            state = await s.server_text(uri)
            assert state["text"] == s.texts[uri]
    state = await s.server_text(uri)
    assert state["text"] == s.texts[uri], "server document diverged from the client's"
    assert state["version"] == s.versions[uri]
    for d in await s.diagnostics(uri):  # the final version is analysed and reported
        check_position(s.texts[uri], d.range.start, enc)
        check_position(s.texts[uri], d.range.end, enc)
    s.close(uri)
    assert s.client._server.returncode is None, "server died"


@settings(max_examples=90, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(plan=session_plan)
def test_random_edits_keep_server_alive_and_in_sync(harness, plan):
    index, ops = plan
    harness.run(replay(harness, CORPUS[index], ops))
