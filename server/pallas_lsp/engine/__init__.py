"""The analysis engine: reads Python source, knows Pallas, knows nothing of LSP.

Public entry point: `analyze(source, path=None) -> Analysis`.
"""
from pallas_lsp.engine.analyze import analyze
from pallas_lsp.engine.model import Analysis, Finding, Fix, Edit, Related, Span, NameInfo

__all__ = ["analyze", "Analysis", "Finding", "Fix", "Edit", "Related", "Span", "NameInfo"]
