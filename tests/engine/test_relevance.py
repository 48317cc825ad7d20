"""The text pre-check that lets a file skip analysis: it may say "relevant"
too often, never too rarely."""
from __future__ import annotations

import pytest

from pallas_lsp.engine.analyze import analyze
from pallas_lsp.engine.interp import LIBRARY_ROOTS
from pallas_lsp.engine.relevance import inert_file

TABLE = "import jax\n\nSIZES = {\n" + "".join(
    f"    ('bfloat16', {i}, 128): ({i % 7}, 32),\n" for i in range(300)) + "}\n"


@pytest.mark.parametrize("text", [
    "import numpy as np\nx = pl.program_id(0)\n",  # `pl` with no import of it
    "y = f(pl)\n", "pl\n", "z = [pl]", "from jax.experimental import pallas\n",
    "from jax._src import mosaic_gpu\n", "m = __import__(name)\n",
    "import importlib\nm = importlib.import_module(name)\n",
    "from . import helpers\n",  # the user's own module: a launcher may be there
    "import mykernels\n",
    "import os, mykernels\n",
])
def test_files_that_may_reach_a_kernel_are_analysed(text):
    assert not inert_file(text, LIBRARY_ROOTS)


@pytest.mark.parametrize("text", [
    TABLE, "import numpy as np\nsimple = np.zeros(3)  # apply, plpl, pl_x, x_pl, épl\n",
    "import os\n# import mykernels  (a comment)\nx = 1\n",
])
def test_library_only_files_naming_nothing_pallas_are_inert(text):
    assert inert_file(text, LIBRARY_ROOTS)


def test_an_inert_file_is_still_checked_for_syntax_errors():
    assert analyze(TABLE + "}\n", "t.py").syntax_error
    assert not analyze(TABLE, "t.py").syntax_error


def test_a_long_chain_of_helpers_is_relevant_end_to_end():
    """h0 -> h1 -> ... -> h{n-1}, the last one naming Pallas: every helper can
    lead to a kernel. (The worklist reaches the whole chain; the old fixpoint
    did too, in rounds that rescanned every def, quadratic in the chain.)"""
    import ast

    from pallas_lsp.engine.model import Api
    from pallas_lsp.engine.relevance import relevant_defs
    from pallas_lsp.engine.source import parse

    n = 300
    text = "from jax.experimental.pallas import tpu as pltpu\n" + "".join(
        f"def h{i}(x):\n    return h{i + 1}(x)\n" for i in range(n - 1)) + \
        f"def h{n - 1}(x):\n    return pltpu.semaphore_signal(x)\n" + \
        "def unrelated(y):\n    return y + 1\nalias = h0\n"
    src = parse(text)
    defs = [d for d in src.tree.body if isinstance(d, ast.FunctionDef)]
    found = relevant_defs(src, defs, [], {"pltpu": Api(name="pltpu")})
    assert found == {id(d) for d in defs if d.name != "unrelated"}


# A buggy launch (a DMA of `x_hbm[...]`, an Array): found wherever it is reached from.
_KERNEL = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(x_hbm, o_hbm, sem):
    pltpu.make_async_copy(x_hbm[...], o_hbm, sem).start()


def launch(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)
'''


@pytest.mark.parametrize("name, text", [
    ("direct.py", "import ops\n\ndef main(x):\n    return ops.launch(x)\n"),
    ("through.py", "from mid import run\n\ndef main(x):\n    return run(x)\n"),
    # An attribute of a package can be any of its submodules.
    ("attr.py", "import pkg\n\ndef main(x):\n    return pkg.kernels.launch(x)\n"),
    ("late.py", "def main(x):\n    import mid\n    return mid.run(x)\n"),
])
def test_a_file_naming_no_pallas_that_reaches_a_kernel_through_imports_is_analysed(
        tmp_path, name, text):
    from pallas_lsp.engine.project import Project
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kernels.py").write_text(_KERNEL)
    (tmp_path / "ops.py").write_text(_KERNEL)
    (tmp_path / "mid.py").write_text("import ops\n\ndef run(x):\n    return ops.launch(x)\n")
    (tmp_path / name).write_text(text)
    path = str(tmp_path / name)
    full = analyze(text, path, project=Project([str(tmp_path)]))
    cli = analyze(text, path, project=Project([str(tmp_path)]), findings_only=True)
    assert "PAL101" in {f.code for f in full.findings}
    assert cli.findings == full.findings and cli.foreign == full.foreign


def test_a_file_whose_imports_reach_no_pallas_is_not_run_on_the_command_line(tmp_path):
    from pallas_lsp.engine import relevance
    from pallas_lsp.engine.project import Project
    (tmp_path / "util.py").write_text("import helpers\n\ndef f(x):\n    return helpers.g(x)\n")
    (tmp_path / "helpers.py").write_text("import util\n\ndef g(x):\n    return x + 1\n")
    text = "from util import f\n\nprint(f(1))\n"
    project = Project([str(tmp_path)])
    path = str(tmp_path / "main.py")
    src = relevance.Source(text, text.split("\n"), __import__("ast").parse(text))
    assert relevance.reaches_no_pallas(src, path, project, LIBRARY_ROOTS)
    assert project.pallas_free == {path: True, str(tmp_path / "util.py"): True,
                                   str(tmp_path / "helpers.py"): True}
    assert analyze(text, path, project=project, findings_only=True).findings == []
    # One more import, of a module that names Pallas: the file is analysed.
    (tmp_path / "k.py").write_text(_KERNEL)
    (tmp_path / "helpers.py").write_text("import util, k\n\ndef g(x):\n    return k.launch(x)\n")
    assert not relevance.reaches_no_pallas(src, path, Project([str(tmp_path)]), LIBRARY_ROOTS)
