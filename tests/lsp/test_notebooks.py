"""Notebooks in the editor: LSP 3.17 notebook document sync with a real
client over stdio. The code cells are analysed in order as one program (a
kernel defined in one cell, launched in another); diagnostics, hover, quick
fixes, inlay hints and semantic tokens arrive on the cells' own URIs, in
their own positions (UTF-16 by default, UTF-8 where negotiated)."""
from __future__ import annotations

import contextlib
import json

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from lsp_harness import (KERNELS, SERVER_COMMAND, Session, apply_text_edits, find, make_client,
                         position_of, server_env, split_lines, wait_for)

IMPORTS = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
           "from jax.experimental.pallas import tpu as pltpu")
# A surrogate pair on the line before the bug and on the bug's line itself:
# the column is counted in UTF-16 units of the cell, not of the notebook.
KERNEL = ("# a copy kernel 🚀\n"
          "def kernel(x_ref, o_ref, sem):\n"
          "    tag = '🚀'; copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n"
          "    copy.start()\n"
          "    copy.wait()")
MAGIC = "%timeit jnp.ones((8, 128)).block_until_ready()"
LAUNCH = ("def run(x):\n"
          "    return pl.pallas_call(\n"
          "        kernel,\n"
          "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
          "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
          "        out_specs=pl.BlockSpec(memory_space=pl.ANY),\n"
          "        scratch_shapes=[pltpu.SemaphoreType.DMA(())],\n"
          "    )(x)\n"
          "\n"
          "y = run(jnp.ones((8, 128), jnp.float32))")
MARKDOWN = "# Copying with DMA\n\nThe kernel is in cell 2, launched in cell 4."

# (kind, language, text): a Markdown cell, imports, the kernel (cell 2), a
# magic, the launch (cell 4).
CELLS = [("markdown", "markdown", MARKDOWN), ("code", "python", IMPORTS),
         ("code", "python", KERNEL), ("code", "python", MAGIC), ("code", "python", LAUNCH)]
K, LAUNCHER = 2, 4  # the kernel's and the launch's cells

NOTEBOOK_CAPS = types.NotebookDocumentClientCapabilities(
    synchronization=types.NotebookDocumentSyncClientCapabilities(
        dynamic_registration=True, execution_summary_support=True))


@contextlib.asynccontextmanager
async def notebook_session(spec: str, root=KERNELS):
    """A server initialized by `spec`'s recorded capabilities plus notebook
    sync, as VS Code 1.70+ sends it."""
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(),
                                client_factory=make_client)
    client = await config.start()
    caps = client_capabilities(spec)
    caps.notebook_document = NOTEBOOK_CAPS
    result = await client.initialize_session(types.InitializeParams(
        capabilities=caps, root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options={"diagnostics": {"debounceMs": 0}}))
    s = Session(client, spec, result)
    try:
        yield s
    finally:
        with contextlib.suppress(Exception):
            await client.shutdown_session()
        await client.stop()


