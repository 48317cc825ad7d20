"""The one compile run the tests of this folder share: every fixture kernel
run in interpret mode and compiled for v5e and v6e with libtpu (~20 s)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import GENS, FIXTURES, SCRIPT  # noqa: E402

from pallas_lsp.runs import RunSpec, run  # noqa: E402


@pytest.fixture(scope="session")
def compiled():
    return run(RunSpec(target=str(SCRIPT), root=str(FIXTURES), compile_for=GENS, timeout=300))
