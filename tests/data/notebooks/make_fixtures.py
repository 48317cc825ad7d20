"""Writes the notebooks of this folder (run it after changing a cell here;
the files are committed so that the tests read exactly these bytes).

seeded.ipynb: as Jupyter writes it (indent 1, keys sorted, ensure_ascii off,
a trailing newline), a kernel in cell 3 launched in cell 7, a magic cell, a
broken cell and Markdown cells between. compact.ipynb: the same code in
another layout (indent 2, \\uXXXX escapes, `source` as one string, no
trailing newline), for the byte-exact --fix round trip.
"""
import json
from pathlib import Path

HERE = Path(__file__).parent
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

CELLS = [
    ("markdown", "# A copy kernel — with bugs\n\nRun the cells in order."),
    ("code", "import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
             "from jax.experimental.pallas import tpu as pltpu"),
    ("code", "%matplotlib inline\n!pip install -q jax\n"
             "def kernel(x_ref, o_ref, sem):\n"
             "    copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n"
             "    copy.start()\n    copy.wait()"),
    ("code", "%%bash\necho this is not python\n"),
    ("code", "def broken(:\n    pass"),
    ("markdown", "A second kernel: a local copy waited with `wait_send`."),
    ("code", "def local(x_ref, o_ref, sem):\n"
             "    d = pltpu.make_async_copy(x_ref, o_ref, sem)\n"
             "    d.start()\n    d.wait_send()"),
    ("code", "def copy(x, body):\n    return pl.pallas_call(\n        body,\n"
             "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
             "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
             "        out_specs=pl.BlockSpec(memory_space=pl.ANY),\n"
             "        scratch_shapes=[pltpu.SemaphoreType.DMA(())],\n"
             "        interpret=pltpu.InterpretParams(),\n    )(x)\n\n"
             "%time y = copy(jnp.ones((8, 128)), kernel)\nz = copy(jnp.ones((8, 128)), local)"),
]


def cell(kind, source, as_list=True):
    out = {"cell_type": kind, "metadata": {}, "source": source.splitlines(True) if as_list
           else source}
    if kind == "code":
        out["execution_count"] = None
        out["outputs"] = [{"data": {"image/png": PNG, "text/plain": ["<Figure size 640x480>"]},
                           "metadata": {}, "output_type": "display_data"}]
    return out


def notebook(as_list=True):
    return {"cells": [cell(k, s, as_list) for k, s in CELLS],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"},
                         "language_info": {"name": "python", "version": "3.11.0"}},
            "nbformat": 4, "nbformat_minor": 5}


if __name__ == "__main__":
    (HERE / "seeded.ipynb").write_text(
        json.dumps(notebook(), indent=1, sort_keys=True, ensure_ascii=False) + "\n",
        encoding="utf-8")
    (HERE / "compact.ipynb").write_text(
        json.dumps(notebook(as_list=False), indent=2, ensure_ascii=True), encoding="utf-8")
