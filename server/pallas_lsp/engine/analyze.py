"""Entry point of the engine: source text in, Analysis out."""
from __future__ import annotations

import logging

from pallas_lsp.engine import noqa
from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.model import Analysis, Finding
from pallas_lsp.engine.rules import RULES
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.source import parse

log = logging.getLogger(__name__)

# Files bigger than this are not analysed (generated code); the caller is told.
MAX_BYTES = 5_000_000


def analyze(source: str, path: str | None = None, *, resolver=None) -> Analysis:
    """Infer what every name in every kernel is and run all rules.

    Never raises on bad input: a syntax error blanks the broken region and
    the rest is analysed; `Analysis.syntax_error` says what happened.

    `resolver` (imports.Resolver) lets the engine follow helpers and kernels
    imported from other files; without it, they are Unknown."""
    if len(source) > MAX_BYTES:
        return Analysis(path=path, syntax_error=f"file too large to analyse ({len(source)} bytes)")
    try:
        return _analyze(source, path, resolver)
    except Exception as exc:  # an engine bug must cost one file, not the editor session
        log.exception("pallas-lsp engine failed on %s", path or "<buffer>")
        return Analysis(path=path, internal_error=f"{type(exc).__name__}: {exc}")


def _analyze(source: str, path: str | None, resolver) -> Analysis:
    src = parse(source)
    interp = Interpreter(src, path, resolver=resolver)
    interp.run()
    ctx = Context(src=src, events=interp.events)
    table = noqa.noqa_lines(src.text)
    seen: set[tuple] = set()
    findings: list[Finding] = []
    for rule in RULES:
        for f in rule.check(ctx):
            key = (f.code, f.span)
            if key in seen or noqa.suppressed(f.code, f.span.line, table):
                continue
            if f.span.line in src.blanked:
                continue
            seen.add(key)
            findings.append(f)
    findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
    names = sorted(interp.names.values(), key=lambda n: (n.span.line, n.span.col))
    return Analysis(path=path, findings=findings, names=names, kernels=list(interp.kernels),
                    syntax_error=src.syntax_error)
