"""PAL406 on a SparseCore, proven against the compiler both ways: the
fixture's bug fails to lower for deviceless v5p and v6e SparseCores (scalar
and vector subcores) with the rank-0 error, its fixed twin compiles, and the
engine flags exactly the `# expect` line. (The other compile rules do not
judge SparseCore kernels: its lowering differs; this op is shared.)"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_lsp import catalog
from pallas_lsp.engine.analyze import analyze

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "sc_wait_sem_array.py"
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def test_engine_flags_exactly_the_expected_line():
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    expected = {i + 1: "PAL406" for i, ln in enumerate(lines) if "# expect PAL406" in ln}
    a = analyze(FIXTURE.read_text(encoding="utf-8"), str(FIXTURE))
    assert {f.span.line + 1: f.code for f in a.findings} == expected and len(expected) == 1
    entry = catalog.match_message(a.findings[0].message)
    assert entry is not None and entry.code == "PAL406"


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(FIXTURE), *args], capture_output=True,
                          text=True, timeout=300, cwd=FIXTURE.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
@pytest.mark.parametrize("core, gen", [("scalar", "v5p"), ("vector", "v6e")])
def test_the_compiler_refuses_the_bug_and_compiles_the_fix(core, gen):
    assert "DMA wait semaphore must be rank 0" in _run("bug", core, gen)
    assert _run("ok", core, gen).strip().endswith("COMPILED")
