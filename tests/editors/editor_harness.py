"""Shared pieces of the editor tests: the buggy kernel, the server's
environment, and running an editor headless with its own HOME."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURE = HERE / "fixtures" / "buggy_kernel.py"

# What every editor must see on the fixture.
CODE = "PAL101"
FLAGGED = "scratch[...]"
HOVER = "DMA semaphore · shape ()"
FIX_TITLE = "Pass the Ref `scratch` instead of reading it"
FIXED_LINE = "copy = pltpu.make_async_copy(scratch, o_hbm, sem)"

# The outer limit on one editor run; each script has its own watchdog below it.
EDITOR_TIMEOUT_S = 120


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """The buggy kernel, copied into its own project directory."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "kernels"\n')
    dest = project / "buggy_kernel.py"
    shutil.copy(FIXTURE, dest)
    return dest


def editor_env(tmp_path: Path, kernel: Path, **extra: str) -> dict[str, str]:
    """The editor's environment: a private HOME and XDG dirs (editors write
    logs and state there), and how to start the server from this checkout."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # `pallas-lsp` on PATH, as the documented configurations expect: this
    # checkout's server in the test's Python
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "pallas-lsp"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pallas_lsp "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        PALLAS_PYTHON=sys.executable,
        PALLAS_PYTHONPATH=os.pathsep.join(
            [str(REPO / "server")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
        PALLAS_FILE=str(kernel),
        PALLAS_LSP_LOG_LEVEL="WARNING",
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", os.defpath)]),
    )
    env["PYTHONPATH"] = env["PALLAS_PYTHONPATH"]
    env.update(extra)
    return env


def run_editor(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[dict, subprocess.CompletedProcess]:
    """Run a headless editor script that prints one `PALLAS_RESULT <json>` line."""
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=EDITOR_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{argv[0]} did not finish in {EDITOR_TIMEOUT_S}s\n"
                    f"stdout: {exc.stdout}\nstderr: {exc.stderr}")
    lines = [l for l in proc.stdout.splitlines() if l.startswith("PALLAS_RESULT ")]
    if not lines:
        pytest.fail(f"{argv[0]} printed no result (exit {proc.returncode})\n"
                    f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len("PALLAS_RESULT "):])
    return result, proc


def check_result(result: dict, proc: subprocess.CompletedProcess) -> None:
    """The assertions shared by every editor."""
    context = f"\nresult: {json.dumps(result, indent=1)}\nstderr: {proc.stderr[-3000:]}"
    assert result.get("ok") is True and proc.returncode == 0, "the editor script failed" + context
    diag = result["diagnostic"]
    assert diag["code"] == CODE, context
    assert diag["text"] == FLAGGED, context
    assert HOVER in result["hover"], context
    assert FIX_TITLE in result["actions"], context
    assert result["applied"] == FIX_TITLE, context
    assert FIXED_LINE in result["fixed_line"], context
    assert "cleared" in result["steps"], context
    # the settings the editor sent were all valid (the server warns otherwise)
    assert not [m for m in result.get("messages", []) if "setting" in m], context