class Notebook:
    """The client's copy of a notebook and the notifications an editor sends."""

    def __init__(self, s: Session, name: str, cells=CELLS, root=KERNELS):
        self.s = s
        self.uri = (root / name).as_uri()
        self.version = 1
        self.cells = [[kind, lang, text, self.cell_uri(f"C{i}"), 1]
                      for i, (kind, lang, text) in enumerate(cells)]

    def cell_uri(self, tag: str) -> str:
        """As VS Code names a cell's document: scheme, the notebook's path, a fragment."""
        return f"vscode-notebook-cell:{self.uri[len('file://'):]}#{tag}"

    def uri_of(self, i: int) -> str:
        return self.cells[i][3]

    def text(self, i: int) -> str:
        return self.cells[i][2]

    def _cell(self, c) -> types.NotebookCell:
        kind = types.NotebookCellKind.Code if c[0] == "code" else types.NotebookCellKind.Markup
        return types.NotebookCell(kind=kind, document=c[3])

    def _item(self, c) -> types.TextDocumentItem:
        return types.TextDocumentItem(uri=c[3], language_id=c[1], version=c[4], text=c[2])

    def open(self) -> None:
        self.s.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=self.uri, notebook_type="jupyter-notebook", version=self.version,
                cells=[self._cell(c) for c in self.cells]),
            cell_text_documents=[self._item(c) for c in self.cells]))

    def _change(self, cells: types.NotebookDocumentCellChanges) -> None:
        self.version += 1
        self.s.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(
                uri=self.uri, version=self.version),
            change=types.NotebookDocumentChangeEvent(cells=cells)))

    def edit(self, i: int, edits: list[types.TextEdit]) -> None:
        """Incremental edits of one cell (client positions), as a cell text change."""
        c = self.cells[i]
        c[2] = apply_text_edits(c[2], edits, self.s.encoding)
        c[4] += 1
        ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                         reverse=True)
        self._change(types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=c[3], version=c[4]),
                changes=[types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                         for e in ordered])]))

    def delete(self, i: int) -> None:
        c = self.cells.pop(i)
        self._change(types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=i, delete_count=1),
                did_close=[types.TextDocumentIdentifier(uri=c[3])])))

    def insert(self, i: int, kind: str, text: str, name: str) -> None:
        c = [kind, "python" if kind == "code" else "markdown", text, self.cell_uri(name), 1]
        self.cells.insert(i, c)
        self._change(types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=i, delete_count=0,
                                                    cells=[self._cell(c)]),
                did_open=[self._item(c)])))

    def close(self) -> None:
        self.s.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=self.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=c[3]) for c in self.cells]))

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """A server WorkspaceEdit, applied the editor's way: per cell."""
        by_uri: dict[str, list[types.TextEdit]] = {}
        for change in edit.document_changes or ():
            i = self.index(change.text_document.uri)
            assert change.text_document.version in (None, self.cells[i][4]), "stale edit"
            by_uri.setdefault(change.text_document.uri, []).extend(change.edits)
        for uri, edits in (edit.changes or {}).items():
            by_uri.setdefault(uri, []).extend(edits)
        for uri, edits in by_uri.items():
            self.edit(self.index(uri), edits)

    def index(self, uri: str) -> int:
        return next(i for i, c in enumerate(self.cells) if c[3] == uri)

    def published(self, i: int) -> list[types.PublishDiagnosticsParams]:
        return self.s.client.published[self.uri_of(i)]

    async def diagnostics(self, i: int, after: int = 0) -> list[types.Diagnostic]:
        """The diagnostics of cell i at its current version, from a publish
        later than the `after`-th."""
        uri, version = self.uri_of(i), self.cells[i][4]
        got = await wait_for(lambda: [p for p in self.s.client.published[uri][after:]
                                      if p.version == version])
        return list(got[-1].diagnostics)

    def position(self, i: int, needle: str, offset: int = 0) -> types.Position:
        line, col = find(self.text(i), needle)
        return position_of(self.text(i), line, col + offset, self.s.encoding)


def codes(diags) -> list:
    return sorted(d.code for d in diags)


@pytest.mark.parametrize("spec", ["visual-studio-code", "neovim"])
async def test_diagnostics_on_the_kernels_cell_in_its_columns(spec):
    async with notebook_session(spec) as s:
        sync = s.result.capabilities.notebook_document_sync
        assert sync.notebook_selector[0].notebook == "jupyter-notebook"
        assert [c.language for c in sync.notebook_selector[0].cells] == ["python"]
        nb = Notebook(s, "copy.ipynb")
        nb.open()
        diags = await nb.diagnostics(K)
        assert codes(diags) == ["PAL101", "PAL204"]  # PAL204: the launch says ANY
        start = nb.position(K, "x_ref[...]")
        end = nb.position(K, "x_ref[...]", len("x_ref[...]"))
        # the emoji before it on the line counts two UTF-16 units, four UTF-8 ones
        assert start.character == len("    tag = '🚀'; copy = pltpu.make_async_copy(") + \
            (1 if s.encoding == "utf-16" else 3)
        for d in diags:
            assert d.range == types.Range(start, end), d
        # (the cell's version: never an older version's result)
        assert nb.published(K)[-1].version == 1
        for i in (1, 3, LAUNCHER):
            assert not [d for p in nb.published(i) for d in p.diagnostics]
        assert not nb.published(0)  # Markdown: nothing
        # a pull client pulls files, not cells: the cells' are pushed, the pull is empty
        if s.pull:
            report = await s.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
                text_document=types.TextDocumentIdentifier(uri=nb.uri_of(K))))
            assert not report.items


