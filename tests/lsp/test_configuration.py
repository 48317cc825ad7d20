"""Configuration: initializationOptions, workspace/configuration,
workspace/didChangeConfiguration and [tool.pallas-lsp] in pyproject.toml.
Invalid settings give a showMessage warning and the default, never a crash."""
from __future__ import annotations

import shutil

from lsprotocol import types

from lsp_harness import kernel_text, kernel_uri, start_session, wait_for

URI = kernel_uri("dma_bugs.py")
ZERO = {"diagnostics": {"debounceMs": 0}}


async def codes(s, uri=URI):
    return sorted(d.code for d in await s.diagnostics(uri))


def warnings(s):
    return [m.message for m in s.client.messages if m.type == types.MessageType.Warning]


async def test_init_options_ignore_and_severity():
    opts = {**ZERO, "rules": {"ignore": ["PAL103"], "severity": {"PAL1": "warning"}}}
    async with start_session("visual-studio-code", init_options=opts) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        diags = await s.diagnostics(URI)
        assert [d.code for d in diags] == ["PAL101"]
        assert diags[0].severity == types.DiagnosticSeverity.Warning


async def test_select_prefix_and_hint_level_dotted_keys():
    opts = {"diagnostics.debounceMs": 0, "rules.select": ["PAL103"], "rules.severity": {"PAL103": "hint"}}
    async with start_session("emacs", init_options=opts) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        diags = await s.diagnostics(URI)
        assert [(d.code, d.severity) for d in diags] == [("PAL103", types.DiagnosticSeverity.Hint)]


async def test_wrapped_in_section_name():
    async with start_session("emacs", init_options={"pallas-lsp": {**ZERO, "rules": {"ignore": ["PAL1"]}}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await codes(s) == []


async def test_invalid_settings_warn_and_fall_back():
    opts = {"diagnostics": {"debounceMs": "fast", "enable": "yes"}, "rules": {"select": 3},
            "inlayHints": {"parameters": None}, "python": {"interpreter": "/no/such/python"},
            "bogus": 1}
    async with start_session("visual-studio-code", init_options=opts) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await codes(s) == ["PAL101", "PAL103"]  # defaults: every rule, enabled
        await wait_for(lambda: len(warnings(s)) >= 6)
        text = "\n".join(warnings(s))
        for key in ("diagnostics.debounceMs", "diagnostics.enable", "rules.select",
                    "inlayHints.parameters", "python.interpreter", "bogus"):
            assert key in text
        assert await s.inlay_hints(URI)  # parameters hints kept their default (on)


async def test_workspace_configuration_is_pulled():
    async with start_session("visual-studio-code", init_options=ZERO,
                             configuration={"pallas-lsp": {"rules": {"ignore": ["PAL101"]}}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        await wait_for(lambda: s.client.published[URI] and
                       [d.code for d in s.client.published[URI][-1].diagnostics] == ["PAL103"])
        # VS Code supports dynamic registration of didChangeConfiguration and file watchers
        methods = {r.method for r in s.client.registrations}
        assert {types.WORKSPACE_DID_CHANGE_CONFIGURATION, types.WORKSPACE_DID_CHANGE_WATCHED_FILES} <= methods


async def test_did_change_configuration_pull_model_republishes():
    async with start_session("visual-studio-code", init_options=ZERO, configuration={"pallas-lsp": {}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await codes(s) == ["PAL101", "PAL103"]
        s.client.set_configuration({"pallas-lsp": {"rules": {"ignore": ["PAL103"]}}})
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_for(lambda: [d.code for d in s.client.published[URI][-1].diagnostics] == ["PAL101"])


async def test_did_change_configuration_with_pull_diagnostics():
    """Neovim pulls: after a settings change the next pull reflects it (and a
    client with refreshSupport would be sent workspace/diagnostic/refresh)."""
    async with start_session("neovim", configuration={"pallas-lsp": {}}) as s:
        s.open(URI, kernel_text("dma_bugs.py"))
        assert await codes(s) == ["PAL101", "PAL103"]
        s.client.set_configuration({"pallas-lsp": {"rules": {"select": ["PAL103"]}}})
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        seen = []

        async def pulled():
            seen.append(await codes(s))
            return seen[-1] == ["PAL103"]

        for _ in range(200):
            if await pulled():
                break
        assert seen[-1] == ["PAL103"]


async def test_did_change_configuration_push_model():
    """A client without workspace/configuration sends the settings itself."""
    from lsp_harness import KERNELS, SERVER_COMMAND, ClientServerConfig, make_client, server_env

    caps = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities()))
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(),
                                client_factory=make_client)
    client = await config.start()
    try:
        await client.initialize_session(types.InitializeParams(
            capabilities=caps, root_uri=KERNELS.as_uri(), initialization_options=ZERO))
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=URI, language_id="python", version=1, text=kernel_text("dma_bugs.py"))))
        await wait_for(lambda: client.published[URI])
        assert len(client.published[URI][-1].diagnostics) == 2
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"pallas-lsp": {"rules": {"ignore": ["PAL101"]}}}))
        await wait_for(lambda: [d.code for d in client.published[URI][-1].diagnostics] == ["PAL103"])
        assert client.published[URI][-1].version == 1
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_pyproject_applies(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pallas-lsp]\nignore = ["PAL101"]\n[tool.pallas-lsp.severity]\nPAL103 = "hint"\n')
    shutil.copy(kernel_uri("dma_bugs.py")[len("file://"):], tmp_path / "k.py")
    uri = (tmp_path / "k.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=tmp_path) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        diags = await s.diagnostics(uri)
        assert [(d.code, d.severity) for d in diags] == [("PAL103", types.DiagnosticSeverity.Hint)]
        # editor settings win over the project's severity
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={**ZERO, "rules": {"severity": {"PAL103": "warning"}}}) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        diags = await s.diagnostics(uri)
        assert [(d.code, d.severity) for d in diags] == [("PAL103", types.DiagnosticSeverity.Warning)]
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={**ZERO, "rules": {"usePyproject": False}}) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        assert await codes(s, uri) == ["PAL101", "PAL103"]


