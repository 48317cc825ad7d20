"""Runs the engine off the event loop and caches one result per document.

`get(snapshot)` returns the Analysis of exactly that text: a cached one when
the version and text match, otherwise it is computed on the analysis worker
thread (concurrent callers for the same version share one computation).

Only the newest version of a document is worth analysing: a request for a
newer version replaces the waiting one of the same document, and a job whose
version is no longer the document's is dropped before it starts. The callers
of a dropped job get `Superseded` (the server turns it into ContentModified
or, for a publish, into nothing: the newer version has its own).
"""
from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import os
import time
from typing import Callable

from pallas_lsp.engine import analyze as engine_analyze
from pallas_lsp.engine.frames import Stopped, stop_when
from pallas_lsp.engine.model import Analysis
from pallas_lsp.lsp import limits
from pallas_lsp.lsp.documents import Snapshot
from pallas_lsp.lsp.limits import Notice
from pallas_lsp.lsp.worker import Superseded, Worker

log = logging.getLogger(__name__)

SETTLE_AFTER_S = 0.03  # after the publish that waits for this analysis
ANALYSIS_LANES = 3  # analyses that may run side by side (threads; the GIL shares them out)
# An edit's analysis starts its expected duration before the debounce ends, so
# that the diagnostics arrive when the pause does; but never in the first
# part of the pause, or fast typing would start (and stop) one per keystroke.
LEAD_SHARE = 0.6  # at most this share of the debounce
LEAD_MARGIN = 1.15  # expected time x this, + LEAD_SLACK_S: a late start costs more than an early one
LEAD_SLACK_S = 0.003


def _settle(analysis: Analysis, replaced: Analysis | None) -> None:
    """Runs on the analysis thread, where `replaced` is then freed."""
    analysis.settle()


Analyzer = Callable[[str, "str | None"], Analysis]

# Developer hooks (documented in docs/configuration.md, "Environment variables"):
# PALLAS_LSP_ANALYZER=module:function replaces the engine (tests, benchmarks of
# the LSP layer alone); PALLAS_LSP_TEST_ANALYSIS_DELAY_MS slows every analysis.
ANALYZER_ENV = "PALLAS_LSP_ANALYZER"
DELAY_ENV = "PALLAS_LSP_TEST_ANALYSIS_DELAY_MS"


def analyzer_from_env() -> Analyzer:
    spec = os.environ.get(ANALYZER_ENV)
    if not spec:
        return engine_analyze
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name or "analyze")
    log.warning("using the analyzer %s instead of the engine", spec)
    return fn


