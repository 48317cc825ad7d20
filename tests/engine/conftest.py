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


def run_jax(program: str):
    """Run a Pallas program in a fresh CPU-only Python (JAX's verdict on it):
    the completed process, stdout and stderr as text."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300, env={"JAX_PLATFORMS": "cpu", "PATH": ""})



def jax_refuses(p, message: str) -> None:
    """JAX's verdict (`run_jax`) is a failure that says `message`."""
    assert p.returncode != 0, p.stdout[-2000:]
    assert message in p.stderr, p.stderr[-2000:]


def jax_prints(p, expected: str) -> None:
    """JAX's verdict (`run_jax`) is a run that prints `expected`."""
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == expected
