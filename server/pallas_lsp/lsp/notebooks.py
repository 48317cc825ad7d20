"""Notebooks in the editor (LSP 3.17 notebook document sync).

A notebook's Python code cells arrive as their own text documents. They are
analysed in order as one program (engine/cells.py: magics neutralised, a
broken cell contained), kept in the document store as one more document
under a URI of its own (`program_uri`), so the debounce, the per-version
freshness and the cross-file bookkeeping work as for a file. Its version is
a counter of ours: a cell's text may change without the notebook's version.

Between cells and that program sits one mapping layer: a request on a cell
URI (hover, code actions, inlay hints, semantic tokens) is rewritten into the
program's coordinates, answered by the usual handler, and its result mapped
back into the cell (`in_cells`); the program's diagnostics are split per
cell (`View.split`). The program's lines are the cells' lines, columns
unchanged (cells.python_of keeps them), so a position maps through code
points: the cell's own text converts client units, the program's text the
rest.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from pallas_lsp.engine.cells import PY_LANGS, Program, cells_program
from pallas_lsp.lsp import semantic_tokens
from pallas_lsp.lsp.documents import Document
from pallas_lsp.lsp.positions import LineIndex

log = logging.getLogger(__name__)

NOTEBOOK_TYPE = "jupyter-notebook"
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithCells(
        notebook=NOTEBOOK_TYPE, cells=[types.NotebookCellLanguage(language="python")])],
    save=True)

_PROGRAM = "pallas-lsp-notebook"  # marks the program's URI (a fragment: the path stays)


def program_uri(notebook_uri: str) -> str:
    return f"{notebook_uri}{'&' if '#' in notebook_uri else '#'}{_PROGRAM}"


def is_notebook_json(uri: str, text: str) -> bool:
    """A text document named `*.ipynb` that holds the notebook's JSON: never
    Python (the notebook itself comes through notebook sync). One that holds
    Python is a client's own join of the cells, sent under the notebook's
    name (jupyterlab-lsp does so), and is analysed as a file."""
    try:
        path = urlsplit(uri).path
    except ValueError:
        return False
    if not path.lower().endswith(".ipynb") or uri.endswith(_PROGRAM):
        return False
    # nbformat's JSON is an object with "cells"; Python cells joined never
    # start with `{` and name "cells" in the same text by chance alone
    return text.lstrip().startswith("{") and '"cells"' in text


# ---------------------------------------------------------------- the program and its cells


@dataclass(frozen=True)
class View:
    """One version of a notebook's program with the cells it came from."""

    generation: int  # the program document's version
    program: Program
    uris: tuple[str, ...]  # program.cells[i] is the cell document uris[i]
    indexes: dict[str, LineIndex]  # each cell's text at this version
    versions: dict[str, int | None]

    @functools.cached_property
    def index(self) -> LineIndex:
        """The program's line table: built when a result is mapped, not at
        every keystroke (a few ms for a thousand-line notebook)."""
        return LineIndex(self.program.text)

    @functools.cached_property
    def _order(self) -> dict[str, int]:
        return {uri: i for i, uri in enumerate(self.uris)}

    @functools.cached_property
    def _by_index(self) -> dict[int, str]:
        return {cell.index: uri for cell, uri in zip(self.program.cells, self.uris)}

    def cell(self, uri: str):
        """The program's cell of a code cell's URI (None: not a code cell)."""
        i = self._order.get(uri)
        return self.program.cells[i] if i is not None else None

    def lines_of(self, uri: str) -> tuple[int, int]:
        """[first, last] program lines of a cell."""
        cell = self.cell(uri)
        return cell.start, cell.end - 1

    def to_program(self, uri: str, pos: types.Position, encoding: str) -> types.Position:
        """A position in a cell (client units) -> the program's."""
        cell = self.cell(uri)
        p = self.indexes[uri].from_client(pos.line, pos.character, encoding)
        line = cell.start + min(p.line, len(cell.lines) - 1)
        return types.Position(*self.index.to_client(line, p.col, encoding))

    def range_to_program(self, uri: str, rng: types.Range, encoding: str) -> types.Range:
        return types.Range(self.to_program(uri, rng.start, encoding),
                           self.to_program(uri, rng.end, encoding))

    def to_cell(self, pos: types.Position, encoding: str) -> tuple[str, types.Position] | None:
        """A program position -> (cell URI, position in it); None outside the cells."""
        p = self.index.from_client(pos.line, pos.character, encoding)
        cell = self.program.cell_at(p.line)
        if cell is None:
            return None
        uri = self._by_index[cell.index]
        line, character = self.indexes[uri].to_client(p.line - cell.start, p.col, encoding)
        return uri, types.Position(line, character)

    def range_to_cell(self, rng: types.Range, encoding: str, strict: bool = False
                      ) -> tuple[str, types.Range] | None:
        """A program range in one cell. Across cells: None with `strict`
        (an edit), else cut at the end of its first line."""
        start = self.to_cell(rng.start, encoding)
        if start is None:
            return None
        end = self.to_cell(rng.end, encoding)
        if end is None or end[0] != start[0]:
            if strict:
                return None
            line = start[1].line
            text = self.indexes[start[0]].line_text(line)
            end = start[0], types.Position(
                line, self.indexes[start[0]].to_client(line, len(text), encoding)[1])
        return start[0], types.Range(start[1], end[1])

    def diagnostic_to_cell(self, diag: types.Diagnostic, encoding: str, uri: str
                           ) -> tuple[str, types.Diagnostic] | None:
        """A diagnostic of the program (`uri`) in its cell, related locations
        of the program in theirs, program lines in the text named by cell."""
        moved = self.range_to_cell(diag.range, encoding)
        if moved is None:
            return None
        related = None
        if diag.related_information is not None:
            related = []
            for r in diag.related_information:
                if r.location.uri == uri:
                    where = self.range_to_cell(r.location.range, encoding)
                    if where is None:
                        continue
                    r = attrs.evolve(r, location=types.Location(*where))
                related.append(attrs.evolve(r, message=self.program.relabel(r.message)))
        return moved[0], attrs.evolve(diag, range=moved[1], related_information=related,
                                      message=self.program.relabel(diag.message))

    def split(self, diagnostics: list[types.Diagnostic], encoding: str, uri: str
              ) -> dict[str, list[types.Diagnostic]]:
        """Per cell URI (every code cell, maybe empty) its diagnostics."""
        out: dict[str, list[types.Diagnostic]] = {u: [] for u in self.uris}
        for diag in diagnostics:
            moved = self.diagnostic_to_cell(diag, encoding, uri)
            if moved is not None:
                out[moved[0]].append(moved[1])
        return out

    def edit_to_cells(self, edit: types.WorkspaceEdit | None, uri: str, encoding: str
                      ) -> types.WorkspaceEdit | None:
        """The program's text edits as edits of the cells they fall in; None
        when one would cross cells (never half a fix)."""
        if edit is None:
            return None
        groups: dict[str, list[types.TextEdit]] = {}
        changes = list((edit.changes or {}).items())
        for change in edit.document_changes or ():
            changes.append((change.text_document.uri, change.edits))
        others: dict[str, list] = {}
        for target, edits in changes:
            if target != uri:
                others.setdefault(target, []).extend(edits)
                continue
            for e in edits:
                moved = self.range_to_cell(e.range, encoding, strict=True)
                if moved is None:
                    return None
                groups.setdefault(moved[0], []).append(attrs.evolve(e, range=moved[1]))
        if edit.document_changes is not None:
            return types.WorkspaceEdit(document_changes=[
                types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=cell, version=self.versions.get(cell)), edits=edits)
                for cell, edits in groups.items()])
        return types.WorkspaceEdit(changes={**others, **groups})


