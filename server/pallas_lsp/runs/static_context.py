"""A run's outcome next to what the engine knows of the kernels it ran.

The child records which kernels each test bound and which `pallas_call` it
bound last (`_dispatch.py`). Here the engine analyses those kernels' files
once each, and:

* a run that hung lands on the waits of the kernel dispatched last (the
  interpreter names the stuck wait in interpret mode; on a chip nothing
  does), with the engine's PAL303 (a wait no copy signals) as related
  information and, when it fires, as the code;
* a failure (a NaN mismatch on the test's assert line, say) shows the static
  findings of the kernels its test ran, next to the failure.
"""
from __future__ import annotations

import ast
import os

from pallas_lsp.engine.model import Span
from pallas_lsp.runs.mapping import PathMap, _frame_span, _user_frames, hang_diagnostics
from pallas_lsp.runs.model import CODE_HANG, RunDiagnostic, RunRelated

CODE_WAIT_WITHOUT_START = "PAL303"
CODE_NEVER_WAITED = "PAL302"
# What a TPU v5e chip raised at the end of a kernel that started a DMA and never
# waited for it (tests/oracle/data/chip_v5e.jsonl): the runtime halts the core.
# The words name no cause, so the code is PAL302 only where the engine finds
# that mistake in a kernel the test ran.
CORE_HALT = "Core halted unexpectedly"
MAX_RELATED = 8


def kernel_def(tree: ast.Module | None, line: int | None):
    """The def of a kernel whose source JAX names by `line` (the def's line,
    or one of its decorators')."""
    if tree is None or not line:
        return None
    return next((n for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)
                 and any(d.lineno == line for d in [n] + n.decorator_list)), None)


class StaticContext:
    """One engine analysis per file a run's kernels live in."""

    def __init__(self, pm: PathMap):
        self.pm = pm
        self._analyses: dict[str, object] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def analysis(self, path: str):
        if path not in self._analyses:
            from pallas_lsp.engine.analyze import analyze  # noqa: PLC0415 - only when needed
            text = self.pm.source(path)
            self._analyses[path] = analyze(text, path) if text else None
        return self._analyses[path]

    def _tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.pm.source(path) or "")
            except (SyntaxError, ValueError, RecursionError):
                self._trees[path] = None
        return self._trees[path]

    def locate(self, kernel: dict | None) -> tuple[str, tuple[int, int]] | None:
        """(local file, 0-based first and last line of the def) of a kernel record."""
        kernel = kernel or {}
        local = self.pm.local(kernel.get("file") or "")
        if local is None:
            return None
        node = kernel_def(self._tree(local), kernel.get("line"))
        if node is None:
            return None
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        return local, (first, (node.end_lineno or node.lineno) - 1)

    def findings(self, kernel: dict | None) -> list:
        """The engine's findings inside the kernel's def."""
        where = self.locate(kernel)
        if where is None:
            return []
        path, (lo, hi) = where
        a = self.analysis(path)
        return [f for f in (a.findings if a is not None else []) if lo <= f.span.line <= hi]

    def waits(self, kernel: dict | None) -> list[tuple[str, Span, str]]:
        """(file, span, kind) of the waits in the kernel (its helpers included)."""
        where = self.locate(kernel)
        if where is None:
            return []
        path, (lo, hi) = where
        a = self.analysis(path)
        name = (kernel or {}).get("name")
        out = []
        for kname, span, kind in (a.waits if a is not None else []):
            inside = not span.path and lo <= span.line <= hi
            if inside or (name and kname == name):
                out.append((span.path or path, Span(span.line, span.col, span.end_line,
                                                    span.end_col), kind))
        return out


def _where(pm: PathMap, path: str, span: Span) -> str:
    return f"{os.path.basename(pm.display(path))}:{span.line + 1}"


def _finding_related(pm: PathMap, path: str, f, name: str) -> RunRelated:
    return RunRelated(pm.display(path), f.span, f"{f.code} (static, kernel `{name}`): {f.text}")