async def test_hover_inlay_hints_and_tokens_in_a_cell():
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "hover.ipynb")
        nb.open()
        await nb.diagnostics(K)
        pos = nb.position(K, "x_ref, o_ref")
        h = await s.hover(nb.uri_of(K), pos.line, pos.character)
        assert "x_ref: Ref · ANY" in h.contents.value
        assert h.range.start == pos  # in the cell, not in the program
        # a name of another cell: its own hover
        pos = nb.position(LAUNCHER, "kernel,")
        h = await s.hover(nb.uri_of(LAUNCHER), pos.line, pos.character)
        assert h is None or h.range is None or h.range.start.line == pos.line

        hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=nb.uri_of(K)),
            range=types.Range(types.Position(0, 0), types.Position(5, 0))))
        # after each kernel parameter, on the def line of the cell (the output's
        # shape and dtype come from out_shape, the input's from the operand the
        # launch is called with in another cell)
        assert [(h.label, h.position) for h in hints] == [
            (": Ref[ANY f32[8,128]]", nb.position(K, ", o_ref")),
            (": Ref[ANY f32[8,128]]", nb.position(K, ", sem")),
            (": DMA sem ()", nb.position(K, "):"))]

        tokens = await s.client.text_document_semantic_tokens_full_async(
            types.SemanticTokensParams(text_document=types.TextDocumentIdentifier(
                uri=nb.uri_of(K))))
        decoded = decode(tokens.data)
        x = nb.position(K, "x_ref[...]")
        assert (x.line, x.character, len("x_ref")) in [t[:3] for t in decoded]
        assert all(0 <= t[0] < len(split_lines(nb.text(K))) for t in decoded)
        # a delta against the cell's last result: nothing changed, nothing to edit
        delta = await s.client.text_document_semantic_tokens_full_delta_async(
            types.SemanticTokensDeltaParams(text_document=types.TextDocumentIdentifier(
                uri=nb.uri_of(K)), previous_result_id=tokens.result_id))
        assert not delta.edits and delta.result_id != tokens.result_id
        # a range inside the cell: the same tokens on those lines
        ranged = await s.client.text_document_semantic_tokens_range_async(
            types.SemanticTokensRangeParams(text_document=types.TextDocumentIdentifier(
                uri=nb.uri_of(K)), range=types.Range(types.Position(2, 0),
                                                     types.Position(2, 80))))
        assert decode(ranged.data) == [t for t in decoded if t[0] == 2]
        # signature help inside a call of the cell: the argument as the engine sees it
        pos = nb.position(K, "x_ref[...]")
        sig = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
            text_document=types.TextDocumentIdentifier(uri=nb.uri_of(K)), position=pos))
        assert sig is not None and "make_async_copy" in sig.signatures[0].label
        # the Markdown cell is none of ours
        assert await s.hover(nb.uri_of(0), 0, 2) is None


def decode(data):
    out, line, start = [], 0, 0
    for i in range(0, len(data), 5):
        dl, ds, length = data[i:i + 3]
        line += dl
        start = ds if dl else start + ds
        out.append((line, start, length))
    return out


async def test_quick_fix_edits_the_kernels_cell():
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "fix.ipynb")
        nb.open()
        (d,) = [d for d in await nb.diagnostics(K) if d.code == "PAL101"]
        actions = await s.code_actions(nb.uri_of(K), d.range, [d])
        (fix,) = [a for a in actions if a.title.startswith("Pass the Ref")]
        assert fix.diagnostics[0].range == d.range
        targets = [c.text_document.uri for c in fix.edit.document_changes or ()] \
            or list(fix.edit.changes)
        assert targets == [nb.uri_of(K)]
        seen = len(nb.published(K))
        nb.apply(fix.edit)
        assert "make_async_copy(x_ref, o_ref, sem)" in nb.text(K)
        state = await s.server_text(nb.uri_of(K))
        assert state["text"] == nb.text(K) and state["version"] == 2
        assert await nb.diagnostics(K, seen) == []
        # "Disable PAL101 for this line" lands on the same cell line
        nb2 = Notebook(s, "noqa.ipynb")
        nb2.open()
        (d,) = [d for d in await nb2.diagnostics(K) if d.code == "PAL101"]
        actions = await s.code_actions(nb2.uri_of(K), d.range, [d])
        (disable,) = [a for a in actions if a.title == "Disable PAL101 for this line"]
        nb2.apply(disable.edit)
        assert split_lines(nb2.text(K))[2].endswith("sem)  # noqa: PAL101")


