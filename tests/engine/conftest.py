import textwrap

import pytest

from pallas_lsp.engine import analyze

HEADER = """\
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""


def run(body: str, header: str = HEADER):
    """Analyse a snippet; returns (analysis, source)."""
    src = header + textwrap.dedent(body)
    return analyze(src, "snippet.py"), src


def codes(body: str, header: str = HEADER) -> list[str]:
    return [f.code for f in run(body, header)[0].findings]


def line_of(src: str, marker: str) -> int:
    """0-based line of the first line containing `marker`."""
    for i, line in enumerate(src.split("\n")):
        if marker in line:
            return i
    raise AssertionError(f"{marker!r} not in source")


@pytest.fixture
def analyze_snippet():
    return run
