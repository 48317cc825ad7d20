"""Runs from the editor: code lenses, `pallas-lsp.run` / `pallas-lsp.cancelRun`,
streamed output, run diagnostics merged with the engine's, cancel without
orphans. A real server process and real JAX runs in TPU interpret mode."""
from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, client_capabilities

from lsp_harness import SERVER_COMMAND, Session, find, make_client, server_env, start_session, wait_for

ZERO = {"diagnostics": {"debounceMs": 0}}
RUN = "pallas-lsp.run"
CANCEL = "pallas-lsp.cancelRun"

HEADER = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SHAPE = (8, 128)
'''

# A kernel that passes an Array to a DMA: JAX raises at `copy.start()`. The
# test calls pallas_call without interpret=: the runner's plugin forces it.
BUGGY = HEADER + '''

def copy_kernel(x_ref, o_hbm, scratch, sem):
    scratch[...] = x_ref[...] + 1.0
    copy = pltpu.make_async_copy(scratch[...], o_hbm, sem)
    copy.start()
    copy.wait()


def run_copy(x):
    return pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(SHAPE, jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)


def test_copy():
    run_copy(jnp.ones(SHAPE, jnp.float32))


def test_unrelated():
    assert sorted([2, 1]) == [1, 2]
'''

# A DMA wait whose DMA never started: the interpreter waits forever.
HANGS = HEADER + '''

def hang_kernel(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.wait()


def test_hang():
    pl.pallas_call(
        hang_kernel,
        out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
    )(jnp.ones(SHAPE, jnp.float32))


def test_quick():
    assert True
'''

SCRIPT = HEADER + '''

def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def main():
    x = jnp.ones(SHAPE, jnp.float32)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32))(x)


if __name__ == "__main__":
    print(main().sum())
