"""`pallas-lsp run --mode tpu NOTEBOOK.ipynb` on a real TPU (the device tool).

    python3 notebook_on_chip.py OUT_DIR

Writes three small notebooks into OUT_DIR and runs each on the chip, not
interpreted: a block shape a TPU refuses (PAL401, the launch in a later cell
than the kernel), its fixed twin, and a kernel that starts a DMA and never
waits for it (the chip halts the core: PAL302 where the engine finds it).
What `run` printed goes next to each notebook as NAME.json / NAME.err;

Tried on the device tool's v5e machine (2026-12-06): the Jupyter kernel died at
start with libzmq's "Address family not supported by protocol
(src/ip_resolver.cpp:542)". That sandbox closes even loopback TCP, and
ipykernel's IOPub thread binds a loopback TCP pipe whatever the transport (the
kernel's own channels use Unix sockets here). A TPU VM, Colab or Kaggle keeps
loopback open; where it is closed, run the notebook's code as a script.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

IMPORTS = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
           "from jax.experimental.pallas import tpu as pltpu")
TILE_KERNEL = "def tile_kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...] * 2.0"
TILE_LAUNCH = """x = jnp.ones((256, 256), jnp.float32)
y = pl.pallas_call(
    tile_kernel,
    out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
    grid=(2, 256 // {cols}),
    in_specs=[pl.BlockSpec((128, {cols}), lambda i, j: (i, j))],
    out_specs=pl.BlockSpec((128, {cols}), lambda i, j: (i, j)),
)(x)
print(float(y.sum()))"""
DROP_KERNEL = """def add_kernel(x_hbm, y_hbm, o_ref, x_buf, y_buf, x_sem, y_sem):
    x_copy = pltpu.make_async_copy(x_hbm, x_buf, x_sem)
    y_copy = pltpu.make_async_copy(y_hbm, y_buf, y_sem)
    x_copy.start()
    y_copy.start()
    x_copy.wait()
    o_ref[...] = x_buf[...] + y_buf[...]"""
DROP_LAUNCH = """x = jnp.ones((8, 128), jnp.float32)
out = pl.pallas_call(
    add_kernel,
    out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
    scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.VMEM((8, 128), jnp.float32),
                    pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA],
)(x, x)
print(float(out.sum()))"""

NOTEBOOKS = {
    "tiles_bug": [IMPORTS, TILE_KERNEL, TILE_LAUNCH.format(cols=64)],
    "tiles_ok": [IMPORTS, TILE_KERNEL, TILE_LAUNCH.format(cols=128)],
    "dropped": [IMPORTS, DROP_KERNEL, DROP_LAUNCH],
}


def write(path: Path, sources: list[str]) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": s.splitlines(True)} for s in sources]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, sources in NOTEBOOKS.items():
        nb = out / f"{name}.ipynb"
        write(nb, sources)
        start = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--mode", "tpu",
                            "--timeout", "120", "--output-format", "json", "--root", str(out),
                            nb.name], cwd=out, capture_output=True, text=True, timeout=300)
        (out / f"{name}.json").write_text(p.stdout, encoding="utf-8")
        (out / f"{name}.err").write_text(p.stderr + f"\nexit {p.returncode}, "
                                         f"{time.monotonic() - start:.1f} s\n", encoding="utf-8")
        print(name, "exit", p.returncode, p.stdout[:300].replace("\n", " "), flush=True)
        time.sleep(5)  # let the kernel process release the chip
    return 0


if __name__ == "__main__":
    sys.exit(main())