@dataclass
class Notebook:
    uri: str
    notebook_type: str
    version: int
    cells: list[types.NotebookCell]
    docs: dict[str, Document]  # the synced cells' text documents
    generation: int = 0
    view: View | None = None
    published: set[str] = field(default_factory=set)  # cells shown diagnostics
    _python: dict = field(default_factory=dict)  # each cell's Python (cells_program's cache)

    @property
    def program_uri(self) -> str:
        return program_uri(self.uri)

    def code_cells(self) -> list[str]:
        """The URIs of the Python code cells, in order."""
        out: dict[str, None] = {}  # (a cell listed twice counts once)
        for cell in self.cells:
            doc = self.docs.get(cell.document)
            if cell.kind == types.NotebookCellKind.Code and doc is not None \
                    and (doc.language_id or "python").lower() in PY_LANGS:
                out.setdefault(cell.document)
        return list(out)

    def rebuild(self) -> View:
        self.generation += 1
        uris = self.code_cells()
        docs = [self.docs[u] for u in uris]
        place: dict[str, int] = {}  # "cell N" counts every cell, as the CLI does
        for i, cell in enumerate(self.cells):
            place.setdefault(cell.document, i)
        program = cells_program(((place[u], d.text) for u, d in zip(uris, docs)), self._python)
        # a keystroke re-reads its own cell only; what the cells no longer hold goes
        self._python = {key: self._python[key] for key in ("\n".join(c.lines)
                                                          for c in program.cells)}
        self.view = View(self.generation, program, tuple(uris),
                         {u: d.index for u, d in zip(uris, docs)},
                         {u: d.version for u, d in zip(uris, docs)})
        return self.view

    def publications(self, view: View, diagnostics: list[types.Diagnostic], encoding: str
                     ) -> list[types.PublishDiagnosticsParams]:
        """What to publish for this version: every code cell's list, and an
        empty one for a cell shown diagnostics that is no longer code."""
        per_cell = view.split(diagnostics, encoding, self.program_uri)
        out = [types.PublishDiagnosticsParams(uri=u, diagnostics=d, version=view.versions[u])
               for u, d in per_cell.items() if d or u in self.published]
        out += [types.PublishDiagnosticsParams(uri=u, diagnostics=[])
                for u in self.published - set(per_cell)]
        self.published = {u for u, d in per_cell.items() if d}
        return out


