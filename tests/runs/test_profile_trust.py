"""A repository's pyproject.toml does not decide what a run executes
(issue 13, item 8): built-in profiles cannot be redefined, its own profiles
need --allow-project-profiles, and host-key / proxy options come only from the
user. The programs a hostile profile names write a marker file: the marker
must not appear. The real CLI in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_lsp.runs import ProfileError, resolve_profile
from pallas_lsp.runs.profiles import ProjectProfileNotAllowed, fingerprint

SERVER = str(Path(__file__).resolve().parents[2] / "server")


def repo(tmp_path: Path, profiles: str) -> tuple[Path, Path]:
    """A repository whose profiles name `evil.sh`, which leaves `marker`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "marker"
    evil = ws / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    evil.chmod(0o755)
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n"
                                       + profiles.replace("EVIL", str(evil))
                                       .replace("MARKER", str(marker)))
    (ws / "test_ok.py").write_text("def test_ok():\n    pass\n")
    return ws, marker


def cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SERVER)
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "run", *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_repository_cannot_redefine_the_local_profile(tmp_path):
    ws, marker = repo(tmp_path, '[tool.pallas-lsp.profiles.local]\npython = "EVIL"\n')
    assert resolve_profile("local", ws).python is None
    assert resolve_profile(None, ws).python is None
    p = cli(ws, "test_ok.py", "--timeout", "120")
    assert p.returncode == 0, p.stderr[-2000:]
    assert not marker.exists()
    assert "cannot redefine the built-in profile 'local'" in p.stderr


@pytest.mark.parametrize("profile", [
    '[tool.pallas-lsp.profiles.fast]\nkind = "local"\npython = "EVIL"\n',
    '[tool.pallas-lsp.profiles.fast]\nkind = "tpu"\ncommand = ["sh", "-c", "touch MARKER", "{command}"]\n',
], ids=["local-python", "tpu-command"])
def test_repository_profiles_need_consent(tmp_path, profile):
    ws, marker = repo(tmp_path, profile)
    p = cli(ws, "--profile", "fast", "test_ok.py")
    assert p.returncode == 2 and "--allow-project-profiles" in p.stderr, p.stderr
    assert "comes from" in p.stderr and str(ws / "pyproject.toml") in p.stderr
    assert not marker.exists()
    listed = cli(ws, "--list-profiles")
    assert listed.returncode == 0
    assert "fast" in listed.stdout and "needs --allow-project-profiles" in listed.stdout
    assert not marker.exists()
    cli(ws, "--profile", "fast", "--allow-project-profiles", "--timeout", "60", "test_ok.py")
    assert marker.exists()  # allowed: it is what the user asked for


@pytest.mark.parametrize("keys, words", [
    ('ssh_options = ["ProxyCommand=sh -c \'touch MARKER\'"]', "ProxyCommand"),
    ('ssh_options = ["-oProxyCommand=x"]', "-oProxyCommand"),
    ('ssh_options = ["LocalCommand=touch MARKER", "PermitLocalCommand=yes"]', "LocalCommand"),
    ('ssh_options = ["Include /tmp/x"]', "Include"),
    ('strict_host_key_checking = false', "strict_host_key_checking"),
    ('strict_host_key_checking = "accept-new"', "strict_host_key_checking"),
    ('known_hosts = "./keys"', "known_hosts"),
], ids=["proxy", "dash-o", "local-command", "include", "no-check", "accept-new", "known-hosts"])
def test_host_key_and_proxy_options_only_from_the_user(tmp_path, keys, words):
    ws, marker = repo(tmp_path, '[tool.pallas-lsp.profiles.box]\nkind = "ssh"\n'
                                'host = "127.0.0.1"\nport = 1\n' + keys + "\n")
    with pytest.raises(ProfileError, match=words) as info:
        resolve_profile("box", ws, allow_project=True)
    assert not isinstance(info.value, ProjectProfileNotAllowed)
    p = cli(ws, "--profile", "box", "--allow-project-profiles", "test_ok.py")
    assert p.returncode == 2 and "never from a repository" in p.stderr, p.stderr
    assert not marker.exists()
    # the same table in the user's own settings is theirs to decide
    import tomllib
    table = tomllib.loads((ws / "pyproject.toml").read_text())["tool"]["pallas-lsp"]["profiles"]
    assert resolve_profile("box", ws, {"box": table["box"]}).host == "127.0.0.1"


def test_harmless_ssh_options_and_consent_by_fingerprint(tmp_path):
    ws, _ = repo(tmp_path, '[tool.pallas-lsp.profiles.box]\nkind = "ssh"\nhost = "h"\n'
                           'ssh_options = ["ServerAliveInterval=30", "Compression yes"]\n')
    with pytest.raises(ProjectProfileNotAllowed) as info:
        resolve_profile("box", ws)
    found = info.value.project
    assert "ssh" in found.summary and "h" in found.summary
    assert resolve_profile("box", ws, allow_project={found.fingerprint}).host == "h"
    # a changed profile is a new question
    text = (ws / "pyproject.toml").read_text().replace('host = "h"', 'host = "other"')
    (ws / "pyproject.toml").write_text(text)
    with pytest.raises(ProjectProfileNotAllowed):
        resolve_profile("box", ws, allow_project={found.fingerprint})
    assert fingerprint("a", "b", {"x": 1}) != fingerprint("a", "b", {"x": 2})
