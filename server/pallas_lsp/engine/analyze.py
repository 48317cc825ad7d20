"""Entry point of the engine: source text in, Analysis out."""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

from pallas_lsp.engine import backend, expected_errors, noqa, relevance, reparse
from pallas_lsp.engine.interp import LIBRARY_ROOTS, Interpreter
from pallas_lsp.engine.model import (Analysis, ApiCall, Array, CallArg, Descriptor, Finding,
                                     LaunchSite, Ref, Related, Seq, Span)
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import OperandDecl, join
from pallas_lsp.engine.rules import FLOOR, RULES, expected_reads, syntax_floor
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.source import MAX_BYTES, Source, parse, parses


def analyze(source: str, path: str | None = None, *, project=None,
            parse_missing: bool = True, coverage: bool = False,
            findings_only: bool = False) -> Analysis:
    """Infer what every name in every kernel is and run all rules.

    Never raises on bad input: a syntax error blanks the broken region and
    the rest is analysed; `Analysis.syntax_error` says what happened.

    `project` (project.Project) lets the engine follow the user's helpers and
    kernels in other files; findings located there are in `Analysis.foreign`
    and, when reached from a call in this file, also reported at that call.
    With `parse_missing=False` only files already parsed are read (the
    server's edit path); `Analysis.missing` lists the others.
    A file that can reach no kernel at all (`relevance.inert_file`: nothing
    Pallas named, library imports only) is only checked for syntax errors.
    `findings_only` (the command line): files whose kernels can only be GPU
    ones are parsed but not run; there is nothing to judge in them, and
    names, launches and hover data are not wanted."""
    if len(source) > MAX_BYTES:
        return Analysis(path=path, syntax_error=f"file too large to analyse ({len(source)} bytes)")
    try:
        with _collector_paused():
            return _analyze(source, path, project, parse_missing, coverage, findings_only)
    except Exception as exc:  # an engine bug must cost one file, not the editor session
        import logging  # only here: importing it is 5 % of the command line's start-up
        logging.getLogger(__name__).exception("pallas-lsp engine failed on %s",
                                              path or "<buffer>")
        return Analysis(path=path, internal_error=f"{type(exc).__name__}: {exc}")


_gc_lock = threading.Lock()
_gc_depth = 0  # analyses running now (the server's thread, the index's)
_gc_was_enabled = False


@contextmanager
def _collector_paused():
    """No cyclic garbage collection while a file is analysed. An analysis
    allocates hundreds of thousands of short-lived objects (AST nodes,
    values, scopes), which sets off collections that scan everything the
    process holds (jedi's caches, in the server): 10 % of the time on its
    own, long pauses in the server. Memory is still freed by reference
    counting; the cycles left wait for the next collection after this."""
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


def _analyze(source: str, path: str | None, project, parse_missing: bool,
             coverage: bool, findings_only: bool = False) -> Analysis:
    # A file that can reach no kernel has nothing to analyse, for the editor
    # either (no kernel names to hover, no launches): whether it parses says all.
    if not coverage and relevance.inert_file(source, LIBRARY_ROOTS) and parses(source):
        return Analysis(path=path)
    # The command line parses each text once: a file read earlier as another
    # file's import is analysed on that parse, and its own parse is kept for
    # the files that import it later (Project.shared_source).
    shared = getattr(project, "shared_source", None) if findings_only and path else None
    if shared is not None:
        with shared(path, source) as src:
            return _analyze_source(src, source, path, project, parse_missing, coverage,
                                   findings_only)
    # The editor's path (parse_missing=False) parses again only what an edit touched.
    src = reparse.parse_version(source, path) if path and not parse_missing else parse(source)
    return _analyze_source(src, source, path, project, parse_missing, coverage, findings_only)