class NotebookStore:
    """The open notebooks, their cells, and which notebook a cell is in."""

    def __init__(self) -> None:
        self._notebooks: dict[str, Notebook] = {}
        self._by_program: dict[str, Notebook] = {}
        self._owner: dict[str, str] = {}  # cell URI -> notebook URI

    def open(self, params: types.DidOpenNotebookDocumentParams) -> Notebook:
        nb = params.notebook_document
        self.close(nb.uri)
        notebook = Notebook(nb.uri, nb.notebook_type, nb.version, list(nb.cells), {})
        for item in params.cell_text_documents:
            self._add_cell(notebook, item)
        self._notebooks[nb.uri] = notebook
        self._by_program[notebook.program_uri] = notebook
        notebook.rebuild()
        return notebook

    def change(self, params: types.DidChangeNotebookDocumentParams, encoding: str
               ) -> tuple[Notebook | None, list[str]]:
        """Apply one notebookDocument/didChange; (the notebook, the cell URIs
        it closed)."""
        notebook = self._notebooks.get(params.notebook_document.uri)
        if notebook is None:
            log.info("a change to %s, which is not open: ignored", params.notebook_document.uri)
            return None, []
        notebook.version = params.notebook_document.version
        closed: list[str] = []
        cells = params.change.cells
        if cells is not None:
            if cells.structure is not None:
                array = cells.structure.array
                start = min(array.start, len(notebook.cells))
                notebook.cells[start:start + array.delete_count] = list(array.cells or ())
                for item in cells.structure.did_open or ():
                    self._add_cell(notebook, item)
                for ident in cells.structure.did_close or ():
                    notebook.docs.pop(ident.uri, None)
                    self._owner.pop(ident.uri, None)
                    closed.append(ident.uri)
            kinds = {c.document: c.kind for c in cells.data or ()}
            if kinds:
                notebook.cells = [attrs.evolve(c, kind=kinds[c.document])
                                  if c.document in kinds else c for c in notebook.cells]
            for content in cells.text_content or ():
                doc = notebook.docs.get(content.document.uri)
                if doc is None:
                    log.info("a change to cell %s, not in %s: ignored", content.document.uri,
                             notebook.uri)
                    continue
                for change in content.changes:
                    doc.apply(change, encoding)
                doc.version = content.document.version
        notebook.rebuild()
        return notebook, closed

    def close(self, uri: str) -> Notebook | None:
        notebook = self._notebooks.pop(uri, None)
        if notebook is not None:
            self._by_program.pop(notebook.program_uri, None)
            for cell in notebook.docs:
                self._owner.pop(cell, None)
        return notebook

    def _add_cell(self, notebook: Notebook, item: types.TextDocumentItem) -> None:
        notebook.docs[item.uri] = Document(item.uri, item.text, item.version, item.language_id)
        self._owner[item.uri] = notebook.uri

    def get(self, uri: str) -> Notebook | None:
        return self._notebooks.get(uri)

    def by_program(self, uri: str) -> Notebook | None:
        return self._by_program.get(uri)

    def of_cell(self, uri: str) -> Notebook | None:
        owner = self._owner.get(uri)
        return self._notebooks.get(owner) if owner is not None else None

    def cell_document(self, uri: str) -> Document | None:
        notebook = self.of_cell(uri)
        return notebook.docs.get(uri) if notebook is not None else None

    def programs(self) -> list[str]:
        return list(self._by_program)

    def relocate(self, diagnostics: list[types.Diagnostic], encoding: str
                 ) -> list[types.Diagnostic]:
        """Another file's diagnostics whose related locations are in an open
        notebook (a launch in a cell: the program's line) point into the cell."""
        for diag in diagnostics if self._notebooks else ():
            for r in diag.related_information or ():
                notebook = self._notebooks.get(r.location.uri)
                if notebook is not None and notebook.view is not None:
                    moved = notebook.view.range_to_cell(r.location.range, encoding)
                    if moved is not None:
                        r.location = types.Location(*moved)
        return diagnostics


