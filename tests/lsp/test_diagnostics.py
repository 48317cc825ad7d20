"""Diagnostics: push (with the version) or pull, per client; never stale;
cleared on close; code, source, codeDescription and related information."""
from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session, wait_for
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("dma_bugs.py")


def by_code(diags, code):
    return [d for d in diags if d.code == code]


async def test_reports_dma_bugs(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    diags = await session.diagnostics(URI)
    assert {d.code for d in diags} >= {"PAL101", "PAL103"}
    (d101,) = by_code(diags, "PAL101")
    line, col = find(text, "scratch[...], o_hbm")
    assert d101.range.start == position_of(text, line, col, session.encoding)
    assert d101.range.end == position_of(text, line, col + len("scratch[...]"), session.encoding)
    assert d101.source == "pallas-lsp"
    assert d101.severity == types.DiagnosticSeverity.Error
    (d103,) = by_code(diags, "PAL103")
    line, col = find(text, "(x_hbm, buf, sems)")
    assert d103.range.start == position_of(text, line, col + len("(x_hbm, buf, "), session.encoding)


async def test_related_information_points_at_start(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    (d101,) = by_code(await session.diagnostics(URI), "PAL101")
    start_line, _ = find(text, "copy.start()")
    caps = session.client.capabilities.text_document.publish_diagnostics
    if caps.related_information:
        assert d101.related_information
        assert any(r.location.range.start.line == start_line and r.location.uri == URI
                   for r in d101.related_information)
    else:  # Emacs: the related line is folded into the message instead
        assert d101.related_information is None
        assert f"line {start_line + 1}:" in d101.message


async def test_push_or_pull_per_client(session):
    """Neovim 0.11 pulls, so nothing is pushed; VS Code 1.65 and Emacs 29
    cannot pull, so diagnostics are pushed with the document version."""
    session.open(URI, kernel_text("dma_bugs.py"))
    if session.spec == "neovim":
        assert session.pull
        await session.diagnostics(URI)
        await asyncio.sleep(0.3)
        assert session.client.published[URI] == []
    else:
        assert not session.pull
        await session.diagnostics(URI)
        assert all(p.version is not None for p in session.client.published[URI])


async def test_clears_on_close():
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await s.diagnostics(URI)
        s.close(URI)
        await wait_for(lambda: not s.client.published[URI][-1].diagnostics)


async def test_never_publishes_an_old_version():
    """Fast typing: every publish is for the latest version known at that
    moment, versions never go backwards, and the last one is the last edit."""
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 30}},
                             PALLAS_LSP_TEST_ANALYSIS_DELAY_MS="40") as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        for i in range(15):
            s.replace_all(URI, text + f"\n# edit {i}\n")
            await asyncio.sleep(0.01)
        final = s.versions[URI]
        await wait_for(lambda: any(p.version == final for p in s.client.published[URI]))
        await asyncio.sleep(0.3)
        versions = [p.version for p in s.client.published[URI]]
        assert versions == sorted(versions)
        assert versions[-1] == final
        assert len(versions) < 10  # debounced, not one per keystroke


async def test_debounce_is_configurable():
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 600}}) as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        await s.diagnostics(URI)  # open is immediate
        s.replace_all(URI, text + "\n")
        await asyncio.sleep(0.3)
        assert all(p.version == 1 for p in s.client.published[URI])
        await s.diagnostics(URI)  # arrives after the debounce


async def test_an_edit_is_analysed_as_the_pause_ends():
    """The analysis of an edit starts its expected duration before the
    debounce is over, so the diagnostics come when the pause ends, not one
    analysis after it; edits closer together than 40 % of the debounce start
    none (fast typing costs nothing)."""
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 1000}},
                             PALLAS_LSP_TEST_ANALYSIS_DELAY_MS="500") as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        await s.diagnostics(URI)  # the open: one analysis, its duration learnt
        before = (await s.server_text(URI))["analyses"]
        for i in range(4):
            s.replace_all(URI, text + f"\n# typing {i}\n")
            await asyncio.sleep(0.15)
        s.replace_all(URI, text + "\n# paused\n")
        t0 = time.monotonic()
        final = s.versions[URI]
        await wait_for(lambda: any(p.version == final for p in s.client.published[URI]), 10)
        elapsed = time.monotonic() - t0
        # Without the early start: 1.0 s of pause + 0.5 s of analysis.
        assert 0.85 < elapsed < 1.3, elapsed
        assert (await s.server_text(URI))["analyses"] == before + 1


async def test_fixed_document_has_no_diagnostics(session):
    text = kernel_text("dma_bugs.py")
    fixed = text.replace("scratch[...], o_hbm", "scratch, o_hbm").replace("buf, sems)", "buf, sems.at[0])")
    session.open(URI, text)
    assert await session.diagnostics(URI)
    session.replace_all(URI, fixed)
    assert await session.diagnostics(URI) == []


async def test_code_description_link():
    async with start_session("visual-studio-code", init_options={
            "diagnostics": {"debounceMs": 0, "codeDescriptionUrl": "https://example.invalid/rules/{code}"}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        (d,) = by_code(await s.diagnostics(URI), "PAL101")
        assert d.code_description is not None
        assert d.code_description.href == "https://example.invalid/rules/PAL101"


async def test_default_code_description_is_the_jax_raise_site():
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        (d,) = by_code(await s.diagnostics(URI), "PAL101")
        href = d.code_description.href
        assert href.startswith("file://") and "/jax/_src/pallas/mosaic/primitives.py#L" in href
        path, line = href[len("file://"):].split("#L")
        assert "must be Refs" in "".join(open(path).read().splitlines()[int(line) - 1:int(line) + 3])


async def test_emacs_gets_no_code_description():
    async with start_session("emacs", init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert all(d.code_description is None for d in await s.diagnostics(URI))


@pytest.mark.parametrize("spec", ["neovim"])
async def test_pull_unchanged_report(spec):
    async with start_session(spec) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        params = types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=URI))
        first = await s.client.text_document_diagnostic_async(params)
        assert first.result_id
        params.previous_result_id = first.result_id
        second = await s.client.text_document_diagnostic_async(params)
        assert second.kind == "unchanged"
