""""Compile for TPU" from the editor: the lens, the `pallas-lsp.run` command
with `"compile": true` (generations from `runs.compileGenerations`), the
compile error published next to the engine's PAL402, and the VMEM hover."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from lsprotocol import types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lsp"))
from lsp_harness import find, start_session, wait_for  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                reason="libtpu is not installed (pip install 'jax[tpu]')")

TEST = '''import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu  # a TPU kernel: the compile rules judge it


def sort_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...], axis=-1)


def test_sort():
    x = jnp.ones((8, 128), jnp.float32)
    out = pl.pallas_call(sort_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(out, x)
'''
RUN = "pallas-lsp.run"


async def test_compile_for_tpu_from_the_editor(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    (ws / "test_sort.py").write_text(TEST)
    uri = (ws / "test_sort.py").as_uri()
    opts = {"diagnostics": {"debounceMs": 0}, "runs": {"compileGenerations": ["v5e"]}}
    async with start_session("visual-studio-code", init_options=opts, root=ws) as s:
        s.open(uri, TEST)
        assert [d.code for d in await s.diagnostics(uri)] == ["PAL402"]  # the static rule
        lenses = await s.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        (lens,) = [x for x in lenses if x.command.title == "▶ Compile for TPU"]
        assert lens.command.command == RUN and lens.command.arguments[0]["compile"] is True

        result = await s.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=RUN, arguments=lens.command.arguments))
        result = result._asdict() if hasattr(result, "_asdict") else dict(result)
        assert result["status"] == "failed", result
        assert "compile v5e" in result["summary"] and result["tests"] == {"passed": 1}

        line, _ = find(TEST, "jnp.sort(")

        def merged():
            last = s.client.published[uri][-1].diagnostics if s.client.published[uri] else []
            got = {(d.code, d.source, d.range.start.line) for d in last}
            return got if ("PAL402", "pallas-lsp run", line) in got else None

        got = await wait_for(merged, timeout=30)
        assert ("PAL402", "pallas-lsp", line) in got  # the engine's, in the same publish

        # invalid generations are refused before anything runs
        with pytest.raises(Exception, match="unknown TPU generation"):
            await s.client.workspace_execute_command_async(types.ExecuteCommandParams(
                command=RUN, arguments=[{"uri": uri, "compile": ["v9z"]}]))

        # the hover on pallas_call shows the scoped VMEM estimate
        call_line, call_col = find(TEST, "pallas_call(")
        hover = await s.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(call_line, call_col + 3)))
        assert hover is not None and "Scoped VMEM estimate" in hover.contents.value
        assert "16.0 MiB" in hover.contents.value  # v5e's default limit
