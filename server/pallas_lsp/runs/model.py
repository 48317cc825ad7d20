"""What a run produces. Pure data: no processes, no jax.

Positions follow the engine (`pallas_lsp.engine.model`): 0-based lines and
0-based columns in Unicode code points. `to_row()` gives the 1-based JSON rows
that `pallas-lsp check --output-format json` prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from pallas_lsp.engine.model import Finding, Related, Severity, Span

SOURCE = "pallas-lsp run"

# Codes for what the catalog cannot name. Catalog codes (PAL1xx/PAL2xx) are used
# whenever JAX's message matches a catalog entry.
CODE_FAILURE = "PAL900"  # an exception JAX (or the test) raised that is not in the catalog
CODE_RACE = "PAL901"  # a data race reported by the interpreter's race detector
CODE_HANG = "PAL902"  # the run timed out: a DMA / semaphore wait that never completes


class Status(str, Enum):
    PASSED = "passed"  # the process exited 0 and nothing was reported
    FAILED = "failed"  # a test/script failed, or a race was reported: see diagnostics
    TIMEOUT = "timeout"  # the run did not finish in time (usually a hung kernel)
    CANCELLED = "cancelled"  # RunHandle.cancel() was called
    ERROR = "error"  # the run could not be done (bad target, no interpreter, SSH failed...)


@dataclass(frozen=True)
class RunRelated:
    """A secondary location (possibly in another file than the diagnostic)."""

    path: str
    span: Span
    message: str


@dataclass(frozen=True)
class RunDiagnostic:
    """A Finding with the file it belongs to (runs report into many files)."""

    path: str  # local absolute path
    span: Span
    code: str
    message: str
    severity: Severity = Severity.ERROR
    related: tuple[RunRelated, ...] = ()
    test: str | None = None  # pytest node id (or script path) that produced it
    source: str = SOURCE

    def to_finding(self) -> Finding:
        """The engine's Finding (related locations in other files are dropped:
        `Related` has no path)."""
        rel = tuple(Related(r.span, r.message) for r in self.related if r.path == self.path)
        return Finding(code=self.code, message=self.message, span=self.span,
                       severity=self.severity, related=rel)

    def to_row(self, display_path: str | None = None) -> dict:
        s = self.span
        return {"path": display_path or self.path, "line": s.line + 1, "column": s.col + 1,
                "end_line": s.end_line + 1, "end_column": s.end_col + 1,
                "code": self.code, "message": self.message,
                "severity": self.severity.value}


@dataclass
class RunResult:
    status: Status
    diagnostics: list[RunDiagnostic] = field(default_factory=list)
    duration: float = 0.0  # seconds, wall time of the whole run (copying included)
    argv: list[str] = field(default_factory=list)  # the command that ran the tests
    commands: list[list[str]] = field(default_factory=list)  # every command (copy, run)
    summary: str = ""  # one line, e.g. "pallas-lsp run: failed, 1 diagnostic ..."
    exit_code: int | None = None  # of the run command (None: killed / never started)
    error: str | None = None  # why status is ERROR
    tests: dict = field(default_factory=dict)  # pytest outcome counts: {"passed": 3, ...}
    # `--compile`: one dict per kernel and generation that compiled (compile_mapping.py)
    compiles: list = field(default_factory=list)
    # a default compile that could not happen (no libtpu): why, for the summary
    compile_skipped: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.PASSED