def _analyze_source(src: Source, source: str, path: str | None, project, parse_missing: bool,
                    coverage: bool, findings_only: bool) -> Analysis:
    if findings_only and not coverage and backend.gpu_only(src.tree, src.text, LIBRARY_ROOTS):
        return Analysis(path=path, syntax_error=src.syntax_error)
    # The command line: a file that names nothing Pallas and whose imports of
    # the user's modules reach none that does cannot reach a kernel either
    # (most of a library's files); the parse above was for its syntax errors.
    if findings_only and not coverage and project is not None and path \
            and src.syntax_error is None and not relevance.names_pallas(source) \
            and relevance.reaches_no_pallas(src, path, project, LIBRARY_ROOTS):
        return Analysis(path=path)
    interp = Interpreter(src, path, project=project, parse_missing=parse_missing,
                         names=not findings_only)
    interp.run()
    events = backend.tpu_only(interp.events, interp.kernel_backend, interp.file_backend)
    # Kernels a test launches to see them fail are not judged (expected_errors.py).
    expected_errors.mark_called_inside(src.tree, src.text, interp.events.launches)
    ctx = Context(src=src, events=expected_errors.without_expected(events), sites=interp.sites)
    # A kernel launched only under a run-time-only block: trace-time rules judge it.
    trace_ctx = Context(src=src, events=expected_errors.without_expected(events, trace=True),
                        sites=interp.sites) \
        if expected_errors.runtime_only(events) else ctx
    expected_defs = expected_errors.expected_defs(interp.events)
    tables: dict[str, dict] = {"": noqa.noqa_lines(src.text)}
    seen: set[tuple] = set()
    findings: list[Finding] = []
    foreign: dict[str, list[Finding]] = {}
    engine_spans: set = set()  # where the rules reported in this file (the floor defers)
    for rule in RULES:
        rule_ctx = trace_ctx if rule.CODE in expected_errors.TRACE_CODES else ctx
        for f in rule.check(rule_ctx):
            f = _with_related_paths(f)
            fpath = f.span.path if f.span.path and f.span.path != src.path else ""
            if not fpath:
                engine_spans.add(f.span)
                if _keep(f, src, tables[""], seen):
                    findings.append(f)
                continue
            other = _source_of(interp, fpath)
            if other is None:
                continue
            table = tables.get(fpath)
            if table is None:
                table = tables[fpath] = noqa.noqa_lines(other.text)
            site = rule_ctx.via.get(f.span)
            here = Related(site, "a kernel launched in this file reaches it here",
                           path=path) if site is not None and path else None
            # Related spans without a path are in this file: say so there.
            related = tuple(r if r.path else replace(r, path=path) for r in f.related
                            if r.path or path)
            there = replace(f, span=replace(f.span, path=""),
                            related=related + ((here,) if here else ()))
            if _keep(there, other, table, seen, fpath):
                foreign.setdefault(fpath, []).append(there)
            if site is not None:
                mirror = _mirror(f, site, fpath)
                if _keep(mirror, src, tables[""], seen):
                    findings.append(mirror)
    floor_findings = [f for floor in FLOOR for f in floor.check(ctx, interp)]
    if expected_defs and syntax_floor.enabled():
        floor_findings += expected_reads.check(ctx, events)
    for f in floor_findings:
        if f.span not in engine_spans and not expected_errors.expected_floor_finding(
                f.span.line, f.message, expected_defs) and _keep(f, src, tables[""], seen):
            findings.append(f)
    findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
    for items in foreign.values():
        items.sort(key=lambda f: (f.span.line, f.span.col, f.code))
    places = _Places(interp)

    def names():
        items = interp.name_infos()
        return [replace(n, decl=places.decl(n.value.decl)) if getattr(n.value, "decl", None)
                is not None else n for n in items]

    analysis = Analysis(path=path, findings=findings, kernels=list(interp.kernels),
                        syntax_error=src.syntax_error, foreign=foreign, deps=set(interp.deps),
                        missing=set(interp.missing), incomplete=interp.incomplete,
                        launches=places.launches(interp.events.launches))
    from pallas_lsp.engine.rules._tpu import hover_rows
    analysis.lazy["names"] = names
    analysis.lazy["calls"] = lambda: places.calls(interp.api_calls)
    analysis.lazy["launch_notes"] = lambda: [
        (span, text) for span, text in hover_rows(events, ctx.span)
        if not span.path or span.path == src.path]
    analysis.lazy["waits"] = lambda: _waits(events, ctx.span)
    if coverage:
        from pallas_lsp.engine.coverage import measure
        analysis.coverage = measure(src, interp, events)
    if findings_only:
        analysis.lazy.clear()  # nothing for the editor: the AST and the rest go now
    interp.release()
    return analysis


def _waits(events, span_of) -> list[tuple[str, Span, str]]:
    """(kernel name, span, "DMA wait" | "semaphore wait") of every wait the
    engine saw in a kernel, in source order: where a hung run can be stuck."""
    names = {la.kernel_id: la.kernel for la in events.launches if la.kernel_id}
    out: list[tuple[str, Span, str]] = []
    for call in events.dmas:
        if call.in_kernel:
            out.extend((names.get(call.kernel_id, ""), span_of(op.node), "DMA wait")
                       for op in call.ops if op.op.startswith("wait"))
    out.extend((names.get(op.kernel_id, ""), span_of(op.node), "semaphore wait")
               for op in events.sem_ops if op.api == "semaphore_wait")
    return sorted(set(out), key=lambda w: (w[1].path or "", w[1].line, w[1].col, w[0]))


