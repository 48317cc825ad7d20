"""A misbehaving stand-in for the engine (PALLAS_LSP_ANALYZER=evil_engine:analyze):
the real analysis, plus broken data when the text asks for it."""
from __future__ import annotations

import os
from dataclasses import dataclass

from pallas_lsp.engine import analyze as real_analyze
from pallas_lsp.engine.model import Edit, Finding, Fix, NameInfo, Related, Span, Value


@dataclass(frozen=True)
class Exploding(Value):
    def describe(self) -> str:
        raise RuntimeError("describe() exploded")


def analyze(source: str, path: str | None = None):
    analysis = real_analyze(source, path)
    if "BOOM_HOVER" in source:  # hover and inlay hints raise inside the server
        before = source[: source.index("BOOM_HOVER")]
        line, col = before.count("\n"), len(before) - (before.rfind("\n") + 1)
        analysis.names.append(NameInfo(Span(line, col, line, col + 10), "BOOM_HOVER", Exploding(),
                                       is_param=True))
    if "BAD_SPANS" in source:  # spans and edits far outside the text
        far = Span(10**6, 5, 10**6 + 3, 10**9)
        backwards = Span(3, 50, 1, 2)
        analysis.findings.append(Finding(
            "PAL101", "far away", far, related=(Related(backwards, "backwards"),),
            fixes=(Fix("nonsense", (Edit(far, "x"), Edit(backwards, "y")), True),)))
    if "PRINT_TO_STDOUT" in source:  # must not corrupt the protocol stream
        print("junk from print()", flush=True)
        os.write(1, b"junk written to fd 1\n")
    if "MEMORY_HOG" in source:  # only the part of the file before the marker fits
        raise MemoryError()
    if "RAISE_IN_ENGINE" in source:
        raise RuntimeError("the engine raised")
    return analysis