# ---------------------------------------------------------------- hangs


def _call_site(dispatched: dict, pm: PathMap) -> tuple[str, Span] | None:
    frames = _user_frames(dispatched.get("site") or [], pm)
    if not frames:
        return None
    path, fr = frames[-1]
    return path, _frame_span(pm, path, fr)


def kernel_hang(hang: dict, pm: PathMap, ctx: StaticContext, secs: float) -> RunDiagnostic | None:
    """The hang at the waits of the kernel dispatched last, when the child
    recorded one in a user file (None otherwise)."""
    dispatched = hang.get("dispatched") or {}
    kernel = dispatched.get("kernel") or {}
    where = ctx.locate(kernel)
    if where is None:
        return None
    kpath, (klo, _) = where
    name = kernel.get("name") or "the kernel"
    waits = ctx.waits(kernel)
    static = [f for f in ctx.findings(kernel) if f.code == CODE_WAIT_WITHOUT_START]
    flagged = {(kpath, f.span.line) for f in static}
    call = _call_site(dispatched, pm)
    nodeid = (hang.get("current") or {}).get("nodeid") or dispatched.get("nodeid")
    label = f" [{nodeid}]" if nodeid else ""
    related: list[RunRelated] = []
    if waits:
        waits.sort(key=lambda w: (w[0], w[1].line) not in flagged)  # a flagged wait first
        path, span, kind = waits[0]
        others = len(waits) - 1
        where_text = (f"It can block at this {kind}" + (f" or at {others} other wait(s) in the "
                                                        "kernel" if others else ""))
        for p, s, k in waits[1:]:
            related.append(RunRelated(pm.display(p), s, f"can block here too ({k})"))
    else:
        path, span = call if call is not None else (kpath, ctx.pm.span(kpath, klo + 1))
        where_text = ("The engine knows no wait in it: look for a host callback or loop that "
                      "never ends, or a wait in code the engine does not follow")
    code = CODE_WAIT_WITHOUT_START if (path, span.line) in flagged else CODE_HANG
    for f in static:
        related.append(_finding_related(pm, kpath, f, name))
    if call is not None and (call[0], call[1].line) != (path, span.line):
        related.append(RunRelated(pm.display(call[0]), call[1],
                                  f"the pallas_call of `{name}`, dispatched last"))
    main = next((s for s in hang.get("stacks") or [] if s.get("main")), None)
    test_frames = _user_frames(main.get("frames"), pm) if main else []
    if test_frames:
        tp, tf = test_frames[-1]
        related.append(RunRelated(pm.display(tp), _frame_span(pm, tp, tf),
                                  "the test was waiting for the kernel here"))
    why = (f" The engine reports: {static[0].text}" if static and code != CODE_WAIT_WITHOUT_START
           else "")
    message = (f"The run hung in kernel `{name}`, the last pallas_call dispatched (no result "
               f"after {secs:g} s). {where_text}.{why}{label}")
    return RunDiagnostic(path=pm.display(path), span=span, code=code, message=message,
                         related=tuple(related[:MAX_RELATED]), test=nodeid)


def with_static_context(diags: list[RunDiagnostic], hang: dict, pm: PathMap,
                        ctx: StaticContext) -> list[RunDiagnostic]:
    """The interpreter's own wait lines (interpret mode) with the engine's
    finding at the same line and the kernel's pallas_call as related."""
    dispatched = hang.get("dispatched") or {}
    kernel = dispatched.get("kernel") or {}
    where = ctx.locate(kernel)
    if where is None:
        return diags
    kpath = where[0]
    name = kernel.get("name") or "the kernel"
    found = ctx.findings(kernel)
    call = _call_site(dispatched, pm)
    out = []
    for d in diags:
        extra = [_finding_related(pm, kpath, f, name) for f in found
                 if f.code == CODE_WAIT_WITHOUT_START and pm.display(kpath) == d.path
                 and f.span.line == d.span.line]
        if call is not None:
            extra.append(RunRelated(pm.display(call[0]), call[1],
                                    f"the pallas_call of `{name}`, dispatched last"))
        out.append(_replace(d, related=tuple(extra) + d.related))
    return out