# ---------------------------------------------------------------- requests on a cell


@dataclass(frozen=True)
class Call:
    """One request on a cell: where it is, and what it asked."""

    ls: object  # the server
    params: object  # as the client sent them
    view: View
    uri: str  # the cell's
    program: str  # the program document's URI
    encoding: str


class Route:
    """How one kind of request goes from a cell to the program and back."""

    def params(self, params, call: Call):
        return attrs.evolve(params, text_document=types.TextDocumentIdentifier(uri=call.program))

    def result(self, result, call: Call):
        return result


class _Positional(Route):
    """A request at a position whose answer has none (signature help)."""

    def params(self, params, call):
        return attrs.evolve(super().params(params, call), position=call.view.to_program(
            call.uri, params.position, call.encoding))


class _Hover(_Positional):
    def result(self, result, call):
        if result is None:
            return None
        rng = None
        if result.range is not None:
            moved = call.view.range_to_cell(result.range, call.encoding)
            rng = moved[1] if moved is not None and moved[0] == call.uri else None
        contents = result.contents
        if isinstance(contents, types.MarkupContent):
            contents = attrs.evolve(contents, value=call.view.program.relabel(contents.value))
        return attrs.evolve(result, contents=contents, range=rng)


class _Ranged(Route):
    def params(self, params, call):
        return attrs.evolve(super().params(params, call), range=call.view.range_to_program(
            call.uri, params.range, call.encoding))


class _CodeActions(_Ranged):
    def params(self, params, call):
        params = super().params(params, call)
        context = params.context
        if context is not None and context.diagnostics:
            context = attrs.evolve(context, diagnostics=[
                attrs.evolve(d, range=call.view.range_to_program(call.uri, d.range,
                                                                 call.encoding))
                for d in context.diagnostics])
        return attrs.evolve(params, context=context)

    def result(self, result, call):
        if not result:
            return result
        view, out = call.view, []
        for action in result:
            if not isinstance(action, types.CodeAction):
                continue  # (commands: none today)
            edit = view.edit_to_cells(action.edit, call.program, call.encoding)
            if action.edit is not None and edit is None:
                continue
            diagnostics = None
            if action.diagnostics is not None:
                diagnostics = [moved[1] for d in action.diagnostics
                               if (moved := view.diagnostic_to_cell(d, call.encoding,
                                                                    call.program))]
            out.append(attrs.evolve(action, edit=edit, diagnostics=diagnostics))
        return out


class _InlayHints(_Ranged):
    def result(self, result, call):
        if not result:
            return result
        out = []
        for hint in result:
            moved = call.view.to_cell(hint.position, call.encoding)
            if moved is not None and moved[0] == call.uri:
                out.append(attrs.evolve(hint, position=moved[1]))
        return out


class _Tokens(Route):
    """Semantic tokens: the program's on the cell's lines, re-encoded from
    the cell's first line. Full and delta results are remembered per cell
    (a delta is the difference from the cell's last result); the program
    is always asked in full."""

    def __init__(self, kind: str):
        self.kind = kind  # "full", "delta" or "range"

    def params(self, params, call):
        params = super().params(params, call)
        if self.kind == "range":
            return attrs.evolve(params, range=call.view.range_to_program(
                call.uri, params.range, call.encoding))
        if self.kind == "delta":  # no id of the program's: it answers in full
            return attrs.evolve(params, previous_result_id="")
        return params

    def result(self, result, call):
        data = getattr(result, "data", None)
        if data is None:
            return None
        first, last = call.view.lines_of(call.uri)
        data = cell_tokens(list(data), first, last)
        results = getattr(call.ls, "semantic_results", None)
        if self.kind == "range" or results is None:
            return types.SemanticTokens(data=data)
        if self.kind == "full" and not data and not results.had_tokens(call.uri):
            return None  # nothing of ours here: other providers' tokens win (as for a file)
        old = results.previous(call.uri, call.params.previous_result_id) \
            if self.kind == "delta" else None
        result_id = results.store(call.uri, data)
        if old is None:
            return types.SemanticTokens(data=data, result_id=result_id)
        return types.SemanticTokensDelta(edits=semantic_tokens.delta(old, data),
                                         result_id=result_id)


