"""The requests that show what the engine knows across a file: semantic
tokens, go to the spec, the kernels' launches, the kernel outline and
signature help. Registered on the server by `register` (server.py stays a
list of features); the work is in semantic_tokens, goto and signature_help.
"""
from __future__ import annotations

import asyncio
import logging
import os

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from pallas_lsp.lsp import goto, notebooks, semantic_tokens as st, signature_help as sig
from pallas_lsp.lsp.analyses import Superseded

log = logging.getLogger(__name__)

MAX_OTHER_DOCUMENTS = 32  # open documents consulted for launches of a kernel
WORKSPACE_SYMBOL_WAIT_S = 3.0


async def _current(ls, uri: str, what: str):
    """(snapshot, analysis) of the current version; ContentModified when the
    document changes meanwhile (the client asks again)."""
    await asyncio.sleep(0)  # a $/cancelRequest already read cancels us here
    got = await ls.analysis_for(uri)
    if got is None:
        return None
    snap, analysis = got
    if not ls.is_current(snap):
        raise JsonRpcContentModified(f"the document changed while computing {what}")
    return snap, analysis


async def _at_cursor(ls, params, what: str):
    """(snapshot, analysis, cursor in code points) for a positional request."""
    got = await _current(ls, params.text_document.uri, what)
    if got is None:
        return None
    snap, analysis = got
    pos = snap.index.from_client(params.position.line, params.position.character,
                                 ls.feats.encoding)
    return snap, analysis, pos


def _locator(ls) -> goto.Locator:
    project = ls.project_index.project
    return goto.Locator(ls.feats.encoding, project.text)


async def _launches(ls, snap, analysis) -> list[goto.Launched]:
    """Launches seen by this document's analysis, the other open documents'
    and, for kernels defined here, the workspace's closed callers'."""
    found = goto.launches_of(analysis, snap.path or "")
    for uri in ls.documents.uris()[:MAX_OTHER_DOCUMENTS]:
        doc = ls.documents.get(uri)
        if uri == snap.uri or doc is None or not doc.path or ls.notebooks.by_program(uri):
            continue  # (a notebook's program: its lines are not the file's)
        other = doc.snapshot()
        result = ls.analyses.cached(other)
        if result is None:
            try:
                result = await ls.analyses.get(other)
            except Superseded:
                continue
        found += goto.launches_of(result, doc.path)
    if snap.path:
        found += ls.project_index.launches_into(snap.path)
    return found


def _hierarchical_symbols(ls) -> bool:
    caps = ls.client_capabilities
    ds = caps.text_document.document_symbol if caps and caps.text_document else None
    return bool(ds and ds.hierarchical_document_symbol_support)


# (method, params, a result like ours): the first request of each kind pays
# for cattrs building its (un)structuring hooks, several milliseconds each.
_WARM = (
    (types.TEXT_DOCUMENT_HOVER, {"textDocument": {"uri": "file:///w.py"},
                                 "position": {"line": 0, "character": 0}},
     types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=""),
                 range=types.Range(types.Position(0, 0), types.Position(0, 1)))),
    (types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, {"textDocument": {"uri": "file:///w.py"}},
     types.SemanticTokens(data=[0, 0, 1, 0, 0], result_id="0")),
    (types.TEXT_DOCUMENT_SIGNATURE_HELP, {"textDocument": {"uri": "file:///w.py"},
                                          "position": {"line": 0, "character": 0}},
     types.SignatureHelp(signatures=[types.SignatureInformation(
         label="f(a)", documentation=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                         value=""),
         parameters=[types.ParameterInformation(label=(2, 3), documentation="")])])),
    (types.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": {"uri": "file:///w.py"}, "range": {
        "start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}},
     [types.InlayHint(position=types.Position(0, 0), label=":", kind=types.InlayHintKind.Type)]),
)


_SPAN = types.Range(types.Position(0, 0), types.Position(0, 1))
_WARM_IN = (
    (types.TEXT_DOCUMENT_DID_OPEN, {"textDocument": {
        "uri": "file:///w.py", "languageId": "python", "version": 1, "text": ""}}),
    (types.TEXT_DOCUMENT_DID_CHANGE, {"textDocument": {"uri": "file:///w.py", "version": 2},
                                      "contentChanges": [{"range": {
                                          "start": {"line": 0, "character": 0},
                                          "end": {"line": 0, "character": 0}}, "text": ""}]}),
)
_WARM_OUT = types.PublishDiagnosticsParams(uri="file:///w.py", version=1, diagnostics=[
    types.Diagnostic(range=_SPAN, message="", severity=types.DiagnosticSeverity.Error,
                     code="PAL000", code_description=types.CodeDescription(href="https://w"),
                     source="pallas-lsp", related_information=[types.DiagnosticRelatedInformation(
                         location=types.Location("file:///w.py", _SPAN), message="")])])


def warm(ls) -> None:
    """Build the converter's hooks for the requests editors send all the
    time, before the first of them arrives (after the first diagnostics)."""
    from lsprotocol.types import METHOD_TO_TYPES
    conv = ls.protocol._converter
    for method, params, result in _WARM:
        try:
            request, response, params_type, _ = METHOD_TO_TYPES[method]
            conv.structure({"jsonrpc": "2.0", "id": 0, "method": method, "params": params},
                           request)
            conv.unstructure(response(id=0, result=result))
        except Exception as exc:  # only a warm-up
            log.debug("warming %s failed: %s", method, exc)
    try:  # the notifications of every open and edit, and the diagnostics
        for method, params in _WARM_IN:
            conv.structure({"jsonrpc": "2.0", "method": method, "params": params},
                           METHOD_TO_TYPES[method][0])
        conv.unstructure(types.PublishDiagnosticsNotification(params=_WARM_OUT))
    except Exception as exc:
        log.debug("warming the notifications failed: %s", exc)