def hang_report(hang: dict, pm: PathMap, fallback, timeout: float,
                ctx: StaticContext) -> list[RunDiagnostic]:
    secs = hang.get("timeout") or timeout
    diags = hang_diagnostics(hang, pm, fallback, timeout)
    if any(d.code != CODE_HANG for d in diags) or \
            any(d.message.startswith("The kernel hung") for d in diags):
        return with_static_context(diags, hang, pm, ctx)  # the interpreter named the wait
    found = kernel_hang(hang, pm, ctx, secs)
    return [found] if found is not None else diags


# ---------------------------------------------------------------- failures


def with_kernel_findings(d: RunDiagnostic, kernels: list[dict] | None, pm: PathMap,
                         ctx: StaticContext) -> RunDiagnostic:
    """A failure with the engine's findings in the kernels its test ran: as
    related information and named in the message (the text output)."""
    d = _at_static_site(_core_halt(d, kernels, ctx), kernels, pm, ctx)
    related, named = [], []
    for kernel in kernels or []:
        where = ctx.locate(kernel)
        if where is None:
            continue
        path, _ = where
        name = kernel.get("name") or "kernel"
        for f in ctx.findings(kernel):
            if f.code == d.code and pm.display(path) == d.path and f.span.line == d.span.line:
                continue  # the failure is that finding
            related.append(_finding_related(pm, path, f, name))
            if f.code != d.code:  # the same code says nothing new in the text
                named.append(f"{f.code} at {_where(pm, path, f.span)} in `{name}` ({f.message})")
    if not related:
        return d
    text = d.message
    if named:
        text += " Static findings in the kernels this test ran: " + "; ".join(named[:4]) \
            + ("; …" if len(named) > 4 else "") + "."
    return _replace(d, message=text, related=tuple(related[:MAX_RELATED]) + d.related)


def _core_halt(d: RunDiagnostic, kernels: list[dict] | None, ctx: StaticContext) -> RunDiagnostic:
    """A chip's core halt is PAL302 when the kernels the test ran hold a DMA
    the engine finds never waited; otherwise it stays the generic failure."""
    if d.code.startswith("PAL") and d.code[3:4] in "1234" or CORE_HALT not in d.message:
        return d
    if not any(f.code == CODE_NEVER_WAITED for k in kernels or [] for f in ctx.findings(k)):
        return d
    return _replace(d, code=CODE_NEVER_WAITED,
                    message=d.message + " (On a TPU, a DMA started and never waited halts the "
                    "core when the kernel ends.)")


def _at_static_site(d: RunDiagnostic, kernels: list[dict] | None, pm: PathMap,
                    ctx: StaticContext) -> RunDiagnostic:
    """A failure of a rule's code that JAX raised with no kernel line (TPU
    interpret mode's DMA errors land on the test or the pallas_call) moves to
    the engine's finding of that code in the kernel: the run and the rule
    agree. Where it failed stays as related information."""
    if not d.code.startswith("PAL") or d.code[3:4] not in "123":
        return d
    sites = []
    for kernel in kernels or []:
        where = ctx.locate(kernel)
        if where is None:
            continue
        path, (lo, hi) = where
        if pm.display(path) == d.path and lo <= d.span.line <= hi:
            return d  # already inside a kernel the test ran
        sites += [(path, f) for f in ctx.findings(kernel) if f.code == d.code]
    if len(sites) != 1:
        return d  # none, or several: which one failed is not known
    path, f = sites[0]
    return _replace(d, path=pm.display(path), span=f.span,
                    related=(RunRelated(d.path, d.span, "the run failed here"),) + d.related)


def _replace(d: RunDiagnostic, **changes) -> RunDiagnostic:
    from dataclasses import replace

    return replace(d, **changes)