async def test_edits_in_cells_and_deleting_the_launch():
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "edit.ipynb")
        nb.open()
        assert codes(await nb.diagnostics(K)) == ["PAL101", "PAL204"]
        # no launch: the memory space is not known, PAL204 goes, PAL101 (the text) stays
        seen = len(nb.published(K))
        nb.delete(LAUNCHER)
        await wait_for(lambda: len(nb.published(K)) > seen)
        assert codes(nb.published(K)[-1].diagnostics) == ["PAL101"]
        # a new cell launching it again, before the kernel's cell: nothing is
        # launched before it is defined, so nothing changes
        seen = len(nb.published(K))
        nb.insert(2, "code", LAUNCH, "early")
        k = nb.index(nb.uri_of(K + 1))
        await wait_for(lambda: len(nb.published(k)) > seen)
        assert codes(nb.published(k)[-1].diagnostics) == ["PAL101"]
        # an edit in the kernel's cell that fixes the bug clears it
        start = nb.position(k, "x_ref[...]", len("x_ref"))
        end = nb.position(k, "x_ref[...]", len("x_ref[...]"))
        seen = len(nb.published(k))
        nb.edit(k, [types.TextEdit(range=types.Range(start, end), new_text="")])
        assert await nb.diagnostics(k, seen) == []
        assert (await s.server_text(nb.uri_of(k)))["text"] == nb.text(k)


async def test_a_removed_cell_is_cleared_and_closing_clears_all():
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "close.ipynb")
        nb.open()
        assert await nb.diagnostics(K)
        uri = nb.uri_of(K)
        nb.delete(K)
        await wait_for(lambda: not s.client.published[uri][-1].diagnostics)
        nb2 = Notebook(s, "close2.ipynb")
        nb2.open()
        assert await nb2.diagnostics(K)
        nb2.close()
        await wait_for(lambda: not s.client.published[nb2.uri_of(K)][-1].diagnostics)


async def test_notebook_json_opened_as_text_is_not_python():
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": text}
                          for text in (IMPORTS, KERNEL, LAUNCH)],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(notebook, indent=1)
    for spec in ("visual-studio-code", "neovim"):
        async with notebook_session(spec) as s:
            uri = (KERNELS / "raw.ipynb").as_uri()
            s.open(uri, raw)
            # a Python file opened after it has its diagnostics: the server got there
            py = (KERNELS / "after_raw.py").as_uri()
            s.open(py, "\n\n".join((IMPORTS, KERNEL, LAUNCH)))
            assert await s.diagnostics(py)
            assert not [d for p in s.client.published[uri] for d in p.diagnostics]
            if s.pull:
                assert await s.diagnostics(uri) == []
            line, col = find(raw, "x_ref")
            assert await s.hover(uri, line, col) is None
            assert not await s.inlay_hints(uri)


async def test_cells_joined_as_text_under_the_notebooks_name_are_python():
    """jupyterlab-lsp sends a notebook as one text document of its code cells
    (two blank lines between cells, magics rewritten) under the notebook's
    own name, not through notebook sync: that text is Python, analysed."""
    joined = "\n\n\n".join((IMPORTS, KERNEL, "get_ipython().run_line_magic('timeit', '')",
                             LAUNCH))
    async with notebook_session("neovim") as s:
        uri = (KERNELS / "joined.ipynb").as_uri()
        s.open(uri, joined)
        found = await s.diagnostics(uri)
        at = position_of(joined, *find(joined, "x_ref[...]"), s.encoding)
        # as in the notebook itself (PAL204: the launch says ANY)
        assert sorted((d.code, d.range.start.line, d.range.start.character) for d in found) \
            == [("PAL101", at.line, at.character), ("PAL204", at.line, at.character)]
        hover = await s.hover(uri, at.line, at.character)
        assert hover is not None and "Ref" in hover.contents.value


