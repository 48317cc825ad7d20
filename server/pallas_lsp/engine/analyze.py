"""Entry point of the engine: source text in, Analysis out."""
from __future__ import annotations

import logging
from dataclasses import replace

from pallas_lsp.engine import backend, noqa
from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.model import Analysis, Finding, Related
from pallas_lsp.engine.rules import RULES
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.source import Source, parse

log = logging.getLogger(__name__)

# Files bigger than this are not analysed (generated code); the caller is told.
MAX_BYTES = 5_000_000


def analyze(source: str, path: str | None = None, *, project=None,
            parse_missing: bool = True, coverage: bool = False) -> Analysis:
    """Infer what every name in every kernel is and run all rules.

    Never raises on bad input: a syntax error blanks the broken region and
    the rest is analysed; `Analysis.syntax_error` says what happened.

    `project` (project.Project) lets the engine follow the user's helpers and
    kernels in other files; findings located there are in `Analysis.foreign`
    and, when reached from a call in this file, also reported at that call.
    With `parse_missing=False` only files already parsed are read (the
    server's edit path); `Analysis.missing` lists the others."""
    if len(source) > MAX_BYTES:
        return Analysis(path=path, syntax_error=f"file too large to analyse ({len(source)} bytes)")
    try:
        return _analyze(source, path, project, parse_missing, coverage)
    except Exception as exc:  # an engine bug must cost one file, not the editor session
        log.exception("pallas-lsp engine failed on %s", path or "<buffer>")
        return Analysis(path=path, internal_error=f"{type(exc).__name__}: {exc}")


def _analyze(source: str, path: str | None, project, parse_missing: bool,
             coverage: bool) -> Analysis:
    src = parse(source)
    interp = Interpreter(src, path, project=project, parse_missing=parse_missing)
    interp.run()
    events = backend.tpu_only(interp.events, interp.kernel_backend, interp.file_backend)
    ctx = Context(src=src, events=events, sites=interp.sites)
    tables: dict[str, dict] = {"": noqa.noqa_lines(src.text)}
    seen: set[tuple] = set()
    findings: list[Finding] = []
    foreign: dict[str, list[Finding]] = {}
    for rule in RULES:
        for f in rule.check(ctx):
            f = _with_related_paths(f)
            fpath = f.span.path if f.span.path and f.span.path != src.path else ""
            if not fpath:
                if _keep(f, src, tables[""], seen):
                    findings.append(f)
                continue
            other = _source_of(interp, fpath)
            if other is None:
                continue
            table = tables.get(fpath)
            if table is None:
                table = tables[fpath] = noqa.noqa_lines(other.text)
            site = ctx.via.get(f.span)
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
    findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
    for items in foreign.values():
        items.sort(key=lambda f: (f.span.line, f.span.col, f.code))
    names = sorted(interp.names.values(), key=lambda n: (n.span.line, n.span.col))
    analysis = Analysis(path=path, findings=findings, names=names, kernels=list(interp.kernels),
                        syntax_error=src.syntax_error, foreign=foreign, deps=set(interp.deps),
                        missing=set(interp.missing), incomplete=interp.incomplete)
    from pallas_lsp.engine.rules._tpu import hover_rows
    analysis.launch_notes = [(span, text) for span, text in hover_rows(events, ctx.span)
                             if not span.path or span.path == src.path]
    if coverage:
        from pallas_lsp.engine.coverage import measure
        analysis.coverage = measure(src, interp, events)
    return analysis


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
