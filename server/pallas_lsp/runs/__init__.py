"""`pallas-lsp run`: run a kernel's test or script in JAX's TPU interpret mode
(locally, over SSH, or for real on a TPU VM) and map the failure back to the
user's lines as diagnostics.

Public API (what the LSP layer calls)::

    from pallas_lsp.runs import RunSpec, start_run
    handle = start_run(RunSpec(target="tests/test_k.py::test_x", root="/ws"),
                       on_output=lambda stream, line: ...)
    handle.cancel()            # kills the whole process group
    result = handle.result()   # RunResult: status, diagnostics, summary, ...

This package is imported by the child process too (only `launcher`,
`pytest_plugin`, `_child`, `_report` and `_compile`, which import nothing else
of pallas_lsp), so everything else is loaded lazily.
"""
from __future__ import annotations

_LAZY = {
    "RunSpec": "pallas_lsp.runs.runner",
    "RunHandle": "pallas_lsp.runs.runner",
    "start_run": "pallas_lsp.runs.runner",
    "run": "pallas_lsp.runs.runner",
    "RunResult": "pallas_lsp.runs.model",
    "RunDiagnostic": "pallas_lsp.runs.model",
    "RunRelated": "pallas_lsp.runs.model",
    "Status": "pallas_lsp.runs.model",
    "Profile": "pallas_lsp.runs.profiles",
    "ProfileError": "pallas_lsp.runs.profiles",
    "validate_profile": "pallas_lsp.runs.profiles",
    "load_profiles": "pallas_lsp.runs.profiles",
    "resolve_profile": "pallas_lsp.runs.profiles",
    "Target": "pallas_lsp.runs.target",
    "TargetError": "pallas_lsp.runs.target",
    "parse_target": "pallas_lsp.runs.target",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pallas_lsp.runs' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
