"""`pallas-lsp run NOTEBOOK.ipynb`: the cells run in order in a real Jupyter
kernel (nbclient + ipykernel) in TPU interpret mode; a failure lands on the
cell and line where JAX raised, with the catalog's code."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs_helpers import processes_with_cwd, ssh_profile, sshd  # noqa: F401 (a fixture)

from pallas_lsp.runs import RunSpec, Status, run
from pallas_lsp.runs.target import RunSpecError, parse_target

IMPORTS = """import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
%env PALLAS_NOTEBOOK_DEMO=1"""

KERNEL = """def kernel(x_hbm, o_hbm, buf, sem):
    pltpu.sync_copy(x_hbm, buf)
    copy = pltpu.make_async_copy(buf{index}, o_hbm, sem)
    copy.start()
    copy.wait()"""

LAUNCH = """x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(SHAPE)
out = pl.pallas_call(
    kernel, out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32),
    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
    out_specs=pl.BlockSpec(memory_space=pl.ANY),
    scratch_shapes=[pltpu.VMEM(SHAPE, jnp.float32), pltpu.SemaphoreType.DMA])(x)
assert (out == x).all()
print("copied", out.shape)"""

# %%writefile runs before the cells after it, in the notebook's folder, as in Jupyter
SHAPES = """%%writefile nb_shapes.py
SHAPE = (8, 128)"""

HANG = """def never_started(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.wait()"""

HANG_LAUNCH = """pl.pallas_call(
    never_started, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
    out_specs=pl.BlockSpec(memory_space=pl.ANY),
    scratch_shapes=[pltpu.SemaphoreType.DMA])(jnp.ones((8, 128), jnp.float32)).block_until_ready()"""


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    """An nbformat 4.4 notebook, as Jupyter writes it."""
    nb = {"cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(True),
                     **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                    for kind, text in cells],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 4}
    path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    return path


def seeded(folder: Path, bug: bool) -> Path:
    return write_notebook(folder / ("seeded.ipynb" if bug else "fixed.ipynb"), [
        ("markdown", "# A DMA kernel defined in one cell, launched in a later one"),
        ("code", IMPORTS),
        ("code", SHAPES),
        ("code", "from nb_shapes import SHAPE"),
        ("code", KERNEL.format(index="[...]" if bug else "")),  # BUG: an Array, not a Ref
        ("markdown", "Launch it:"),
        ("code", LAUNCH),
    ])


def cli(folder: Path, *args: str, python: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--no-compile",
                           "--root", str(folder), *(["--python", python] if python else []),
                           *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_kernel_bug_across_cells_lands_on_its_cell_and_line(tmp_path):
    """PAL101 in cell 5's kernel, launched from cell 7: JAX raises at the
    `.start()`, 4th line of cell 5 (Markdown cells count, as in `check`)."""
    seeded(tmp_path, bug=True)
    p = cli(tmp_path, "seeded.ipynb")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("seeded.ipynb:cell 5:4:5: PAL101 DMA source/destination/"
                               "semaphore arguments must be Refs."), p.stdout + p.stderr
    assert "[cell 7]" in p.stdout  # the cell that was running
    assert "Traceback" in p.stderr or "ValueError" in p.stderr  # the cell's error, streamed
    assert "pallas-lsp run seeded.ipynb: failed" in p.stderr
    assert (tmp_path / "nb_shapes.py").read_text() == "SHAPE = (8, 128)\n"


def test_the_fixed_twin_runs_clean_and_the_notebook_is_untouched(tmp_path):
    nb = seeded(tmp_path, bug=False)
    before = nb.read_bytes()
    p = cli(tmp_path, "fixed.ipynb", "--output-format", "json")
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout) == []
    assert "copied (8, 128)" in p.stderr  # the cell's output, streamed
    assert "pallas-lsp run fixed.ipynb: passed" in p.stderr
    assert nb.read_bytes() == before


def test_a_cell_that_raises_before_the_kernel_stops_the_run_there(tmp_path, sshd):
    """Over SSH: the report comes back as a marked line of the kernel's
    stderr, the diagnostic lands on the local notebook."""
    write_notebook(tmp_path / "early.ipynb", [
        ("code", IMPORTS),
        ("code", "SHAPE = (8, 128)\nsizes = {'rows': 8}\ncols = sizes['cols']"),
        ("code", KERNEL.format(index="[...]")),
        ("code", LAUNCH),
        ("code", "open('ran_to_the_end.txt', 'w').close()"),
    ])
    remote = tmp_path / "remote side"
    res = run(RunSpec(target=str(tmp_path / "early.ipynb"), root=str(tmp_path), timeout=120,
                      profile=ssh_profile(sshd, remote)))
    assert res.status is Status.FAILED, res.summary
    assert (remote / "early.ipynb").is_file() and res.argv[0] == "ssh"
    [d] = res.diagnostics
    assert d.code == "PAL900" and d.message.startswith("KeyError: 'cols'")
    assert d.path == str(tmp_path / "early.ipynb")  # the local notebook
    # program coordinates (cell 1 has 5 lines): cell 2, line 3
    assert (d.span.line, d.span.col) == (5 + 2, 7)
    assert not (remote / "ran_to_the_end.txt").exists()


def test_a_cell_that_does_not_parse_is_reported_at_its_own_column(tmp_path):
    """The engine blanks a broken cell in its program; the run's position is
    still read on the cell's own text, and the message names the cell."""
    write_notebook(tmp_path / "typo.ipynb", [
        ("code", "SHAPE = (8, 128)"), ("markdown", "A typo:"), ("code", "x = 1\ndef f(:\n    pass")])
    p = cli(tmp_path, "typo.ipynb")
    assert p.returncode == 1, p.stderr
    assert p.stdout == ("typo.ipynb:cell 3:2:7: PAL900 SyntaxError: invalid syntax "
                        "(typo.ipynb:cell 3, line 2) [cell 3]\n"), p.stdout


RACY = """def racy(x_hbm, o_hbm, t_ref, sem):
    copy = pltpu.make_async_copy(x_hbm, t_ref, sem)
    copy.start()
    t_ref[...] = t_ref[...] + 1.0  # BUG: touches the DMA destination before wait()
    copy.wait()
    pltpu.sync_copy(t_ref, o_hbm)"""


def test_races_land_on_the_cells_lines(tmp_path):
    """The race detector prints the cells' compiled names; the kernel reports
    which cell each is, and the races land there."""
    write_notebook(tmp_path / "racy.ipynb", [
        ("code", IMPORTS), ("code", "SHAPE = (8, 128)"), ("code", RACY),
        ("code", LAUNCH.replace("kernel,", "racy,").replace("assert (out == x).all()", ""))])
    res = run(RunSpec(target=str(tmp_path / "racy.ipynb"), races=True, timeout=120))
    assert res.status is Status.FAILED, res.summary
    # cell 3 starts on program line 6 (cells of 5 and 1 lines before it)
    lines = {(d.code, d.span.line - 6 + 1, d.span.col + 1) for d in res.diagnostics}
    assert lines == {("PAL901", 3, 5), ("PAL901", 4, 5), ("PAL901", 4, 18)}, res.diagnostics
    assert any("the write at racy.ipynb:cell 3:4 " in d.message for d in res.diagnostics)


def test_a_hanging_cell_times_out_on_its_wait(tmp_path):
    write_notebook(tmp_path / "hang.ipynb", [
        ("code", IMPORTS), ("code", HANG), ("code", HANG_LAUNCH)])
    p = cli(tmp_path, "hang.ipynb", "--timeout", "12", "--output-format", "json")
    assert p.returncode == 3, p.stdout + p.stderr
    [row] = json.loads(p.stdout)  # lines and columns in the cell, as `check` gives them
    assert (row["path"], row["cell"], row["line"], row["column"], row["end_column"],
            row["code"]) == ("hang.ipynb", 2, 3, 5, 16, "PAL303"), row
    assert row["message"].startswith("The kernel hung") and "[cell 3]" in row["message"]
    assert "pallas-lsp run hang.ipynb: timeout after 12 s" in p.stderr
    assert processes_with_cwd(tmp_path) == []  # the kernel (a session of its own) ended too


def test_a_python_without_the_notebook_extra_gets_one_clear_message(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(bare)], check=True, timeout=120)
    seeded(tmp_path, bug=True)
    p = cli(tmp_path, "seeded.ipynb", python=str(bare / "bin" / "python"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert "running a notebook needs nbclient and ipykernel in " in p.stderr
    assert "pip install 'pallas-lsp[notebook]'" in p.stderr
    assert p.stdout == ""


def test_notebook_targets_and_what_they_refuse(tmp_path):
    nb = seeded(tmp_path, bug=True)
    assert parse_target(str(nb)).kind == "notebook"
    assert parse_target(str(nb), kind="script").kind == "notebook"
    with pytest.raises(RunSpecError, match="cannot name a test"):
        parse_target(f"{nb}::test_x")
    with pytest.raises(RunSpecError, match="takes no arguments"):
        run(RunSpec(target=str(nb), args=["-x"]))
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    p = cli(tmp_path, "broken.ipynb")
    assert p.returncode == 2 and "not a notebook: invalid JSON" in p.stderr
    assert "Traceback" not in p.stderr
