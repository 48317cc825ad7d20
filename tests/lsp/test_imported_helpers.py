"""Helpers in other files: the server reads them in the background (never on
the edit path) and reports the bad argument in the helper (when open) and at
the call site; editing one file re-checks the open files that use it."""
import asyncio
import textwrap

import pytest
from lsprotocol import types

from lsp_harness import start_session, wait_for


HELPER = '''
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()
'''

MAIN = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from helpers import copy_in


def kernel(x_hbm, o_hbm, sems):
    copy_in(x_hbm, o_hbm, sems)


pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''


async def test_imported_helper_is_checked_at_the_call_site(tmp_path):
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPER), encoding="utf-8")
    main = tmp_path / "main.py"
    main.write_text(MAIN, encoding="utf-8")
    uri = main.as_uri()
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(uri, MAIN)

        def reported():
            for p in s.client.published[uri]:
                hits = [d for d in p.diagnostics if d.code == "PAL103"]
                if hits:
                    return hits
            return None

        (d,) = await wait_for(reported, timeout=30)
        line = MAIN.split("\n").index("    copy_in(x_hbm, o_hbm, sems)")
        assert d.range.start.line == line
        rel = d.related_information[0]  # the argument in the helper (then its .start())
        assert rel.location.uri == (tmp_path / "helpers.py").as_uri()
        assert rel.location.range.start.line == 5  # the make_async_copy line in helpers.py


async def _until(s, uri, code, lines, timeout=30.0):
    """Wait until the current diagnostics of `uri` (pulled or published)
    have `code` exactly on `lines`; returns those diagnostics."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if s.pull:
            diags = await s.diagnostics(uri)
        else:
            published = s.client.published.get(uri, [])
            diags = list(published[-1].diagnostics) if published else []
        hits = [d for d in diags if d.code == code]
        if sorted(d.range.start.line for d in hits) == lines:
            return hits
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{code} on {[d.range.start.line for d in hits]}, not {lines}")
        await asyncio.sleep(0.05)


async def test_open_helper_gets_the_finding_from_an_open_caller(tmp_path):
    helper = tmp_path / "helpers.py"
    helper.write_text(textwrap.dedent(HELPER), encoding="utf-8")
    main = tmp_path / "main.py"
    main.write_text(MAIN, encoding="utf-8")
    async with start_session("neovim", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(helper.as_uri(), textwrap.dedent(HELPER))
        s.open(main.as_uri(), MAIN)
        await _until(s, helper.as_uri(), "PAL103", [5])
        # Fixing the call in the caller clears the helper's diagnostic too.
        s.replace_all(main.as_uri(), MAIN.replace("copy_in(x_hbm, o_hbm, sems)",
                                                  "copy_in(x_hbm, o_hbm, sems.at[0])"))
        await _until(s, helper.as_uri(), "PAL103", [])


async def test_open_helper_gets_findings_from_closed_callers(tmp_path):
    helper = tmp_path / "helpers.py"
    helper.write_text(textwrap.dedent(HELPER), encoding="utf-8")
    (tmp_path / "main.py").write_text(MAIN, encoding="utf-8")
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(helper.as_uri(), textwrap.dedent(HELPER))
        (d,) = await _until(s, helper.as_uri(), "PAL103", [5])
        assert any(r.location.uri == (tmp_path / "main.py").as_uri()
                   for r in d.related_information)


@pytest.mark.parametrize("notify", [True, False])
async def test_a_closed_callers_finding_goes_when_the_caller_is_deleted_or_fixed(tmp_path, notify):
    """The caller is deleted (then, recreated fixed) on disk, outside the
    editor: with workspace/didChangeWatchedFiles the helper's PAL103 goes at
    once; without it (a client that does not watch files), at the helper's
    next analysis."""
    helper = tmp_path / "helpers.py"
    helper.write_text(textwrap.dedent(HELPER), encoding="utf-8")
    main = tmp_path / "main.py"
    main.write_text(MAIN, encoding="utf-8")
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(helper.as_uri(), textwrap.dedent(HELPER))
        await _until(s, helper.as_uri(), "PAL103", [5])

        def changed(kind):
            if notify:
                s.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
                    changes=[types.FileEvent(uri=main.as_uri(), type=kind)]))
            else:  # nothing tells the server: the helper's next analysis notices
                s.replace_all(helper.as_uri(), textwrap.dedent(HELPER) + "\n# edited\n")

        main.unlink()
        changed(types.FileChangeType.Deleted)
        await _until(s, helper.as_uri(), "PAL103", [])
        if notify:  # the caller comes back, buggy, then fixed: followed each time
            main.write_text(MAIN, encoding="utf-8")
            changed(types.FileChangeType.Created)
            await _until(s, helper.as_uri(), "PAL103", [5])
            main.write_text(MAIN.replace("copy_in(x_hbm, o_hbm, sems)",
                                         "copy_in(x_hbm, o_hbm, sems.at[0])"), encoding="utf-8")
            changed(types.FileChangeType.Changed)
            await _until(s, helper.as_uri(), "PAL103", [])


def _helper_and_correct_caller(tmp_path):
    """helpers.py (correct) and main.py calling it correctly, on disk."""
    helper = tmp_path / "helpers.py"
    fixed = textwrap.dedent(HELPER)
    helper.write_text(fixed, encoding="utf-8")
    ok_main = MAIN.replace("copy_in(x_hbm, o_hbm, sems)", "copy_in(x_hbm, o_hbm, sems.at[0])")
    main = tmp_path / "main.py"
    main.write_text(ok_main, encoding="utf-8")
    return helper, fixed, main, ok_main


async def test_editing_a_helper_rechecks_its_open_dependents(tmp_path):
    helper, fixed, main, ok_main = _helper_and_correct_caller(tmp_path)
    async with start_session("emacs", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(helper.as_uri(), fixed)
        s.open(main.as_uri(), ok_main)
        await asyncio.sleep(1.0)  # the helper is parsed in the background
        await _until(s, main.as_uri(), "PAL101", [])
        # The helper now reads the destination Ref: the caller's call is wrong.
        s.replace_all(helper.as_uri(), fixed.replace("make_async_copy(src, dst, sem)",
                                                     "make_async_copy(src, dst[...], sem)"))
        line = ok_main.split("\n").index("    copy_in(x_hbm, o_hbm, sems.at[0])")
        await _until(s, main.as_uri(), "PAL101", [line])


async def test_a_dependent_is_rechecked_against_the_helpers_new_text_at_once(tmp_path):
    # The edit path reads only files already parsed. The first re-check of
    # the kernel file after a helper edit must already see the edited
    # helper (the buffer, not the disk), not wait for the background index
    # to parse it and re-check a second time.
    helper, fixed, main, ok_main = _helper_and_correct_caller(tmp_path)
    line = ok_main.split("\n").index("    copy_in(x_hbm, o_hbm, sems.at[0])")
    async with start_session("emacs", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(helper.as_uri(), fixed)
        s.open(main.as_uri(), ok_main)
        await asyncio.sleep(1.0)
        await _until(s, main.as_uri(), "PAL101", [])
        await asyncio.sleep(0.5)  # nothing else pending for the kernel file
        before = len(s.client.published[main.as_uri()])
        s.replace_all(helper.as_uri(), fixed.replace("make_async_copy(src, dst, sem)",
                                                     "make_async_copy(src, dst[...], sem)"))
        await wait_for(lambda: len(s.client.published[main.as_uri()]) > before, timeout=30)
        first = s.client.published[main.as_uri()][before]
        assert [d.range.start.line for d in first.diagnostics if d.code == "PAL101"] == [line]
