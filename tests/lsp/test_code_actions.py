"""Code actions: one quick fix per engine Fix (safe ones preferred), "Disable
PALxxx for this line", and source.fixAll.pallas-lsp (safe fixes only).
Every quick fix is applied through the server: afterwards its diagnostic is
gone and the server's copy of the document equals the client's."""
from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from lsp_harness import KERNELS, REPO, find, kernel_text, kernel_uri, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("dma_bugs.py")
FIX_ALL = "source.fixAll.pallas-lsp"


def quickfixes(actions):
    return [a for a in actions or [] if a.kind == types.CodeActionKind.QuickFix]


async def diag(s, uri, code):
    found = [d for d in await s.diagnostics(uri) if d.code == code]
    assert found, f"no {code} in {uri}"
    return found[0]


async def apply_and_check_gone(s, uri, action, code, where):
    s.apply_workspace_edit(action.edit)
    state = await s.server_text(uri)
    assert state["text"] == s.texts[uri]
    after = await s.diagnostics(uri)
    assert not [d for d in after if d.code == code and d.range.start.line == where.start.line], \
        f"{action.title!r} left {code} in place"
    return after


async def test_safe_fix_is_preferred_and_removes_the_diagnostic(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    d = await diag(session, URI, "PAL101")
    actions = await session.code_actions(URI, d.range, [d])
    fix = [a for a in quickfixes(actions) if a.title.startswith("Pass the Ref")]
    assert len(fix) == 1 and fix[0].is_preferred is True
    assert fix[0].diagnostics and fix[0].diagnostics[0].code == "PAL101"
    await apply_and_check_gone(session, URI, fix[0], "PAL101", d.range)
    assert "make_async_copy(scratch, o_hbm, sem)" in session.texts[URI]


async def test_unsafe_fix_is_offered_but_not_preferred(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    d = await diag(session, URI, "PAL103")
    actions = await session.code_actions(URI, d.range, [d])
    fix = [a for a in quickfixes(actions) if "sems.at[0]" in a.title]
    assert len(fix) == 1 and not fix[0].is_preferred
    await apply_and_check_gone(session, URI, fix[0], "PAL103", d.range)


async def test_disable_for_this_line_adds_noqa(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    d = await diag(session, URI, "PAL103")
    actions = await session.code_actions(URI, d.range, [d])
    (disable,) = [a for a in quickfixes(actions) if a.title == "Disable PAL103 for this line"]
    assert not disable.is_preferred
    await apply_and_check_gone(session, URI, disable, "PAL103", d.range)
    line = session.texts[URI].splitlines()[d.range.start.line]
    assert line.endswith("sems)  # noqa: PAL103")


async def test_disable_extends_an_existing_noqa():
    async with start_session("neovim") as s:
        text = kernel_text("dma_bugs.py").replace("buf, sems)\n", "buf, sems)  # noqa: E501\n")
        s.open(URI, text)
        d = await diag(s, URI, "PAL103")
        actions = await s.code_actions(URI, d.range, [d])
        (disable,) = [a for a in quickfixes(actions) if a.title == "Disable PAL103 for this line"]
        await apply_and_check_gone(s, URI, disable, "PAL103", d.range)
        assert "sems)  # noqa: E501, PAL103\n" in s.texts[URI]


async def test_fix_all_applies_safe_fixes_only(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    await session.diagnostics(URI)
    whole = types.Range(types.Position(0, 0), types.Position(len(session.texts[URI].splitlines()), 0))
    actions = await session.code_actions(URI, whole, only=["source.fixAll"])
    assert [a.kind for a in actions] == [FIX_ALL]
    session.apply_workspace_edit(actions[0].edit)
    codes = {d.code for d in await session.diagnostics(URI)}
    assert "PAL101" not in codes  # safe: fixed
    assert "PAL103" in codes  # unsafe: left for the user


async def test_only_quickfix_excludes_fix_all(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    d = await diag(session, URI, "PAL101")
    actions = await session.code_actions(URI, d.range, [d], only=[types.CodeActionKind.QuickFix])
    assert actions and all(a.kind == types.CodeActionKind.QuickFix for a in actions)


async def test_no_actions_away_from_findings(session):
    session.open(URI, kernel_text("dma_bugs.py"))
    await session.diagnostics(URI)
    line, _ = find(session.texts[URI], "import jax.numpy")
    rng = types.Range(types.Position(line, 0), types.Position(line, 3))
    assert not quickfixes(await session.code_actions(URI, rng))


async def actions_for(s, uri, d):
    """The quick fixes attached to diagnostic `d` (same code and range)."""
    actions = quickfixes(await s.code_actions(uri, d.range, [d]))
    return [a for a in actions if a.diagnostics and a.diagnostics[0].code == d.code
            and a.diagnostics[0].range == d.range]


def corpus() -> list[Path]:
    """Real kernel files: ours, plus the engine's oracle fixtures when present."""
    files = sorted(KERNELS.glob("*.py"))
    files += sorted((REPO / "tests" / "oracle" / "fixtures").glob("*.py"))
    return [f for f in files if not f.stem.endswith("_fixed")]


async def test_every_quick_fix_removes_its_diagnostic():
    """For every finding in every corpus file: each engine fix, and the noqa
    action, applied through the server, removes that diagnostic."""
    failures: list[str] = []
    checked = 0
    async with start_session("visual-studio-code", init_options={"diagnostics": {"debounceMs": 0}}) as s:
        for path in corpus():
            uri = path.as_uri()
            original = path.read_text(encoding="utf-8")
            s.open(uri, original)
            for d in list(await s.diagnostics(uri)):
                titles = [a.title for a in await actions_for(s, uri, d)]
                if not any(t.startswith("Disable ") for t in titles):
                    failures.append(f"{path.name}: no noqa action for {d.code}")
                for title in titles:
                    s.replace_all(uri, original)
                    await s.diagnostics(uri)
                    (action,) = [a for a in await actions_for(s, uri, d) if a.title == title]
                    try:
                        await apply_and_check_gone(s, uri, action, d.code, d.range)
                        checked += 1
                    except AssertionError as exc:
                        failures.append(f"{path.name}: {exc}")
                s.replace_all(uri, original)
                await s.diagnostics(uri)
            s.close(uri)
    assert not failures, "\n".join(failures)
    assert checked >= 4
