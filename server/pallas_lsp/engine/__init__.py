"""The analysis engine: reads Python source, knows Pallas, knows nothing of LSP.

Public entry point: `analyze(source, path=None) -> Analysis`.

Importing the package loads nothing else: the command line reading its
result cache needs the data classes (model.py) and the project's file
resolution, not the interpreter and rules (most of its start-up); they load
on the first use of `analyze`.
"""
import sys
import types

__all__ = ["analyze", "Analysis", "Finding", "Fix", "Edit", "Related", "Span", "NameInfo"]

_MODEL = frozenset(__all__) - {"analyze"}


def __getattr__(name: str):
    if name == "analyze":
        from pallas_lsp.engine.analyze import analyze
        return analyze
    if name in _MODEL:
        from pallas_lsp.engine import model
        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """The package's `analyze` is the function: loading the submodule of
    that name (which sets the attribute to the module) leaves it so."""

    def __setattr__(self, name, value):
        if name == "analyze" and isinstance(value, types.ModuleType):
            value = value.analyze
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
