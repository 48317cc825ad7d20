"""The VS Code extension: its manifest mirrors the server's settings, and it
type-checks and builds with npm (`npm ci && npm run check && npm run build`).

The end-to-end test in a real VS Code (code-server + Chromium) is
vscode-extension/e2e/run.sh, run by hand: see vscode-extension/README.md.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXT = REPO / "vscode-extension"

sys.path.insert(0, str(REPO / "server"))
from pallas_lsp.lsp import settings as server_settings  # noqa: E402

CLIENT_ONLY = {"pallas-lsp.interpreter", "pallas-lsp.trace.server"}
RUN_COMMANDS = {"pallas-lsp.runInterpret", "pallas-lsp.runTpu", "pallas-lsp.runRaces",
                "pallas-lsp.compileForTpu"}


def manifest() -> dict:
    return json.loads((EXT / "package.json").read_text(encoding="utf-8"))


def _json_default(value):
    if value == () and not isinstance(value, str):
        return []
    if isinstance(value, tuple):
        return list(value)
    return value


def test_every_server_option_is_a_setting_with_the_same_default():
    props = manifest()["contributes"]["configuration"]["properties"]
    expected = {f"{server_settings.SECTION}.{key}" for key in server_settings.OPTIONS}
    assert set(props) - CLIENT_ONLY == expected
    defaults = {f.name: f.default for f in dataclasses.fields(server_settings.Settings)}
    for key, (attr, check) in server_settings.OPTIONS.items():
        prop = props[f"pallas-lsp.{key}"]
        default = prop["default"]
        want = _json_default(defaults[attr])
        if key == "rules.severity":
            want = dict(defaults[attr])
        assert default == want, key
        # the server accepts the manifest's default as it is
        parsed, warnings = server_settings.parse({key: default})
        assert not warnings, (key, warnings)
        assert getattr(parsed, attr) == defaults[attr], key


def test_the_whole_default_section_is_accepted_by_the_server():
    """What VS Code sends for section "pallas-lsp" (nested, client-only keys
    removed by the extension) parses without a warning."""
    props = manifest()["contributes"]["configuration"]["properties"]
    section: dict = {}
    for name, prop in props.items():
        if name in CLIENT_ONLY:
            continue
        node = section
        parts = name.split(".")[1:]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = prop["default"]
    parsed, warnings = server_settings.parse(section)
    assert warnings == []
    assert parsed == server_settings.DEFAULT


def test_manifest_declares_trust_activation_and_commands():
    m = manifest()
    assert m["activationEvents"] == ["onLanguage:python"]
    trust = m["capabilities"]["untrustedWorkspaces"]
    assert trust["supported"] == "limited" and trust["description"]
    # Settings that choose what runs (interpreters, run profiles with SSH/TPU
    # commands) are ignored when they come from an untrusted workspace.
    assert set(trust["restrictedConfigurations"]) == {
        "pallas-lsp.interpreter", "pallas-lsp.python.interpreter", "pallas-lsp.runs.profiles",
        "pallas-lsp.runs.runOnSave", "pallas-lsp.runs.enable"}
    commands = {c["command"]: c for c in m["contributes"]["commands"]}
    assert set(commands) == RUN_COMMANDS | {"pallas-lsp.restartServer", "pallas-lsp.showOutput"}
    for name in RUN_COMMANDS:
        assert commands[name]["enablement"] == "isWorkspaceTrusted"
    # the languageclient registers a VS Code command for each command the server
    # offers; the client's own commands must not collide with the server's
    assert "pallas-lsp.run" not in commands
    assert m["dependencies"]["vscode-languageclient"].split(".")[0] == "11"
    assert (EXT / "package-lock.json").is_file()


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_ci_check_build():
    env = dict(os.environ, npm_config_fund="false", npm_config_audit="false",
               npm_config_update_notifier="false")
    for argv in (["npm", "ci"], ["npm", "run", "check"], ["npm", "run", "build"]):
        proc = subprocess.run(argv, cwd=EXT, env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    bundle = EXT / "dist" / "extension.js"
    assert bundle.is_file() and bundle.stat().st_size > 10_000
    text = bundle.read_text(encoding="utf-8")
    assert "pallas_lsp" in text and "serve" in text
