"""Engine results -> LSP objects: Finding -> Diagnostic, Fix -> CodeAction.
Every position goes through the document's LineIndex and the negotiated
encoding."""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from pallas_lsp.engine.model import Edit, Fix, Span
from pallas_lsp.lsp.client_features import ClientFeatures
from pallas_lsp.lsp.isolation import isolated
from pallas_lsp.lsp.positions import LineIndex
from pallas_lsp.lsp.selection import Selected
from pallas_lsp.lsp.settings import Settings

SOURCE = "pallas-lsp"
FIX_ALL_KIND = "source.fixAll.pallas-lsp"

LEVELS = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}

from pallas_lsp import catalog as _catalog


def catalog_entry(code: str):
    try:
        return _catalog.get(code)
    except Exception:
        return None


def to_range(span: Span, index: LineIndex, encoding: str) -> types.Range:
    sl, sc = index.to_client(span.line, span.col, encoding)
    el, ec = index.to_client(span.end_line, span.end_col, encoding)
    if (el, ec) < (sl, sc):
        el, ec = sl, sc
    return types.Range(types.Position(sl, sc), types.Position(el, ec))


def code_url(code: str, settings: Settings) -> str | None:
    """Where to read about `code`: the configured URL template, else a link
    the catalog provides, else the line of the installed jax that raises the
    same error (file URI with a #L<line> fragment, which editors open at the
    line)."""
    if settings.code_description_url:
        return settings.code_description_url.replace("{code}", code)
    return _default_code_url(code)


# code -> (path, line) of its raise site in the installed jax, found by a child.
_LOCATED: dict[str, tuple[str, int] | None] = {}
_LOCATE = ("import json\n"
           "from pallas_lsp import catalog\n"
           "print(json.dumps({c: catalog.find_in_installed_jax(e) "
           "for c, e in catalog.load().items()}))")


def warm_code_urls() -> None:
    """Find every code's raise site in the installed jax, in a child process:
    that parses big jax modules, and a parse holds the GIL for tens of
    milliseconds at a time (a hover would wait). It is the server's own
    Python, so isolated mode (`-I`) and a private working directory: the
    child never imports from the workspace. In-process if the child fails."""
    try:
        out = subprocess.run(**isolated(sys.executable, "-I", "-c", _LOCATE), capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        for code, where in json.loads(out.stdout or "{}").items():
            _LOCATED[code] = (str(where[0]), int(where[1])) if where else None
    except (OSError, subprocess.SubprocessError, ValueError, TypeError, IndexError):
        pass
    try:
        for code in _catalog.load():
            _default_code_url(code)
    except Exception:
        pass


@functools.lru_cache(maxsize=256)
def _default_code_url(code: str) -> str | None:
    entry = catalog_entry(code)
    if entry is None:
        return None
    for attr in ("url", "doc_url", "docs_url"):
        url = getattr(entry, attr, None)
        if isinstance(url, str) and url:
            return url
    try:
        found = _LOCATED[code] if code in _LOCATED else _catalog.find_in_installed_jax(entry)
    except Exception:
        found = None
    if found is None:
        return None
    return f"{Path(found[0]).as_uri()}#L{found[1]}"


def to_diagnostic(sel: Selected, uri: str, index: LineIndex, feats: ClientFeatures,
                  settings: Settings) -> types.Diagnostic:
    f = sel.finding
    message = f.text  # JAX's text — ours
    related = None
    if f.related:
        if feats.related_information:
            related = [
                types.DiagnosticRelatedInformation(
                    location=types.Location(uri, to_range(r.span, index, feats.encoding))
                    if r.path is None else
                    # Another file: its line is exact; the column is the line start.
                    types.Location(Path(r.path).as_uri(), types.Range(
                        types.Position(r.span.line, 0), types.Position(r.span.line, 0))),
                    message=r.message)
                for r in f.related
            ]
        else:  # the client would drop them: keep the information in the text
            message += "".join(
                f"\n{Path(r.path).name + ':' if r.path else 'line '}{r.span.line + 1}: {r.message}"
                for r in f.related)
    description = None
    if feats.code_description:
        url = code_url(f.code, settings)
        if url:
            description = types.CodeDescription(href=url)
    return types.Diagnostic(
        range=to_range(f.span, index, feats.encoding),
        message=message,
        severity=LEVELS.get(sel.level, types.DiagnosticSeverity.Error),
        code=f.code,
        code_description=description,
        source=SOURCE,
        related_information=related,
    )


def to_text_edits(edits, index: LineIndex, encoding: str) -> list[types.TextEdit]:
    return [types.TextEdit(range=to_range(e.span, index, encoding), new_text=e.new_text)
            for e in edits]


def workspace_edit(uri: str, version: int | None, edits: list[types.TextEdit],
                   feats: ClientFeatures) -> types.WorkspaceEdit:
    if feats.document_changes:
        return types.WorkspaceEdit(document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits)
        ])
    return types.WorkspaceEdit(changes={uri: edits})


def fix_action(fix: Fix, diagnostic: types.Diagnostic, uri: str, version: int | None,
               index: LineIndex, feats: ClientFeatures) -> types.CodeAction:
    return types.CodeAction(
        title=fix.title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        is_preferred=True if fix.safe else None,
        edit=workspace_edit(uri, version, to_text_edits(fix.edits, index, feats.encoding), feats),
    )


def _overlap(a: Edit, b: Edit) -> bool:
    a0, a1 = (a.span.line, a.span.col), (a.span.end_line, a.span.end_col)
    b0, b1 = (b.span.line, b.span.col), (b.span.end_line, b.span.end_col)
    if a0 == a1 and b0 == b1:
        return a0 == b0  # two insertions at one place: order would be ambiguous
    return a0 < b1 and b0 < a1 or (a0 == a1 and b0 < a0 < b1) or (b0 == b1 and a0 < b0 < a1)


def fix_all_edits(selected: list[Selected]) -> list[Edit]:
    """The edits of every safe fix (the first safe fix of each finding), in
    finding order, skipping a fix whose edits would overlap one already taken."""
    edits: list[Edit] = []
    for sel in selected:
        for fix in sel.finding.fixes:
            if fix.safe:
                if not any(_overlap(e, taken) for e in fix.edits for taken in edits):
                    edits.extend(fix.edits)
                break
    return sorted(edits, key=lambda e: (e.span.line, e.span.col))
