"""Entry point of the engine (temporary: filled in by the engine work)."""
from __future__ import annotations

from pallas_lsp.engine.model import Analysis


def analyze(source: str, path: str | None = None) -> Analysis:
    return Analysis(path=path)