class AnalysisService:
    def __init__(self, analyzer: Analyzer | None = None):
        self.analyzer = analyzer or analyzer_from_env()
        self.workspace = None  # workspace.WorkspaceIndex: the project's other files
        # Lanes: a file whose analysis takes seconds holds one; the others'
        # analyses (and hovers waiting for them) go on in the next.
        self._worker = Worker("pallas-analysis", lanes=ANALYSIS_LANES)
        self._cache: dict[str, tuple[int | None, str, Analysis]] = {}
        self._inflight: dict[tuple[str, int | None], tuple[str, asyncio.Future]] = {}
        self._notices: dict[str, tuple[int | None, str, tuple[Notice, ...]]] = {}
        self.is_current: Callable[[Snapshot], bool] = lambda snap: True  # set by the server
        try:
            self._delay = float(os.environ.get(DELAY_ENV, "0")) / 1000.0
        except ValueError:
            self._delay = 0.0
        self.runs = 0  # number of analyses computed (for tests and benchmarks)
        self._took: dict[str | None, float] = {}  # path -> recent analysis time (s)

    def _engine(self, text: str, path: str | None) -> Analysis:
        try:
            if self.analyzer is engine_analyze and self.workspace is not None:
                # The edit path reads only files already parsed; the rest is
                # parsed in the background (Analysis.missing) and re-checked.
                return self.analyzer(text, path, project=self.workspace.project,
                                     parse_missing=False)
            return self.analyzer(text, path)
        except Exception as exc:  # the engine promises not to raise; never trust it
            log.exception("analysis of %s failed", path)
            return Analysis(path=path, internal_error=f"{type(exc).__name__}: {exc}")

    def _run(self, text: str, path: str | None,
             stale: Callable[[], bool] | None = None) -> tuple[Analysis, tuple[Notice, ...]]:
        """Analyse what can be analysed of `text`, and say what could not. An
        analysis whose version is replaced meanwhile (`stale`) stops early."""
        start = time.perf_counter()
        try:
            with stop_when(stale):
                result = self._run_now(text, path)
        except Stopped:
            raise Superseded() from None
        took = time.perf_counter() - start
        old = self._took.get(path)
        self._took[path] = took if old is None else (old + took) / 2
        if len(self._took) > 1000:  # paths of closed files
            self._took.clear()
        return result

    def lead_s(self, path: str | None, debounce_s: float) -> float:
        """How long before the end of a `debounce_s` pause the analysis of
        `path` should start: its recent duration, with a margin, at most
        LEAD_SHARE of the pause; 0 for a file not analysed yet."""
        took = self._took.get(path)
        if took is None or debounce_s <= 0:
            return 0.0
        return min(took * LEAD_MARGIN + LEAD_SLACK_S, debounce_s * LEAD_SHARE)

    def _run_now(self, text: str, path: str | None) -> tuple[Analysis, tuple[Notice, ...]]:
        if self._delay:
            time.sleep(self._delay)
        self.runs += 1
        name = os.path.basename(path) if path else "this file"
        notices: list[Notice] = []
        text, bad, line = limits.clean_surrogates(text)
        if bad:
            notices.append(limits.surrogate_notice(name, bad, line))
        length = len(text)
        if length > limits.MAX_BYTES:
            text, lines = limits.cut(text, limits.MAX_BYTES)
            notices.append(limits.cut_notice(name, length, lines, limits.too_large(length)))
        analysis = self._engine(text, path)
        error = analysis.internal_error or ""
        if error.startswith("MemoryError") and len(text) > 1:
            del analysis
            gc.collect()
            text, lines = limits.cut(text, len(text) // 2)
            analysis = self._engine(text, path)
            if not analysis.internal_error:
                notices.append(limits.cut_notice(name, length, lines,
                                                 "the whole file did not fit in memory"))
        if analysis.internal_error:
            notices.append(limits.internal_notice(name, analysis.internal_error))
        return analysis, tuple(notices)

    def invalidate(self) -> None:
        """Forget cached results (an import was resolved: results may change)."""
        self._cache.clear()

    def notices(self, snap: Snapshot) -> tuple[Notice, ...]:
        """What could not be analysed in the analysis of `snap`."""
        hit = self._notices.get(snap.uri)
        if hit is not None and hit[0] == snap.version and hit[1] == snap.text:
            return hit[2]
        return ()

    def cached(self, snap: Snapshot) -> Analysis | None:
        hit = self._cache.get(snap.uri)
        if hit is not None and hit[0] == snap.version and hit[1] == snap.text:
            return hit[2]
        return None

    async def get(self, snap: Snapshot) -> Analysis:
        hit = self.cached(snap)
        if hit is not None:
            return hit
        key = (snap.uri, snap.version)
        running = self._inflight.get(key)
        if running is None or running[0] != snap.text:
            stale = lambda: not self.is_current(snap)  # noqa: E731
            job = self._worker.submit(self._run, snap.text, snap.path, stale, key=snap.uri,
                                      stale=stale)
            fut = asyncio.wrap_future(job)
            running = (snap.text, fut)
            self._inflight[key] = running
            fut.add_done_callback(lambda f, key=key, snap=snap: self._finished(key, snap, f))
        # shield: one cancelled caller must not cancel the others' result
        analysis, _ = await asyncio.shield(running[1])
        return analysis

    async def parse_edited(self, path: str) -> None:
        """Parse an edited file's buffer into the project's cache, in turn with
        the analyses. The edit path never parses other files, so without this
        the open files that use a helper would be re-checked against the
        helper's previous text and only corrected after the background parse."""
        if self.workspace is None or self.analyzer is not engine_analyze:
            return
        project = self.workspace.project
        try:
            await asyncio.wrap_future(self._worker.submit(project.source, path,
                                                          key=("source", path)))
        except Superseded:
            pass
        except Exception:  # a parse failure costs the dependents' freshness only
            log.exception("parsing %s for its dependents failed", path)

    def _finished(self, key, snap: Snapshot, fut: asyncio.Future) -> None:
        if self._inflight.get(key, (None, None))[1] is fut:
            del self._inflight[key]
        if fut.cancelled() or fut.exception() is not None:
            return
        old = self._cache.get(snap.uri)
        # keep the newest version only (a late result for an older one is dropped)
        if old is None or old[0] is None or snap.version is None or snap.version >= old[0]:
            analysis, notices = fut.result()
            self._cache[snap.uri] = (snap.version, snap.text, analysis)
            self._notices[snap.uri] = (snap.version, snap.text, notices)
            # What only editor features read (names, API calls) is built after
            # the diagnostics are out, and frees the interpreter it needed;
            # the previous analysis (its AST, every value: 5-10 ms to free) is
            # let go on the analysis thread then too. Not now: the publish
            # waiting for this result would wait for the GIL behind them. Not
            # at all once a newer version came (typing): the next keystroke's
            # analysis would wait behind it.
            replaced = old[2] if old is not None else None
            old = None
            asyncio.get_running_loop().call_later(SETTLE_AFTER_S, lambda: self._worker.submit(
                _settle, analysis, replaced, stale=lambda: not self.is_current(snap)))

    @property
    def superseded(self) -> int:
        """Analyses dropped because a newer version came first."""
        return self._worker.superseded

    def background(self, fn) -> None:
        """Run `fn` on the analysis thread, between analyses (cache warming)."""
        self._worker.submit(fn)

    def forget(self, uri: str) -> None:
        """Analyse `uri` again next time. Its notices stay: they are keyed by
        version and text, and a publish already under way for this version
        reads them after this (dropping them made it publish an empty list)."""
        self._cache.pop(uri, None)

    def close(self, uri: str) -> None:
        self._cache.pop(uri, None)
        self._notices.pop(uri, None)


__all__ = ["AnalysisService", "Superseded"]
