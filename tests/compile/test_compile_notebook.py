"""A notebook's default run compiles its kernels too (deviceless libtpu): a
block shape that interpret mode runs and a TPU refuses fails the run, on the
BlockSpec's line of the launching cell."""
from __future__ import annotations

import json
import subprocess
import sys

KERNEL = """def tile_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[:128, :o_ref.shape[1]] * 2.0"""

LAUNCH = """x = jnp.ones((256, 256), jnp.float32)
y = pl.pallas_call(
    tile_kernel,
    out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
    grid=(2, 256 // {cols}),
    in_specs=[pl.BlockSpec((256, 256), lambda i, j: (0, 0))],
    out_specs=pl.BlockSpec((128, {cols}), lambda i, j: (i, j)),
)(x)"""


def _notebook(path, cols: int):
    cells = [("code", "import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl"),
             ("markdown", "The kernel, then its launch:"), ("code", KERNEL),
             ("code", LAUNCH.format(cols=cols))]
    nb = {"cells": [{"cell_type": k, "metadata": {}, "source": t.splitlines(True),
                     **({"outputs": [], "execution_count": None} if k == "code" else {})}
                    for k, t in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
    path.write_text(json.dumps(nb), encoding="utf-8")


def test_a_notebook_run_compiles_and_lands_on_the_cells_blockspec(tmp_path):
    _notebook(tmp_path / "tiles.ipynb", cols=64)
    p = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--timeout", "120",
                        "--root", str(tmp_path), "tiles.ipynb"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("tiles.ipynb:cell 4:7:15: PAL401 "), p.stdout
    assert "pallas_call tile_kernel at tiles.ipynb:cell 3:1 has block shape (128, 64)" in p.stdout
    assert "[local, interpret, compile v5e,v6e]" in p.stderr
    _notebook(tmp_path / "tiles.ipynb", cols=128)
    p = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--timeout", "120",
                        "--root", str(tmp_path), "tiles.ipynb"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "2 compiled, 0 compile errors" in p.stderr, p.stdout + p.stderr