class _Places:
    """AST nodes (of any file the analysis read) -> spans, for the editor:
    where values were declared, where kernels are launched, API calls."""

    def __init__(self, interp: Interpreter):
        self.interp = interp
        self.root = interp.src

    def span(self, node) -> Span | None:
        if node is None or not hasattr(node, "lineno"):
            return None
        src = getattr(node, "_pl_src", None)
        if src is None or src is self.root:
            return self.root.span(node)
        return src.span(node)  # carries its file's path

    def decl(self, decl) -> Span | None:
        if isinstance(decl, OperandDecl):
            nodes = self.interp.operand_nodes.get(id(decl.launch))
            if nodes and decl.index < len(nodes) and nodes[decl.index] is not None:
                return self.span(nodes[decl.index])
            return self.span(decl.fallback)
        return self.span(decl)

    def def_name(self, node) -> Span | None:
        """The name in `def name(...)` (the whole lambda for a lambda)."""
        span = self.span(node)
        name = getattr(node, "name", None)
        if span is None or not name:
            return span
        src = getattr(node, "_pl_src", None) or self.root
        text = src.lines[span.line] if 0 <= span.line < len(src.lines) else ""
        at = text.find(name, span.col + 4)  # after `def `
        if at < 0:
            return span
        return Span(span.line, at, span.line, at + len(name), span.path)

    def launches(self, launches) -> list[LaunchSite]:
        out: list[LaunchSite] = []
        seen: dict[tuple, int] = {}
        for launch in launches:
            site = LaunchSite(api=launch.api, span=self.span(launch.node), kernel=launch.kernel,
                              kernel_span=self.def_name(launch.kernel_node),
                              kernel_def=self.span(launch.kernel_node), bound=launch.bound,
                              backend=launch.backend)
            key = (site.api, site.span, site.kernel_span)
            if key not in seen:
                seen[key] = len(out)
                out.append(site)
            elif site.bound and not out[seen[key]].bound:
                out[seen[key]] = site  # bound in another run: that one says how
        return out

    def calls(self, calls) -> list[ApiCall]:
        merged: dict[int, list] = {}
        for node, name, args, kwargs in calls:
            entry = merged.get(id(node))
            values = [a.value for a in args] + [a.value for a in kwargs.values()]
            if entry is None:
                merged[id(node)] = [node, name, args, list(kwargs.values()), values]
            elif len(entry[4]) == len(values):
                entry[4] = [join(a, b) for a, b in zip(entry[4], values)]
        out = []
        for node, name, args, kwargs, values in merged.values():
            if not any(_kernel_value(v) for v in values):
                continue  # nothing the editor would show (specs, shapes, constants)
            span = self.span(node)
            if span is None or span.path:
                continue
            items = [CallArg(keyword=a.keyword, span=self.span(a.node), value=v)
                     for a, v in zip(list(args) + list(kwargs), values)]
            out.append(ApiCall(api=name, span=span, args=tuple(items)))
        out.sort(key=lambda c: (c.span.line, c.span.col))
        return out


def _kernel_value(v) -> bool:
    if isinstance(v, (Ref, Array, Descriptor)):
        return True
    return isinstance(v, Seq) and any(isinstance(x, (Ref, Array, Descriptor)) for x in v.items)


def _keep(f: Finding, src: Source, table, seen: set, key_path: str = "") -> bool:
    key = (key_path, f.code, f.span)
    if key in seen or noqa.suppressed(f.code, f.span.line, table) or f.span.line in src.blanked:
        return False
    seen.add(key)
    return True


def _with_related_paths(f: Finding) -> Finding:
    """Related spans in other files say so in `Related.path`."""
    if not any(r.span.path for r in f.related):
        return f
    return replace(f, related=tuple(
        replace(r, span=replace(r.span, path=""), path=r.path or r.span.path)
        if r.span.path else r for r in f.related))


def _source_of(interp: Interpreter, path: str) -> Source | None:
    mod = interp.modules.get(path)
    return mod.src if mod is not None else None


def _mirror(f: Finding, site, fpath: str) -> Finding:
    """The finding as seen from the call in this file that leads to it."""
    import os
    where = f"{os.path.basename(fpath)}:{f.span.line + 1}"
    return Finding(
        code=f.code, message=f.message, span=site,
        detail=f"In a helper ({where})" + (f": {f.detail}" if f.detail else ""),
        severity=f.severity,
        related=(Related(replace(f.span, path=""), "the problem is here", path=fpath),)
        + tuple(r for r in f.related if r.path)[:2],
        fixes=())
