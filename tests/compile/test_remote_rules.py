"""PAL406 on the send side of a remote copy, proven against JAX both ways: the
fixture's bug fails to lower for a deviceless v5e:2x2 mesh with the rank-0
error (and TPU interpret mode refuses it too), its fixed twin compiles and
runs, and the engine flags exactly the `# expect` line."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_lsp import catalog
from pallas_lsp.engine.analyze import analyze

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "remote_wait_send_sem.py"
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None


def _expected() -> dict[int, str]:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    return {i + 1: ln.split("# expect ")[1].split()[0]
            for i, ln in enumerate(lines) if "# expect PAL" in ln}


def _run(case: str, mode: str) -> str:
    proc = subprocess.run([sys.executable, str(FIXTURE), case, mode], capture_output=True,
                          text=True, timeout=300, cwd=FIXTURE.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_engine_flags_exactly_the_expected_line():
    a = analyze(FIXTURE.read_text(encoding="utf-8"), str(FIXTURE))
    got = {f.span.line + 1: f.code for f in a.findings}
    assert got == _expected() and list(got.values()) == ["PAL406"]
    for f in a.findings:
        entry = catalog.match_message(f.message)
        assert entry is not None and entry.code == "PAL406", f.message


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_the_compiler_refuses_the_bug_and_compiles_the_fix():
    assert "DMA wait semaphore must be rank 0" in _run("bug", "compile")
    assert _run("ok", "compile").strip().endswith("COMPILED")


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_interpret_mode_refuses_the_bug_and_runs_the_fix():
    assert "Only scalar arrays can be converted to Python scalars" in _run("bug", "interpret")
    assert _run("ok", "interpret").strip().endswith("RAN")