'''


def workspace(tmp_path: Path, **files: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    for name, text in files.items():
        (ws / name).write_text(text, encoding="utf-8")
    return ws


async def execute(s, command: str, *arguments):
    return await s.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command, arguments=list(arguments)))


def as_dict(result) -> dict:
    return result._asdict() if hasattr(result, "_asdict") else dict(result)


@contextlib.asynccontextmanager
async def session_for(spec: str, root: Path, init_options=None):
    """start_session, plus "neovim+refresh": Neovim's capabilities with
    workspace/diagnostic/refresh support (pull, and told when to pull again)."""
    if spec != "neovim+refresh":
        async with start_session(spec, init_options=init_options, root=root) as s:
            yield s
        return
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(),
                                client_factory=make_client)
    client = await config.start()
    caps = client_capabilities("neovim")
    caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    result = await client.initialize_session(types.InitializeParams(
        capabilities=caps, root_uri=root.as_uri(), initialization_options=init_options,
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]))
    try:
        yield Session(client, "neovim", result)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        await client.stop()


def run_lines(s) -> list[str]:
    return [m.message for m in s.client.log_messages if m.message.startswith("[run] ")]


def live_in(folder: Path) -> list[int]:
    """Live processes whose working directory is in `folder` (the runs' children)."""
    real = os.path.realpath(folder)
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (cwd == real or cwd.startswith(real + "/")) and state != "Z":
            out.append(int(entry))
    return out


def groups_of(pids: list[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            out.add(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2]))
        except OSError:
            pass
    return out


def in_groups(pgids: set[int]) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            rest = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[2]) in pgids and rest[0] != "Z":
            out.append(int(entry))
    return out


# ---------------------------------------------------------------- code lenses


async def test_code_lenses_on_kernel_tests_and_script_calls(tmp_path):
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY, "tool.py": SCRIPT,
                                "test_broken.py": "def test_x(:\n    pl.pallas_call\n"})
    uri, script_uri = (ws / "test_copy.py").as_uri(), (ws / "tool.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=ws) as s:
        provider = s.result.capabilities.execute_command_provider
        assert provider is not None and {RUN, CANCEL} <= set(provider.commands)
        s.open(uri, BUGGY)
        lenses = await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        test_line, _ = find(BUGGY, "def test_copy")
        assert {lens.range.start.line for lens in lenses} == {test_line}  # not test_unrelated
        assert [lens.command.title for lens in lenses] == [
            "▶ Run in interpret mode", "▶ Run on TPU", "▶ Run with race detection",
            "▶ Compile for TPU"]
        args = [lens.command.arguments[0] for lens in lenses]
        assert all(lens.command.command == RUN for lens in lenses)
        assert [(a["mode"], a["races"], a.get("compile", False)) for a in args] == [
            ("interpret", False, False), ("tpu", False, False), ("interpret", True, False),
            ("interpret", False, True)]
        assert all(a["uri"] == uri and a["target"] == f"{ws / 'test_copy.py'}::test_copy"
                   for a in args)

        s.open(script_uri, SCRIPT)
        lenses = await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=script_uri)))
        call_line, _ = find(SCRIPT, "pl.pallas_call(kernel")
        assert {lens.range.start.line for lens in lenses} == {call_line} and len(lenses) == 4
        assert lenses[0].command.arguments[0]["target"] == str(ws / "tool.py")

        broken = (ws / "test_broken.py").as_uri()
        s.open(broken, (ws / "test_broken.py").read_text())
        assert await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=broken))) in ([], ())

    async with start_session("visual-studio-code", init_options={**ZERO, "runs": {"codeLens": False}},
                             root=ws) as s:
        s.open(uri, BUGGY)
        assert await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri))) in ([], ())


# ---------------------------------------------------------------- a failing run


@pytest.mark.parametrize("spec", ["visual-studio-code", "neovim", "neovim+refresh"])
async def test_run_failure_becomes_a_diagnostic_next_to_the_engines(tmp_path, spec):
    """Push (VS Code 1.65): the run's PAL101 and the engine's in one publish.
    Pull with refresh: both in the pulled report. Pull without refresh (the
    recorded Neovim 0.11): the run's diagnostics are pushed on their own."""
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    uri = (ws / "test_copy.py").as_uri()
    start_line, start_col = find(BUGGY, "copy.start()")
    async with session_for(spec, ws, init_options=ZERO) as s:
        s.open(uri, BUGGY)
        assert [d.code for d in await s.diagnostics(uri)] == ["PAL101"]

        # what the VS Code extension sends: no target (the whole file)
        result = as_dict(await execute(s, RUN, {"uri": uri, "mode": "interpret", "races": False}))
        assert result["status"] == "failed", result
        assert result["diagnostics"] == 1
        assert "failed" in result["summary"] and "1 passed" in result["summary"]

        def last_published():
            return s.client.published[uri][-1].diagnostics if s.client.published[uri] else []

        def both_pal101():
            last = last_published()
            got = {(d.code, d.source) for d in last}
            return last if {("PAL101", "pallas-lsp"), ("PAL101", "pallas-lsp run")} <= got else None

        if spec == "neovim+refresh":  # asked to pull again; the report has both
            await wait_for(lambda: s.client.diagnostic_refresh_count > 0)
            diags = await s.diagnostics(uri)
            assert not s.client.published[uri]
        elif spec == "neovim":  # pulled: the engine's; pushed: the run's
            pushed = await wait_for(last_published, 10)
            assert [d.source for d in pushed] == ["pallas-lsp run"]
            pulled = await s.diagnostics(uri)
            assert [d.source for d in pulled] == ["pallas-lsp"]
            diags = [*pulled, *pushed]
        else:  # one publish with both: neither overwrites the other
            diags = await wait_for(both_pal101, 10)
        (run_diag,) = [d for d in diags if d.source == "pallas-lsp run"]
        assert run_diag.code == "PAL101"
        assert run_diag.range.start == types.Position(start_line, start_col)
        assert run_diag.severity == types.DiagnosticSeverity.Error
        assert run_diag.message.startswith("DMA source/destination/semaphore arguments must be Refs.")
        assert any(d.source == "pallas-lsp" and d.code == "PAL101" for d in diags)
        # the call chain (kernel <- run_copy <- test_copy) as related locations
        test_line, _ = find(BUGGY, "    run_copy(jnp.ones")
        if run_diag.related_information:
            assert any(r.location.uri == uri and r.location.range.start.line == test_line
                       for r in run_diag.related_information)
        else:
            assert f"test_copy.py:{test_line + 1}:" in run_diag.message

        # output was streamed to the log; the summary ends the run
        lines = run_lines(s)
        assert any("short test summary" in line for line in lines), lines[-20:]
        assert any(m.type == types.MessageType.Error and m.message == result["summary"]
                   for m in s.client.messages)
        (token, reports), = [(t, r) for t, r in s.client.progress_reports.items() if r]
        assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)
        assert reports[-1].message == result["summary"]
        assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
        assert len(reports) - 2 <= len(lines)

        # an edit of the file clears its run diagnostics (the engine's stay)
        s.replace_all(uri, BUGGY + "\n# edited\n")
        diags = await s.diagnostics(uri)
        assert [(d.code, d.source) for d in diags] == [("PAL101", "pallas-lsp")]
        if spec == "neovim":
            await wait_for(lambda: not last_published())


# ---------------------------------------------------------------- hangs, cancel


async def test_a_hang_times_out_with_a_diagnostic_in_a_file_not_open(tmp_path):
    ws = workspace(tmp_path, **{"test_hang.py": HANGS})
    uri = (ws / "test_hang.py").as_uri()
    wait_line, wait_col = find(HANGS, "copy.wait()")
    # The timeout must leave the child time to import jax and reach the wait even on a loaded
    # machine: timed out earlier, the run is (rightly) a PAL902 somewhere in the import.
    async with start_session("visual-studio-code", init_options={**ZERO, "runs": {"timeoutS": 15}},
                             root=ws) as s:
        result = as_dict(await execute(s, RUN, {"uri": uri, "target": "test_hang"}))
        assert result["status"] == "timeout", result
        published = await wait_for(lambda: s.client.published[uri], 10)
        (diag,) = published[-1].diagnostics
        assert published[-1].version is None  # not open: published on its own
        assert diag.source == "pallas-lsp run" and diag.code == "PAL303"
        assert diag.range.start == types.Position(wait_line, wait_col)
        assert "hung" in diag.message
        assert any(m.type == types.MessageType.Error and "timeout" in m.message
                   for m in s.client.messages)
        assert live_in(ws) == []


async def test_cancel_kills_the_process_group(tmp_path):
    ws = workspace(tmp_path, **{"test_hang.py": HANGS})
    uri = (ws / "test_hang.py").as_uri()
    async with start_session("visual-studio-code", init_options={**ZERO, "runs": {"timeoutS": 120}},
                             root=ws) as s:
        # 1. pallas-lsp.cancelRun {"uri"}: output arrives while the run goes on
        task = asyncio.ensure_future(execute(s, RUN, {"uri": uri, "target": "test_hang"}))
        await wait_for(lambda: any("collected 1 item" in line for line in run_lines(s)), 30)
        assert not task.done()
        pids = await wait_for(lambda: live_in(ws), 10)
        pgids = groups_of(pids)
        assert as_dict(await execute(s, CANCEL, {"uri": uri}))["cancelled"] == 1
        result = as_dict(await asyncio.wait_for(task, 15))
        assert result["status"] == "cancelled", result
        await wait_for(lambda: not in_groups(pgids) and not live_in(ws), 5)

        # 2. window/workDoneProgress/cancel (the progress is cancellable)
        before = set(s.client.progress_reports)
        task = asyncio.ensure_future(execute(s, RUN, {"uri": uri, "target": "::test_hang"}))
        token = await wait_for(lambda: next((t for t, r in s.client.progress_reports.items()
                                             if t not in before and r), None), 15)
        s.client.protocol.notify(types.WINDOW_WORK_DONE_PROGRESS_CANCEL,
                                 types.WorkDoneProgressCancelParams(token=token))
        assert as_dict(await asyncio.wait_for(task, 15))["status"] == "cancelled"

        # 2b. $/cancelRequest of the pallas-lsp.run request stops the run too
        fut = asyncio.wrap_future(s.client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command=RUN, arguments=[{"uri": uri, "target": "test_hang"}]),
            msg_id="run-to-cancel"))
        pgids = groups_of(await wait_for(lambda: live_in(ws), 10))
        s.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="run-to-cancel"))
        with pytest.raises(JsonRpcException):
            await asyncio.wait_for(fut, 15)
        await wait_for(lambda: not in_groups(pgids) and not live_in(ws), 5)

        # 3. a new run of the same file replaces the one going on
        first = asyncio.ensure_future(execute(s, RUN, {"uri": uri, "target": "test_hang"}))
        await wait_for(lambda: live_in(ws), 10)
        second = as_dict(await execute(s, RUN, {"uri": uri, "target": "test_quick"}))
        assert second["status"] == "passed", second
        assert as_dict(await asyncio.wait_for(first, 15))["status"] == "cancelled"
        await wait_for(lambda: not live_in(ws), 5)

        # 4. shutdown while a run goes on: nothing is left behind
        asyncio.ensure_future(execute(s, RUN, {"uri": uri, "target": "test_hang"}))
        pgids = groups_of(await wait_for(lambda: live_in(ws), 10))
    await wait_for(lambda: not in_groups(pgids) and not live_in(ws), 5)


# ---------------------------------------------------------------- errors


async def test_bad_requests_are_error_responses(tmp_path):
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    uri = (ws / "test_copy.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=ws) as s:
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": uri, "target": "no/such_file.py::test_x"})
        assert err.value.code == types.ErrorCodes.InvalidParams
        assert "no such file" in err.value.message
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": uri, "mode": "fast"})
        assert err.value.code == types.ErrorCodes.InvalidParams and "mode" in err.value.message
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": uri, "profile": "nowhere"})
        assert "unknown profile 'nowhere'" in err.value.message
        with pytest.raises(JsonRpcException):
            await execute(s, RUN)
        assert as_dict(await execute(s, CANCEL))["cancelled"] == 0
        assert not run_lines(s)

    async with start_session("visual-studio-code", init_options={**ZERO, "runs": {"enable": False}},
                             root=ws) as s:
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": uri})
        assert "disabled" in err.value.message
        s.open(uri, BUGGY)
        assert await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri))) in ([], ())


async def test_command_arguments_are_validated_without_echoing_them(tmp_path):
    """Hostile arguments are -32602 with a short message, never -32603 with a
    traceback, and a huge value is never sent back."""
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    uri = (ws / "test_copy.py").as_uri()
    huge = "file:///" + "a" * 100_000
    async with start_session("visual-studio-code", init_options=ZERO, root=ws) as s:
        cases = [(CANCEL, {"uri": 5}), (CANCEL, {"uri": uri + "\x00x"}), (CANCEL, {"uri": huge}),
                 (CANCEL, {"uri": uri, "other": 1}), (CANCEL, [uri]),
                 (RUN, {"uri": 5}), (RUN, {"uri": uri + "\x00x"}), (RUN, {"uri": huge}),
                 (RUN, {"uri": uri, "mode": "m" * 100_000}), (RUN, {"uri": uri, "mode": 5}), (RUN, {"uri": uri, "target": huge}),
                 (RUN, {"uri": uri, "k" * 100_000: 1})]
        for command, arg in cases:
            with pytest.raises(JsonRpcException) as err:
                await execute(s, command, arg)
            assert err.value.code == types.ErrorCodes.InvalidParams, (command, str(arg)[:80])
            assert len(err.value.message) < 400, (command, err.value.message[:200])
            assert "Traceback" not in err.value.message
        assert as_dict(await execute(s, CANCEL, {"uri": uri}))["cancelled"] == 0  # still serving


# ---------------------------------------------------------------- run on save


async def test_run_on_save_only_when_asked(tmp_path):
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    uri = (ws / "test_copy.py").as_uri()

    def save(s):
        s.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    async with start_session("visual-studio-code", init_options=ZERO, root=ws) as s:
        s.open(uri, BUGGY)
        await s.diagnostics(uri)
        save(s)  # the default: a save never runs anything
        await asyncio.sleep(1.0)
        assert not run_lines(s) and not s.client.progress_reports

    async with start_session("visual-studio-code", init_options={**ZERO, "runs": {"runOnSave": True}},
                             root=ws) as s:
        s.open(uri, BUGGY)
        await s.diagnostics(uri)
        save(s)
        await wait_for(lambda: any(d.source == "pallas-lsp run"
                                   for p in s.client.published[uri] for d in p.diagnostics), 60)
        assert run_lines(s)


# ---------------------------------------------------------------- where lenses go (no server)


def test_lens_sites_follow_helpers_classes_and_scripts():
    from pallas_lsp.lsp.code_lens import find_sites

    text = HEADER + '''
