"""The editor's run command on a notebook (LSP notebook sync), asked from one
of its cells: the saved notebook runs in a real Jupyter kernel, and the run's
diagnostic arrives on the kernel's cell, at the line JAX raised on, next to
the engine's."""
from __future__ import annotations

import json

from lsprotocol import types

from lsp_harness import find, wait_for
from test_notebooks import IMPORTS, Notebook, notebook_session

KERNEL = ("def kernel(x_hbm, o_hbm, buf, sem):\n"
          "    pltpu.sync_copy(x_hbm, buf)\n"
          "    copy = pltpu.make_async_copy(buf[...], o_hbm, sem)\n"
          "    copy.start()\n"
          "    copy.wait()")
LAUNCH = ("out = pl.pallas_call(\n"
          "    kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),\n"
          "    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
          "    out_specs=pl.BlockSpec(memory_space=pl.ANY),\n"
          "    scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],\n"
          ")(jnp.ones((8, 128), jnp.float32))")
CELLS = [("markdown", "markdown", "# Launched two cells later"), ("code", "python", IMPORTS),
         ("code", "python", KERNEL), ("code", "python", "n = 2"), ("code", "python", LAUNCH)]
K = 2


async def test_a_notebook_run_lands_on_the_kernels_cell(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'nb'\nversion = '0'\n")
    nb_file = tmp_path / "seeded.ipynb"
    nb_file.write_text(json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(True),
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                  for kind, _, text in CELLS],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 4}), encoding="utf-8")
    async with notebook_session("visual-studio-code", root=tmp_path) as s:
        nb = Notebook(s, "seeded.ipynb", cells=CELLS, root=tmp_path)
        nb.open()
        assert "PAL101" in [d.code for d in await nb.diagnostics(K)]
        result = await s.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="pallas-lsp.run", arguments=[{"uri": nb.uri_of(K), "compile": False}]))
        result = result._asdict() if hasattr(result, "_asdict") else dict(result)
        assert result["status"] == "failed", result
        line, col = find(KERNEL, "copy.start()")

        def run_diagnostic():
            got = nb.published(K)
            return [d for d in got[-1].diagnostics if d.source == "pallas-lsp run"] \
                if got else None

        (d,) = await wait_for(run_diagnostic, 10)
        assert d.code == "PAL101" and d.range.start == types.Position(line, col)
        assert "[cell 5]" in d.message  # the cell that was running
        assert not any(p.diagnostics and any(x.source == "pallas-lsp run" for x in p.diagnostics)
                       for p in nb.published(4))
        # an edit of a cell clears the run's diagnostics; the engine's stay
        nb.edit(3, [types.TextEdit(types.Range(types.Position(0, 0), types.Position(0, 0)),
                                   "# edited\n")])
        after = len(nb.published(K))
        diags = await wait_for(lambda: nb.published(K)[after:] and
                               nb.published(K)[-1].diagnostics, 10)
        assert [x.source for x in diags if x.code == "PAL101"] == ["pallas-lsp"]