def cell_tokens(data: list[int], first: int, last: int) -> list[int]:
    """The encoded tokens on program lines [first, last], re-encoded as if
    `first` were line 0 (the encoding is relative to the previous token)."""
    out: list[int] = []
    line = start = 0
    prev_line = prev_start = None
    for i in range(0, len(data) - 4, 5):
        dl, ds, length, typ, mods = data[i:i + 5]
        line += dl
        start = ds if dl else start + ds
        if not first <= line <= last:
            continue
        rel = line - first
        if prev_line is None:
            out.extend((rel, start, length, typ, mods))
        elif rel == prev_line:
            out.extend((0, start - prev_start, length, typ, mods))
        else:
            out.extend((rel - prev_line, start, length, typ, mods))
        prev_line, prev_start = rel, start
    return out


POSITIONAL = _Positional()
HOVER = _Hover()
CODE_ACTIONS = _CodeActions()
INLAY_HINTS = _InlayHints()
TOKENS = _Tokens("full")
TOKENS_DELTA = _Tokens("delta")
TOKENS_RANGE = _Tokens("range")


def in_cells(route: Route):
    """Route a request on a notebook cell through the notebook's program:
    the handler (`async def handler(ls, params)`) sees the program's URI and
    positions, the client gets the cell's. A handler's result computed while
    the notebook changed is refused (ContentModified: the client asks again)."""
    def decorate(handler):
        @functools.wraps(handler)
        async def routed(ls, params):
            uri = params.text_document.uri
            notebook = ls.notebooks.of_cell(uri)
            if notebook is None:
                return await handler(ls, params)
            view = notebook.view
            if view is None or view.cell(uri) is None:
                return None  # a Markdown cell, or one of another language
            call = Call(ls, params, view, uri, notebook.program_uri, ls.feats.encoding)
            result = await handler(ls, route.params(params, call))
            if notebook.view is not view:
                raise JsonRpcContentModified("the notebook changed while answering")
            return route.result(result, call)
        return routed
    return decorate


# ---------------------------------------------------------------- notifications


def register(server) -> None:
    """The notebook notifications. The protocol hands them over untouched
    (server.PallasProtocol): pygls' own notebook workspace is not kept."""

    def sync(ls, notebook: Notebook) -> None:
        """The program document follows the notebook's cells."""
        view = notebook.view
        ls.documents.open(types.TextDocumentItem(uri=notebook.program_uri, language_id="python",
                                                 version=view.generation,
                                                 text=view.program.text))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenNotebookDocumentParams):
        ls.project_index.touch()
        old = ls.notebooks.get(params.notebook_document.uri)
        if old is not None:  # opened again without a close: the old one goes first
            forget(ls, old)
        notebook = ls.notebooks.open(params)
        sync(ls, notebook)
        ls.schedule_diagnostics(notebook.program_uri, 0.0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: types.DidChangeNotebookDocumentParams):
        ls.project_index.touch()
        notebook, closed = ls.notebooks.change(params, ls.feats.encoding)
        if notebook is None:
            return
        sync(ls, notebook)
        cells = params.change.cells
        if cells is not None and (cells.text_content or cells.structure):
            ls.runs.clear_file(notebook.program_uri)  # an edit clears the last run's diagnostics
        for uri in closed:  # a deleted cell's diagnostics go with it, now
            if uri in notebook.published:
                notebook.published.discard(uri)
                ls.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        ls.schedule_diagnostics(notebook.program_uri)  # (nothing imports a notebook)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save(ls, params: types.DidSaveNotebookDocumentParams):
        notebook = ls.notebooks.get(params.notebook_document.uri)
        if notebook is not None:
            ls.schedule_diagnostics(notebook.program_uri, 0.0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: types.DidCloseNotebookDocumentParams):
        notebook = ls.notebooks.get(params.notebook_document.uri)
        if notebook is not None:
            forget(ls, notebook)

    def forget(ls, notebook: Notebook) -> None:
        ls.notebooks.close(notebook.uri)
        ls.forget_document(notebook.program_uri)
        ls.documents.close(notebook.program_uri)
        for uri in sorted(notebook.published):
            ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        notebook.published.clear()
