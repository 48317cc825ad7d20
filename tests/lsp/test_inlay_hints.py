"""Inlay hints: the inferred kind after each kernel parameter (and, when
enabled, after assignment targets), placed through the position encoding."""
from __future__ import annotations

from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session, wait_for
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("dma_bugs.py")
UNICODE_URI = kernel_uri("unicode_kernel.py")


def labels(hints):
    return {(h.position.line, h.position.character): h.label for h in hints}


async def test_parameter_hints(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    got = labels(await session.inlay_hints(URI))
    line, col = find(text, "scratch, sem):")
    end = position_of(text, line, col + len("scratch"), session.encoding)
    assert got[(end.line, end.character)] == ": Ref[VMEM f32[8,128]]"
    line, col = find(text, "sems):")
    end = position_of(text, line, col + len("sems"), session.encoding)
    assert got[(end.line, end.character)] == ": DMA sem (2,)"
    line, col = find(text, "sem):")
    end = position_of(text, line, col + len("sem"), session.encoding)
    assert got[(end.line, end.character)] == ": DMA sem ()"
    # parameters only by default: no hint after `copy = ...`
    line, col = find(text, "copy = ")
    assert not any(k[0] == line for k in got)


async def test_hints_are_type_hints_with_a_tooltip(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    hints = await session.inlay_hints(URI)
    assert hints
    assert all(h.kind == types.InlayHintKind.Type for h in hints)
    assert any("scratch_shapes[1]" in (h.tooltip or "") for h in hints)


async def test_range_is_respected(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    line, _ = find(text, "def double_buffer_kernel")
    hints = await session.inlay_hints(URI, line, line + 1)
    assert hints and all(h.position.line == line for h in hints)


async def test_assignment_hints_when_enabled():
    async with start_session("neovim", init_options={"inlayHints": {"assignments": True}}) as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        got = labels(await s.inlay_hints(URI))
        line, col = find(text, "copy = pltpu")
        end = position_of(text, line, col + len("copy"), s.encoding)
        assert got[(end.line, end.character)] == ": local copy descriptor"


async def test_disabled_by_setting():
    async with start_session("visual-studio-code", init_options={"inlayHints": {"enable": False}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert not await s.inlay_hints(URI)


async def test_hint_positions_after_unicode(session):
    """The hint after `cp` sits after the emoji-laden string on its line."""
    async with start_session(session.spec, init_options={"inlayHints": {"assignments": True}}) as s:
        text = kernel_text("unicode_kernel.py")
        s.open(UNICODE_URI, text)
        got = labels(await s.inlay_hints(UNICODE_URI))
        line, col = find(text, "cp = pltpu")
        end = position_of(text, line, col + len("cp"), s.encoding)
        assert got[(end.line, end.character)] == ": local copy descriptor"


async def test_settings_change_asks_for_an_inlay_refresh():
    """Neovim supports workspace/inlayHint/refresh: toggling hints sends it."""
    async with start_session("neovim", configuration={"pallas-lsp": {}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await s.inlay_hints(URI)
        s.client.set_configuration({"pallas-lsp": {"inlayHints": {"parameters": False}}})
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_for(lambda: s.client.inlay_refreshes >= 1)
        assert not await s.inlay_hints(URI)