async def test_invalid_pyproject_warns_and_reports_everything(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pallas-lsp]\nignore = "PAL101"\n')
    shutil.copy(kernel_uri("dma_bugs.py")[len("file://"):], tmp_path / "k.py")
    uri = (tmp_path / "k.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=tmp_path) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        assert await codes(s, uri) == ["PAL101", "PAL103"]
        await wait_for(lambda: any("tool.pallas-lsp" in w for w in warnings(s)))


async def test_pyproject_saved_is_reread(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.pallas-lsp]\n")
    shutil.copy(kernel_uri("dma_bugs.py")[len("file://"):], tmp_path / "k.py")
    uri = (tmp_path / "k.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=tmp_path) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        assert await codes(s, uri) == ["PAL101", "PAL103"]
        pyproject.write_text('[tool.pallas-lsp]\nselect = ["PAL101"]\n')
        s.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=pyproject.as_uri())))
        await wait_for(lambda: [d.code for d in s.client.published[uri][-1].diagnostics] == ["PAL101"])


async def test_watched_pyproject_change_is_reread(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.pallas-lsp]\n")
    shutil.copy(kernel_uri("dma_bugs.py")[len("file://"):], tmp_path / "k.py")
    uri = (tmp_path / "k.py").as_uri()
    async with start_session("visual-studio-code", init_options=ZERO, root=tmp_path) as s:
        s.open(uri, (tmp_path / "k.py").read_text())
        assert await codes(s, uri) == ["PAL101", "PAL103"]
        pyproject.write_text('[tool.pallas-lsp]\nignore = ["PAL101"]\n')
        s.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]))
        await wait_for(lambda: [d.code for d in s.client.published[uri][-1].diagnostics] == ["PAL103"])
