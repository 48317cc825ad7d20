"""`check --fix`, `--unsafe-fixes`, `--diff`, `--show-fixes` and `--fix` on
stdin, through the real CLI in a subprocess, on copies of real files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path, stdin: str | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "check", "--no-config", *args],
                          cwd=cwd, input=stdin, capture_output=True, text=True, timeout=timeout)


def codes(result) -> list[str]:
    return [line.split(": ", 2)[1].split()[0] for line in result.stdout.splitlines()
            if line.count(":") >= 3 and ": PAL" in line]


@pytest.fixture
def examples(tmp_path) -> Path:
    dst = tmp_path / "examples"
    shutil.copytree(REPO / "examples", dst)
    return dst


def test_fix_leaves_only_unsafe_findings_and_the_kernel_still_runs(examples):
    before = (examples / "double_buffer_bugs.py").read_text()
    r = cli("--fix", ".", cwd=examples)
    assert r.returncode == 1, r.stderr
    assert "Found 3 problems (2 fixed, 1 remaining)." in r.stdout
    # What is left has only an unsafe fix: the semaphore index is the user's choice.
    r = cli(".", cwd=examples)
    assert codes(r) == ["PAL103"] and r.returncode == 1
    assert "1 more with `--fix --unsafe-fixes`" in r.stdout
    r = cli("--fix", "--unsafe-fixes", ".", cwd=examples)
    assert r.returncode == 0 and "(1 fixed, 0 remaining)" in r.stdout
    after = (examples / "double_buffer_bugs.py").read_text()
    assert cli(".", cwd=examples).stdout == "All checks passed!\n"
    assert "buf.at[slot], o_hbm" in after and "done.wait()" in after and "sems.at[0])" in after
    assert after.count("\n") == before.count("\n")
    # The fixed kernel runs in TPU interpret mode and copies its input.
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, jax.numpy as jnp
        import double_buffer_bugs as k
        x = jnp.arange(k.ROWS * 128, dtype=jnp.float32).reshape(k.ROWS, 128)
        np.testing.assert_array_equal(np.asarray(k.copy(x)), np.asarray(x))
        print("ok")
    """)], cwd=examples, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_diff_prints_what_fix_would_do_and_changes_nothing(examples):
    path = examples / "double_buffer_bugs.py"
    before = path.read_bytes()
    r = cli("--diff", ".", cwd=examples)
    assert r.returncode == 1
    assert path.read_bytes() == before
    assert r.stdout.startswith("--- a/double_buffer_bugs.py\n+++ b/double_buffer_bugs.py\n")
    assert "-    done.wait_send()\n+    done.wait()\n" in r.stdout
    assert "+        return pltpu.make_async_copy(" not in r.stdout  # unsafe: not without
    assert "Would fix 2 problems." in r.stderr
    assert "+        return pltpu.make_async_copy(" in cli("--diff", "--unsafe-fixes", ".",
                                                         cwd=examples).stdout
    cli("--fix", "--unsafe-fixes", ".", cwd=examples)
    r = cli("--diff", ".", cwd=examples)
    assert r.returncode == 0 and r.stdout == ""


HELPER = '''\
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    pltpu.make_async_copy(src[...], dst, sem).start()
    pltpu.make_async_copy(src, dst, sem).wait()
'''

KERNEL = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from helpers import copy_in


def kernel(x_hbm, o_hbm, sem):
    copy_in(x_hbm, o_hbm, sem)


def run(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)
'''


def test_fix_lands_in_the_helper_another_files_kernel_reaches(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    # CRLF line ends and a BOM must survive the rewrite.
    (tmp_path / "helpers.py").write_bytes(b"\xef\xbb\xbf" + HELPER.replace("\n", "\r\n").encode())
    (tmp_path / "kernel.py").write_text(KERNEL)
    r = cli(".", "--output-format", "concise", cwd=tmp_path)
    assert "helpers.py:5:27: PAL101 [*]" in r.stdout and "kernel.py:10:5: PAL101 error" in r.stdout
    r = cli("--fix", "--show-fixes", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Fixed 1 problem:\n- helpers.py:\n    1 × PAL101" in r.stdout
    data = (tmp_path / "helpers.py").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"make_async_copy(src, dst, sem).start()\r\n" in data
    assert data.count(b"\r\n") == HELPER.count("\n")
    assert (tmp_path / "kernel.py").read_text() == KERNEL  # the call site has nothing to fix


def test_a_file_that_does_not_parse_is_never_fixed(examples):
    path = examples / "double_buffer_bugs.py"
    text = path.read_text() + "\ndef broken(:\n"
    path.write_text(text)
    r = cli("--fix", "--unsafe-fixes", ".", cwd=examples)
    assert path.read_text() == text
    assert "E999" in r.stdout and "(0 fixed," in r.stdout and r.returncode == 1


def test_fix_on_stdin_writes_the_fixed_source_to_stdout(examples, tmp_path):
    src = (examples / "double_buffer_bugs.py").read_text()
    r = cli("--fix", "--stdin-filename", "kernels/double_buffer_bugs.py", "-", cwd=tmp_path,
            stdin=src)
    assert r.returncode == 1  # PAL103 remains
    assert r.stdout.count("\n") == src.count("\n") and "done.wait()\n" in r.stdout
    assert "buf.at[slot], o_hbm" in r.stdout
    # The report goes to stderr, under the name given.
    assert "kernels/double_buffer_bugs.py:20:87: PAL103 error" in r.stderr
    assert not (tmp_path / "kernels").exists()
    r = cli("--diff", "-", cwd=tmp_path, stdin=src)
    assert r.returncode == 1 and r.stdout.startswith("--- a/-\n+++ b/-\n")


def test_fix_skips_a_fix_whose_result_would_not_parse(tmp_path, monkeypatch):
    """The guard itself (no rule makes such a fix today): the file stays as it was."""
    from pallas_lsp.check import checker, fixes
    from pallas_lsp.engine.model import Edit, Finding, Fix, Span

    path = tmp_path / "k.py"
    path.write_text("x = 1\n")
    bad = Finding("PAL101", "m", Span(0, 0, 0, 1),
                  fixes=(Fix("break it", (Edit(Span(0, 0, 0, 1), "def ("),), True),))
    item = checker.Checked(path, None, [bad])
    monkeypatch.setattr(fixes, "check_project", lambda paths, options: ([item], []))
    run = fixes.run([path], checker.Options())
    assert run.files == {} and "would not parse" in run.skipped[0]
    assert path.read_text() == "x = 1\n"