HELPER = ("from jax.experimental.pallas import tpu as pltpu\n\n\n"
          "def kernel(x_ref, o_ref, sem):\n"
          "    copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n"
          "    copy.start()\n"
          "    copy.wait()\n")


async def test_a_helper_modules_kernel_launched_in_a_cell(tmp_path):
    """The launch in the notebook reaches the kernel in helper.py: the
    helper's diagnostic points back at the launch, in its cell."""
    (tmp_path / "helper.py").write_text(HELPER)
    launch = LAUNCH.replace("def run(x):", "from helper import kernel\n\ndef run(x):")
    async with notebook_session("visual-studio-code", root=tmp_path) as s:
        nb = Notebook(s, "nb.ipynb", [("code", "python", IMPORTS), ("code", "python", launch)],
                      root=tmp_path)
        nb.open()
        helper = (tmp_path / "helper.py").as_uri()
        s.open(helper, HELPER)

        def pal204():
            return [d for p in s.client.published[helper] for d in p.diagnostics
                    if d.code == "PAL204"]
        (d, *_) = await wait_for(pal204, 30)
        (related,) = d.related_information
        assert related.location.uri == nb.uri_of(1)
        assert related.location.range.start.line == find(launch, "kernel,")[0]  # the launch's argument


async def test_broken_notebook_messages_change_nothing():
    """A change to a notebook or cell that is not open, a null text, a cell
    array change past the end: refused or ignored; the notebook keeps its
    cells and its diagnostics come as before."""
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "broken.ipynb")
        nb.open()
        assert codes(await nb.diagnostics(K)) == ["PAL101", "PAL204"]
        def send(method, params):
            body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
            s.client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

        send("notebookDocument/didChange", {
            "notebookDocument": {"uri": nb.uri, "version": 9},
            "change": {"cells": {"textContent": [{
                "document": {"uri": nb.uri_of(K), "version": 9},
                "changes": [{"text": None}]}]}}})
        send("notebookDocument/didChange", {
            "notebookDocument": {"uri": "file:///not/open.ipynb", "version": 2},
            "change": {"cells": {"textContent": []}}})
        send("notebookDocument/didChange", {
            "notebookDocument": {"uri": nb.uri, "version": 10},
            "change": {"cells": {"textContent": [{
                "document": {"uri": "vscode-notebook-cell:/elsewhere#X", "version": 2},
                "changes": [{"text": "boom"}]}]}}})
        state = await s.server_text(nb.uri_of(K))
        assert state["text"] == nb.text(K) and state["version"] == 1
        assert any("refused a change to " + nb.uri in m.message and "must be a string" in m.message
                   for m in s.client.log_messages)
        # a save analyses again, and changes nothing
        seen = len(nb.published(K))
        s.client.notebook_document_did_save(types.DidSaveNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=nb.uri)))
        await wait_for(lambda: len(nb.published(K)) > seen)
        assert codes(nb.published(K)[-1].diagnostics) == ["PAL101", "PAL204"]
        # an array change past the end appends; the cells before it are untouched
        nb.version = 10
        nb.insert(len(nb.cells), "code", "z = 1", "late")
        seen = len(nb.published(K))
        nb.edit(K, [types.TextEdit(range=types.Range(nb.position(K, "x_ref[...]", 5),
                                                     nb.position(K, "x_ref[...]", 10)),
                                   new_text="")])
        assert await nb.diagnostics(K, seen) == []


async def test_messages_name_lines_by_cell():
    """The engine's "line N" of the program reads "cell N, line L" (cells
    counted as the notebook shows them, Markdown included, as on the CLI)."""
    local = ("def local(x_ref, o_ref, sem):\n"
             "    d = pltpu.make_async_copy(x_ref, o_ref, sem)\n"
             "    d.start()\n"
             "    d.wait_send()")
    async with notebook_session("visual-studio-code") as s:
        nb = Notebook(s, "lines.ipynb", [("markdown", "markdown", MARKDOWN),
                                         ("code", "python", IMPORTS), ("code", "python", local)])
        nb.open()
        (d,) = [d for d in await nb.diagnostics(2) if d.code == "PAL106"]
        assert "(cell 3, line 2)" in d.message, d.message
        assert d.range.start == nb.position(2, "wait_send")