call = pl.pallas_call(lambda x_ref, o_ref: None, out_shape=None)


def helper(x):
    return call(x)


def outer(x):
    return helper(x) + 1


@pl.kernel(out_shape=None, mesh=None)
def decorated(x_ref, o_ref):
    pass


def test_through_two_helpers():
    outer(1)


async def test_async_decorated():
    decorated(1)


def test_nothing():
    helper_free = 1


class TestGroup:
    def test_method(self):
        helper(2)

    def test_plain(self):
        pass


class NotATestClass:
    def test_ignored(self):
        helper(3)
'''
    got = [(s.target, s.kind) for s in find_sites(text, "/w/t.py")]
    assert got == [("/w/t.py::test_through_two_helpers", "pytest"),
                   ("/w/t.py::test_async_decorated", "pytest"),
                   ("/w/t.py::TestGroup::test_method", "pytest")]
    assert find_sites("def test_x(:\n", "/w/t.py") == []
    main = HEADER + 'def k(x_ref, o_ref):\n    pass\n\nif "__main__" == __name__:\n' \
        '    pl.pallas_call(k, out_shape=None)(1)\n'
    (site,) = find_sites(main, "/w/s.py")
    assert (site.target, site.kind, site.col) == ("/w/s.py", "script", 4)


# ---------------------------------------------------------------- who decides what runs


async def test_targets_outside_the_workspace_are_refused(tmp_path):
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    marker = tmp_path / "marker"
    outside = tmp_path / "outside.py"
    outside.write_text(f"open({str(marker)!r}, 'w').close()\n")
    (ws / "link.py").symlink_to(outside)
    uri = (ws / "test_copy.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=ws) as s:
        for target in ["../outside.py", str(outside), "link.py", "../../../../etc/passwd"]:
            with pytest.raises(JsonRpcException) as err:
                await execute(s, RUN, {"uri": uri, "target": target, "kind": "script"})
            assert err.value.code == types.ErrorCodes.InvalidParams, target
            assert "outside the workspace" in err.value.message, err.value.message
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": outside.as_uri(), "kind": "script"})
        assert "not inside a workspace folder" in err.value.message
        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": (ws / "link.py").as_uri(), "kind": "script"})
        assert "not inside a workspace folder" in err.value.message
    assert not marker.exists()
    # the user's own settings may allow more
    async with start_session("visual-studio-code", root=ws, init_options={
            **ZERO, "runs": {"allowedRoots": [str(tmp_path)]}}) as s:
        result = as_dict(await execute(s, RUN, {"uri": uri, "target": "../outside.py",
                                                "kind": "script"}))
        assert result["status"] == "passed", result
    assert marker.exists()


EVIL_PROFILE = '''
[tool.pallas-lsp.profiles.fast]
kind = "local"
python = "{evil}"
'''


async def test_a_repository_profile_runs_only_after_the_user_allows_it(tmp_path):
    ws = workspace(tmp_path, **{"test_copy.py": BUGGY})
    marker = tmp_path / "marker"
    evil = ws / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    evil.chmod(0o755)
    with open(ws / "pyproject.toml", "a") as fh:
        fh.write(EVIL_PROFILE.format(evil=evil))
    uri = (ws / "test_copy.py").as_uri()
    config_home = str(tmp_path / "user-config")
    asked: list[str] = []
    answers = ["Cancel", "Always allow"]
    async with start_session("visual-studio-code", init_options=ZERO, root=ws,
                             XDG_CONFIG_HOME=config_home) as s:
        @s.client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def ask(params: types.ShowMessageRequestParams):
            asked.append(params.message)
            return types.MessageActionItem(title=answers.pop(0))

        with pytest.raises(JsonRpcException) as err:
            await execute(s, RUN, {"uri": uri, "profile": "fast"})
        assert err.value.code == -32803  # RequestFailed: the user said no
        assert not marker.exists()
        assert "'fast'" in asked[0] and str(evil) in asked[0] and "pyproject.toml" in asked[0]
        await execute(s, RUN, {"uri": uri, "profile": "fast"})
        assert marker.exists()
    # remembered in the user's config folder: a new session does not ask again
    marker.unlink()
    async with start_session("visual-studio-code", init_options=ZERO, root=ws,
                             XDG_CONFIG_HOME=config_home) as s:
        await execute(s, RUN, {"uri": uri, "profile": "fast"})
        assert marker.exists()
    assert len(asked) == 2
    # ... for that content only: a changed profile is a new question (no client answer: no run)
    marker.unlink()
    (ws / "pyproject.toml").write_text((ws / "pyproject.toml").read_text() + 'env = { X = "1" }\n')
    async with start_session("visual-studio-code", init_options=ZERO, root=ws,
                             XDG_CONFIG_HOME=config_home) as s:
        with pytest.raises(JsonRpcException):
            await execute(s, RUN, {"uri": uri, "profile": "fast"})
    assert not marker.exists()