def register(server) -> None:
    results = st.ResultCache()
    server.semantic_results = results

    async def _tokens(ls, uri: str, first: int = 0, last: int | None = None):
        """The encoded tokens of the current version, or None (turned off,
        no such document)."""
        if not ls.settings.semantic_tokens_enable:
            return None
        got = await _current(ls, uri, "semantic tokens")
        if got is None:
            return None
        snap, analysis = got
        return st.encode(st.tokens(analysis.names, snap.index, ls.feats.encoding, first, last))

    # ---------------------------------------------------------- semantic tokens

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, st.LEGEND)
    @notebooks.in_cells(notebooks.TOKENS)
    async def semantic_tokens_full(ls, params: types.SemanticTokensParams):
        uri = params.text_document.uri
        data = await _tokens(ls, uri)
        if data is None or (not data and not results.had_tokens(uri)):
            return None  # nothing of ours: other providers' tokens win (VS Code)
        return types.SemanticTokens(data=data, result_id=results.store(uri, data))

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, st.LEGEND)
    @notebooks.in_cells(notebooks.TOKENS_DELTA)
    async def semantic_tokens_delta(ls, params: types.SemanticTokensDeltaParams):
        uri = params.text_document.uri
        data = await _tokens(ls, uri)
        if data is None:
            return None
        old = results.previous(uri, params.previous_result_id)
        result_id = results.store(uri, data)
        if old is None:
            return types.SemanticTokens(data=data, result_id=result_id)
        return types.SemanticTokensDelta(edits=st.delta(old, data), result_id=result_id)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, st.LEGEND)
    @notebooks.in_cells(notebooks.TOKENS_RANGE)
    async def semantic_tokens_range(ls, params: types.SemanticTokensRangeParams):
        data = await _tokens(ls, params.text_document.uri, params.range.start.line,
                             params.range.end.line)
        return types.SemanticTokens(data=data) if data is not None else None

    # ---------------------------------------------------------- go to the spec / launches

    @server.feature(types.TEXT_DOCUMENT_TYPE_DEFINITION)
    async def type_definition(ls, params: types.TypeDefinitionParams):
        got = await _at_cursor(ls, params, "the type definition")
        if got is None:
            return None
        snap, analysis, pos = got
        return goto.type_definition(analysis, snap.path or "", pos.line, pos.col, _locator(ls))

    @server.feature(types.TEXT_DOCUMENT_IMPLEMENTATION)
    async def implementation(ls, params: types.ImplementationParams):
        got = await _at_cursor(ls, params, "the launches")
        if got is None or not got[0].path:
            return None
        snap, analysis, pos = got
        found = await _launches(ls, snap, analysis)
        return goto.implementation(found, snap.path, pos.line, pos.col, _locator(ls))

    # ---------------------------------------------------------- outline

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls, params: types.DocumentSymbolParams):
        got = await _current(ls, params.text_document.uri, "the outline")
        if got is None:
            return None
        snap, analysis = got
        if not snap.path:
            return []
        found = await _launches(ls, snap, analysis)
        return goto.document_symbols(analysis, found, snap.path, _locator(ls),
                                     _hierarchical_symbols(ls))

    @server.feature(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(ls, params: types.WorkspaceSymbolParams):
        await asyncio.sleep(0)
        index = ls.project_index
        index.scan_kernels()
        await asyncio.to_thread(index.kernels_scanned.wait, WORKSPACE_SYMBOL_WAIT_S)
        found: list[goto.Launched] = []
        for uri in ls.documents.uris():
            doc = ls.documents.get(uri)
            if doc is None or not doc.path or ls.notebooks.by_program(uri):
                continue
            try:
                result = await ls.analyses.get(doc.snapshot())
            except Superseded:
                continue
            found += goto.launches_of(result, doc.path)
        found += index.kernel_launches()
        return goto.workspace_symbols(found, params.query, _locator(ls))

    # ---------------------------------------------------------- signature help

    @server.feature(types.TEXT_DOCUMENT_SIGNATURE_HELP, types.SignatureHelpOptions(
        trigger_characters=["(", ","], retrigger_characters=[","]))
    @notebooks.in_cells(notebooks.POSITIONAL)
    async def signature_help(ls, params: types.SignatureHelpParams):
        uri = params.text_document.uri
        await asyncio.sleep(0)
        try:
            got = await ls.analysis_for(uri)
        except JsonRpcContentModified:
            return None  # typed on meanwhile: the client asks again
        if got is None:
            return None
        snap, analysis = got
        pos = snap.index.from_client(params.position.line, params.position.character,
                                     ls.feats.encoding)
        try:
            return sig.signature_help(snap.text, snap.index, pos.line, pos.col, analysis,
                                      ls.api_docs, ls.feats.markdown_hover)
        except Exception:  # a convenience: never an error popup
            log.exception("signature help in %s failed", os.path.basename(snap.path or uri))
            return None
