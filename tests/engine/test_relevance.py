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