# ---------------------------------------------------------------- the mapping, without a server


def _view(*texts: str):
    from pallas_lsp.lsp.notebooks import Notebook as Store
    from pallas_lsp.lsp.documents import Document
    uris = [f"cell:{i}" for i in range(len(texts))]
    nb = Store("file:///n.ipynb", "jupyter-notebook", 1,
               [types.NotebookCell(kind=types.NotebookCellKind.Code, document=u) for u in uris],
               {u: Document(u, t, 1) for u, t in zip(uris, texts)})
    return nb, nb.rebuild(), uris


def test_positions_map_through_magics_and_surrogate_pairs():
    nb, view, uris = _view("%timeit f()\nx = 1", "s = '🚀'; y = x_ref")
    assert view.program.text == "pass;   f()\nx = 1\ns = '🚀'; y = x_ref"  # (columns kept)
    for enc in ("utf-16", "utf-8", "utf-32"):
        units = len("s = '🚀'; y = ".encode("utf-16-le")) // 2 if enc == "utf-16" else \
            len("s = '🚀'; y = ".encode()) if enc == "utf-8" else len("s = '🚀'; y = ")
        p = view.to_program(uris[1], types.Position(0, units), enc)
        assert p.line == 2 and p.character == units  # the same line text: the same units
        assert view.to_cell(p, enc) == (uris[1], types.Position(0, units))
    # past a cell's last line: its end, not the next cell
    assert view.to_program(uris[0], types.Position(7, 0), "utf-16").line == 1


def test_a_range_across_cells_is_cut_or_refused():
    nb, view, uris = _view("a = 1\nb = 2", "c = 3")
    across = types.Range(types.Position(1, 2), types.Position(2, 1))
    assert view.range_to_cell(across, "utf-16") == (
        uris[0], types.Range(types.Position(1, 2), types.Position(1, 5)))
    assert view.range_to_cell(across, "utf-16", strict=True) is None
    program = nb.program_uri
    edit = types.WorkspaceEdit(changes={program: [types.TextEdit(range=across, new_text="")]})
    assert view.edit_to_cells(edit, program, "utf-16") is None  # never half a fix
    inside = types.TextEdit(range=types.Range(types.Position(2, 0), types.Position(2, 1)),
                            new_text="d")
    moved = view.edit_to_cells(types.WorkspaceEdit(changes={program: [inside]}), program,
                               "utf-16")
    assert list(moved.changes) == [uris[1]]
    assert moved.changes[uris[1]][0].range.start == types.Position(0, 0)


def test_tokens_of_one_cell_are_re_encoded_from_its_first_line():
    from pallas_lsp.lsp.notebooks import cell_tokens
    # tokens at (1, 4), (3, 2), (3, 9), (6, 0) of the program
    data = [1, 4, 1, 0, 0, 2, 2, 1, 0, 0, 0, 7, 1, 0, 0, 3, 0, 1, 0, 0]
    assert cell_tokens(data, 3, 5) == [0, 2, 1, 0, 0, 0, 7, 1, 0, 0]
    assert cell_tokens(data, 1, 1) == [0, 4, 1, 0, 0]
    assert cell_tokens(data, 4, 5) == []


def test_unchanged_cells_are_not_read_again():
    from pallas_lsp.engine import cells
    calls = []
    real = cells.python_of

    def counted(lines, repair=True):
        calls.append(tuple(lines))
        return real(lines, repair)

    nb, view, uris = _view("%time a = 1", "def broken(:\n    pass", "b = 2")
    cells.python_of = counted
    try:
        nb.docs[uris[2]].text = "b = 3"
        again = nb.rebuild()
    finally:
        cells.python_of = real
    assert calls == [("b = 3",)]
    fresh = cells.cells_program(enumerate(["%time a = 1", "def broken(:\n    pass", "b = 3"]))
    assert again.program.text == fresh.text and again.program.cells == fresh.cells
