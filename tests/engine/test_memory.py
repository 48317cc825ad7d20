"""An analysis leaves no reference cycles behind: a server re-analyses on
every keystroke, and cyclic garbage the size of a kernel file's AST costs the
collector a quarter of the analysis time (and stalls the editor)."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pallas_lsp.engine import analyze

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("editor", [True, False])
def test_dropping_an_analysis_frees_it_by_reference_counting(path, editor):
    text = path.read_text(encoding="utf-8")
    gc.collect()
    gc.disable()
    try:
        analysis = analyze(text, str(path), findings_only=not editor)
        if editor:
            analysis.settle()  # hover names, API calls: what the server builds
            assert analysis.names
        del analysis
        assert gc.collect() == 0
    finally:
        gc.enable()
