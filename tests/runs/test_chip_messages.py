"""The TPU compiler's own words for three mistakes the engine reports
statically (real deviceless compile with libtpu, as on a chip): the Mosaic
verifier's DMA shape mismatch (PAL305), a vector load from an ANY Ref
(PAL204) and an accumulating DMA (PAL111) each get their code on the
statement's line, and the message keeps the compiler's facts. The kernels
are benchmarks/tpu_chip/test_issue33.py, which run_issue33.sh runs on a chip."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from runs_helpers import PYTHON

from pallas_lsp.runs import RunSpec, Status, run
from pallas_lsp.runs.mapping import PathMap, failure_diagnostic

CHIP = Path(__file__).resolve().parents[2] / "benchmarks" / "tpu_chip"


def chip_lines(path: Path) -> dict[int, str]:
    """1-based line -> the code a chip run must report there (`# chip: PALnnn`)."""
    return {i: ln.split("# chip: ")[1].split()[0]
            for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if "# chip: " in ln}


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="compiling for a TPU needs libtpu: pip install 'jax[tpu]'")
def test_the_compilers_words_get_the_static_rules_codes_on_their_lines(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    test = ws / "test_issue33.py"
    shutil.copy(CHIP / "test_issue33.py", test)
    res = run(RunSpec(target=str(test), python=PYTHON, timeout=240, compile_for=("v5e",),
                      args=["-k", "shape_mismatch or direct_hbm_load or dma_add"]))
    assert res.status is Status.FAILED, res.summary
    compiled = {(d.span.line + 1): d for d in res.diagnostics
                if "(compiling for TPU v5e)" in d.message}
    expected = {line: code for line, code in chip_lines(test).items()
                if code in ("PAL305", "PAL204", "PAL111")}
    assert {line: d.code for line, d in compiled.items()} == expected, res.diagnostics
    by_code = {d.code: d for d in compiled.values()}
    mismatch = by_code["PAL305"].message
    assert mismatch.startswith("'tpu.enqueue_dma' op DMA source and target shape mismatch")
    assert "memref<8x128xf32" in mismatch and "memref<16x128xf32" in mismatch  # the facts
    assert "Please file a bug" not in mismatch
    assert by_code["PAL204"].message.startswith(
        "Loads are only allowed on VMEM and SMEM references. ANY memory space can only be "
        "accessed using async_copy.")
    assert by_code["PAL111"].message.startswith("DMA with add=True is not supported.")
    assert "3 compile errors" in res.summary


def test_a_verifier_error_at_run_time_is_pal305_with_its_shapes(tmp_path):
    """On a chip the verifier's error reaches the test as an exception (the
    kernel is compiled when it first runs): the same code, at the `.start()`
    JAX's before-transformation frames name."""
    src = tmp_path / "k.py"
    src.write_text("def k(x, o, buf, sem):\n    copy = make(x, buf, sem)\n    copy.start()\n")
    message = ("Pallas encountered an internal verification error. Please file a bug at "
               "https://github.com/jax-ml/jax/issues/new/choose. Error details: 'tpu.enqueue_dma' "
               "op DMA source and target shape mismatch.\n see current operation: "
               '"tpu.enqueue_dma"(%2, %arg2, %arg3) <{priority = 0 : i32}> : (memref<8x128xf32, '
               "#tpu.memory_space<any>>, memref<16x128xf32, #tpu.memory_space<vmem>>, "
               "memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) -> ()")
    f = {"type": "jax._src.pallas.mosaic.error_handling.VerificationError", "message": message,
         "original": None, "frames": [], "callback": [], "nodeid": "t::x",
         "chain": [{"type": "jax._src.source_info_util.JaxStackTraceBeforeTransformation",
                    "message": message, "frames": [{"file": str(src), "line": 3, "name": "k"}]}]}
    d = failure_diagnostic(f, PathMap(root=tmp_path), None)
    assert (d.code, d.span.line + 1) == ("PAL305", 3)
    assert d.message.startswith("'tpu.enqueue_dma' op DMA source and target shape mismatch")
    assert "memref<8x128xf32" in d.message and "Please file a bug" not in d.message
