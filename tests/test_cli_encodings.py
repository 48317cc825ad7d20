"""PEP 263: a file whose coding cookie names another encoding is read as
Python reads it (it used to be "E902 not valid UTF-8: skipped"), fixed in
that encoding, and followed as a helper module of another file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = (REPO / "examples" / "double_buffer_bugs.py").read_text(encoding="utf-8")
CLI = [sys.executable, "-m", "pallas_lsp", "check", "--no-config", "--output-format", "concise"]


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_latin1_file_is_checked_and_fixed_in_latin1(tmp_path):
    k = tmp_path / "k.py"
    k.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + EXAMPLE).encode("latin-1"))
    compile(k.read_bytes(), str(k), "exec")  # Python accepts it
    p = check("k.py", cwd=tmp_path)
    assert p.returncode == 1 and "E902" not in p.stdout
    assert "k.py:35:25: PAL101" in p.stdout  # two lines lower than in the example
    p = check("--fix", "k.py", cwd=tmp_path)
    data = k.read_bytes()
    assert "# café".encode("latin-1") in data and b"buf.at[slot]" in data
    assert "2 fixed" in p.stdout


def test_cookies_python_ignores_or_refuses(tmp_path):
    (tmp_path / "unknown.py").write_text("# coding: no-such-codec\nx = 1\n", encoding="ascii")
    (tmp_path / "late.py").write_bytes(b"x = 1  # coding: latin-1\n\xe9 = 1\n")
    p = check("unknown.py", "late.py", cwd=tmp_path)
    assert "unknown.py:1:1: E902 error: unknown encoding in the coding cookie" in p.stdout
    assert "late.py:2:1: E902 error: not valid UTF-8 (byte 25): skipped" in p.stdout


def test_a_latin1_helper_module_is_followed(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'w'\nversion = '0'\n")
    (tmp_path / "helpers.py").write_bytes(
        ("# -*- coding: latin-1 -*-\n# Hilfsfunktionen für Kopien\n"
         "from jax.experimental.pallas import tpu as pltpu\n\n\n"
         "def fetch(src, dst, sems):\n"
         "    pltpu.make_async_copy(src, dst, sems).start()\n").encode("latin-1"))
    (tmp_path / "kernel.py").write_text(
        "import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
        "from jax.experimental.pallas import tpu as pltpu\nfrom helpers import fetch\n\n\n"
        "def kernel(x_hbm, o_ref, buf, sems):\n"
        "    fetch(x_hbm, buf, sems)\n"
        "    o_ref[...] = buf[...]\n\n\n"
        "def run(x):\n"
        "    return pl.pallas_call(\n"
        "        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),\n"
        "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
        "        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))],\n"
        "    )(x)\n", encoding="utf-8")
    p = check(".", cwd=tmp_path)
    assert "PAL103" in p.stdout and "E902" not in p.stdout, p.stdout
