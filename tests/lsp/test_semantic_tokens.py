"""Semantic tokens over a real client: Refs (with their memory space),
Arrays, semaphores and descriptors get modifiers on standard token types, at
exact positions in the negotiated encoding (UTF-16 for VS Code: the line with
an emoji shifts every token after it by one unit); names the engine does not
know get none; range and delta requests agree with a full one."""
from __future__ import annotations

from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)
from pallas_lsp.lsp.semantic_tokens import TOKEN_MODIFIERS, TOKEN_TYPES, decode

URI = kernel_uri("editor_kernel.py")
TEXT = kernel_text("editor_kernel.py")


def tokens_request(s, uri=URI):
    return s.client.text_document_semantic_tokens_full_async(
        types.SemanticTokensParams(text_document=types.TextDocumentIdentifier(uri=uri)))


def by_position(data):
    return {(line, start): (length, typ, sorted(mods)) for line, start, length, typ, mods
            in decode(data)}


async def test_legend_is_standard_types_with_our_modifiers(session):
    provider = session.result.capabilities.semantic_tokens_provider
    assert list(provider.legend.token_types) == TOKEN_TYPES == ["parameter", "variable"]
    assert {"ref", "array", "semaphore", "descriptor", "vmem", "smem", "hbm", "any", "view",
            "declaration"} <= set(provider.legend.token_modifiers)
    assert list(provider.legend.token_modifiers) == TOKEN_MODIFIERS
    assert provider.full.delta is True and provider.range is True


async def test_exact_tokens_at_utf16_positions():
    async with start_session("visual-studio-code") as s:
        assert s.encoding == "utf-16"
        s.open(URI, TEXT)
        got = by_position((await tokens_request(s)).data)
        # def kernel(lens_ref, x_ref, o_ref, o_hbm, buf, sems):
        assert got[(6, 11)] == (8, "parameter", ["declaration", "ref", "smem"])  # prefetch
        assert got[(6, 21)] == (5, "parameter", ["declaration", "ref", "vmem"])
        assert got[(6, 35)] == (5, "parameter", ["any", "declaration", "ref"])
        assert got[(6, 42)] == (3, "parameter", ["declaration", "ref", "vmem"])
        assert got[(6, 47)] == (4, "parameter", ["declaration", "semaphore"])
        assert got[(7, 4)] == (1, "variable", ["array", "declaration"])  # n = lens_ref[0]
        assert got[(7, 8)] == (8, "variable", ["ref", "smem"])
        assert got[(8, 4)] == (1, "variable", ["array", "declaration"])  # y = x_ref[...] * 2
        assert got[(9, 17)] == (1, "variable", ["array"])
        # `    tag = "🚀é"; copy = pltpu.make_async_copy(buf.at[0], o_hbm.at[0], sems.at[0])`
        # 🚀 is two UTF-16 units: everything after it moves right by one.
        assert got[(10, 17)] == (4, "variable", ["declaration", "descriptor"])
        assert got[(10, 46)] == (3, "variable", ["ref", "vmem"])
        assert got[(10, 57)] == (5, "variable", ["any", "ref"])
        assert got[(10, 70)] == (4, "variable", ["semaphore"])
        assert got[(11, 4)] == (4, "variable", ["descriptor"])
        assert got[(14, 13)] == (3, "parameter", ["declaration", "ref", "vmem"])  # run_scoped
        # Unknown, constants, modules and functions get no token
        assert (10, 4) not in got  # tag = "…" (a constant)
        assert (10, 24) not in got  # pltpu
        assert not any(line >= 21 for line, _ in got)  # outside the kernel


async def test_positions_follow_the_negotiated_encoding(session):
    """Every client, its own encoding: the tokens of the emoji line."""
    session.open(URI, TEXT)
    got = by_position((await tokens_request(session)).data)
    line, col = find(TEXT, "copy = pltpu")
    pos = position_of(TEXT, line, col, session.encoding)
    assert got[(pos.line, pos.character)] == (4, "variable", ["declaration", "descriptor"])
    line, col = find(TEXT, "sems.at[0])")
    pos = position_of(TEXT, line, col, session.encoding)
    assert got[(pos.line, pos.character)] == (4, "variable", ["semaphore"])


async def test_range_request_covers_the_lines_asked_for():
    async with start_session("visual-studio-code") as s:
        s.open(URI, TEXT)
        full = decode((await tokens_request(s)).data)
        part = await s.client.text_document_semantic_tokens_range_async(
            types.SemanticTokensRangeParams(
                text_document=types.TextDocumentIdentifier(uri=URI),
                range=types.Range(types.Position(10, 0), types.Position(11, 0))))
        got = decode(part.data)
        assert got == [t for t in full if 10 <= t[0] <= 11]
        assert len(got) == 5


async def test_delta_after_an_edit_equals_a_full_result():
    async with start_session("neovim", init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(URI, TEXT)
        first = await tokens_request(s)
        assert first.result_id
        # a new line inside the kernel: every later token moves down one line
        s.edit(URI, [types.TextEdit(range=types.Range(types.Position(8, 0), types.Position(8, 0)),
                                    new_text="    z = x_ref[...]\n")])
        delta = await s.client.text_document_semantic_tokens_full_delta_async(
            types.SemanticTokensDeltaParams(text_document=types.TextDocumentIdentifier(uri=URI),
                                            previous_result_id=first.result_id))
        assert isinstance(delta, types.SemanticTokensDelta) and delta.result_id != first.result_id
        data = list(first.data)
        for edit in sorted(delta.edits, key=lambda e: e.start, reverse=True):
            data[edit.start:edit.start + edit.delete_count] = edit.data or []
        full = await tokens_request(s)
        assert data == list(full.data)
        got = by_position(full.data)
        assert got[(8, 4)] == (1, "variable", ["array", "declaration"])  # z
        assert got[(8, 8)] == (5, "variable", ["ref", "vmem"])  # x_ref
        assert sum(len(e.data or []) for e in delta.edits) < len(full.data)  # a real delta
        # an unknown previous id gets a full result
        again = await s.client.text_document_semantic_tokens_full_delta_async(
            types.SemanticTokensDeltaParams(text_document=types.TextDocumentIdentifier(uri=URI),
                                            previous_result_id="no-such-id"))
        assert isinstance(again, types.SemanticTokens) and list(again.data) == list(full.data)


async def test_file_without_kernels_gets_null():
    """Nothing the engine knows: no result, so another server's tokens win."""
    async with start_session("visual-studio-code") as s:
        uri = kernel_uri("plain_module.py")
        s.open(uri, "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n")
        assert await tokens_request(s, uri) is None


async def test_disabled_by_setting():
    async with start_session("visual-studio-code",
                             init_options={"semanticTokens": {"enable": False}}) as s:
        s.open(URI, TEXT)
        assert await tokens_request(s) is None
