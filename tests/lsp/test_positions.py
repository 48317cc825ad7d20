"""Position encoding: negotiated per client (UTF-8 when offered, else
UTF-16) and applied to every position in and out. Emoji (outside the BMP,
and ZWJ sequences) and CJK text before a bad argument must not move the
squiggle."""
from __future__ import annotations

from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("unicode_kernel.py")


async def test_encoding_negotiated(session):
    offered = session.client.capabilities.general and session.client.capabilities.general.position_encodings
    expected = "utf-8" if offered and "utf-8" in offered else "utf-16"
    assert session.encoding == expected


async def test_vscode_gets_utf16_and_emacs_utf8_although_it_prefers_utf32():
    async with start_session("emacs") as s:
        assert s.encoding == "utf-8"
    async with start_session("visual-studio-code") as s:
        assert s.encoding == "utf-16"


async def test_squiggle_under_the_argument_after_emoji_and_cjk(session):
    text = kernel_text("unicode_kernel.py")
    session.open(URI, text)
    diags = {d.code: d for d in await session.diagnostics(URI)}
    line, col = find(text, "scratch[...], o_hbm")
    assert diags["PAL101"].range == types.Range(
        position_of(text, line, col, session.encoding),
        position_of(text, line, col + len("scratch[...]"), session.encoding))
    line, col = find(text, "(x_hbm, buf, sems)")
    col += len("(x_hbm, buf, ")
    assert diags["PAL103"].range == types.Range(
        position_of(text, line, col, session.encoding),
        position_of(text, line, col + len("sems"), session.encoding))
    # sanity: with emoji before it, the columns really differ per encoding
    assert position_of(text, line, col, "utf-8") != position_of(text, line, col, "utf-16")


async def test_hover_position_after_emoji(session):
    text = kernel_text("unicode_kernel.py")
    session.open(URI, text)
    line, col = find(text, "o_hbm, sem)")
    hover = await session.hover(URI, *_xy(position_of(text, line, col + 2, session.encoding)))
    assert hover is not None
    assert "o_hbm" in hover.contents.value and "ANY" in hover.contents.value
    assert hover.range is None or hover.range.start == position_of(text, line, col, session.encoding)


async def test_incremental_edit_after_emoji(session):
    """Replace `scratch[...]` by `scratch` with client positions: the server's
    copy stays identical and the diagnostic disappears."""
    text = kernel_text("unicode_kernel.py")
    session.open(URI, text)
    await session.diagnostics(URI)
    line, col = find(text, "scratch[...], o_hbm")
    rng = types.Range(position_of(text, line, col + len("scratch"), session.encoding),
                      position_of(text, line, col + len("scratch[...]"), session.encoding))
    session.edit(URI, [types.TextEdit(range=rng, new_text="")])
    state = await session.server_text(URI)
    assert state["text"] == session.texts[URI]
    assert "PAL101" not in {d.code for d in await session.diagnostics(URI)}


def _xy(pos: types.Position) -> tuple[int, int]:
    return pos.line, pos.character
