"""Open documents, kept identical to the client's copy.

pygls' own TextDocument splits lines with `str.splitlines`, which also breaks
on "\\x0c", "\\x1c", "\\u2028" and friends; LSP does not, so an edit after such
a character would land in the wrong place. This store applies changes by
absolute offset on a line table that splits on "\\n", "\\r\\n" and "\\r" only.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from lsprotocol import types

from pallas_lsp.lsp.positions import LineIndex

try:  # pygls knows how to turn file URIs into paths on every platform
    from pygls.uris import to_fs_path
except ImportError:  # pragma: no cover
    def to_fs_path(uri: str) -> str | None:  # type: ignore[misc]
        return uri[7:] if uri.startswith("file://") else None


@dataclass
class Document:
    uri: str
    text: str
    version: int | None
    language_id: str = "python"
    _index: LineIndex | None = field(default=None, repr=False)

    @property
    def path(self) -> str | None:
        try:
            return to_fs_path(self.uri)
        except Exception:
            return None

    @property
    def index(self) -> LineIndex:
        if self._index is None or self._index.text is not self.text:
            self._index = LineIndex(self.text)
        return self._index

    def apply(self, change: types.TextDocumentContentChangeEvent, encoding: str) -> None:
        rng = getattr(change, "range", None)
        if rng is None:  # full-text change
            self.text = change.text
            self._index = None
            return
        index = self.index
        start = index.offset_from_client(rng.start.line, rng.start.character, encoding)
        end = index.offset_from_client(rng.end.line, rng.end.character, encoding)
        if end < start:
            start, end = end, start
        self.text = self.text[:start] + change.text + self.text[end:]
        self._index = None

    def snapshot(self) -> "Snapshot":
        return Snapshot(self.uri, self.version, self.text, self.path, self.index)


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of a document at one version (what analysis uses)."""

    uri: str
    version: int | None
    text: str
    path: str | None
    index: LineIndex = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.index is None or self.index.text is not self.text:
            object.__setattr__(self, "index", LineIndex(self.text))


class DocumentStore:
    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        self._lock = threading.Lock()

    def open(self, item: types.TextDocumentItem) -> Document:
        doc = Document(item.uri, item.text, item.version, item.language_id)
        with self._lock:
            self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams, encoding: str) -> Document | None:
        """Apply all changes of one notification, or none of them."""
        with self._lock:
            doc = self._docs.get(params.text_document.uri)
            if doc is None:
                return None
            work = Document(doc.uri, doc.text, doc.version, doc.language_id, doc._index)
            for change in params.content_changes:
                if not isinstance(change.text, str):
                    raise ValueError("a change without text")
                work.apply(change, encoding)
            doc.text, doc._index = work.text, work._index
            doc.version = params.text_document.version
            return doc

    def close(self, uri: str) -> Document | None:
        with self._lock:
            return self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def uris(self) -> list[str]:
        return list(self._docs)

    def text_for_path(self, path: str) -> str | None:
        """The editor's text of an open file (for imported helpers)."""
        for doc in list(self._docs.values()):
            if doc.path == path:
                return doc.text
        return None


_MAX_UINT = 2**31 - 1  # LSP's uinteger


def change_problem(method: str | None, params) -> str | None:
    """Why the raw params of didOpen / didChange cannot be applied (None:
    they can). Checked on the JSON before pygls' converter, which turns a
    null text into the string "None"."""
    if not isinstance(params, dict) or not isinstance(params.get("textDocument"), dict):
        return "`textDocument` is missing"
    td = params["textDocument"]
    if not isinstance(td.get("uri"), str):
        return "`textDocument.uri` must be a string"
    if method == types.TEXT_DOCUMENT_DID_OPEN:
        return None if isinstance(td.get("text"), str) else "`textDocument.text` must be a string"
    changes = params.get("contentChanges")
    if not isinstance(changes, list):
        return "`contentChanges` must be a list"
    for i, change in enumerate(changes):
        where = f"contentChanges[{i}]"
        if not isinstance(change, dict):
            return f"{where} must be an object"
        if not isinstance(change.get("text"), str):
            return f"{where}.text must be a string, got {_kind(change.get('text'))}"
        if change.get("range", None) is None:
            change.pop("range", None)  # a null range: the whole text, as some clients send it
            continue
        rng = change["range"]
        if not isinstance(rng, dict):
            return f"{where}.range must be an object"
        for end in ("start", "end"):
            pos = rng.get(end)
            if not isinstance(pos, dict):
                return f"{where}.range.{end} must be a position"
            for part in ("line", "character"):
                value = pos.get(part)
                if isinstance(value, bool) or not isinstance(value, int) \
                        or not 0 <= value <= _MAX_UINT:
                    return (f"{where}.range.{end}.{part} must be an integer from 0 to "
                            f"{_MAX_UINT}, got {_kind(value)}")
    return None


def notebook_change_problem(params) -> str | None:
    """The same checks for the cells' text changes of a notebookDocument/didChange."""
    try:
        contents = params["change"].get("cells", {}).get("textContent") or []
    except (AttributeError, KeyError, TypeError):
        return None  # pygls' converter answers for the rest
    if not isinstance(contents, list):
        return "`change.cells.textContent` must be a list"
    for i, item in enumerate(contents):
        if not isinstance(item, dict):
            return f"textContent[{i}] must be an object"
        problem = change_problem(types.TEXT_DOCUMENT_DID_CHANGE, {
            "textDocument": item.get("document"), "contentChanges": item.get("changes")})
        if problem is not None:
            return f"textContent[{i}]: {problem}"
    return None


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bool, int, float)):
        return repr(value)
    return type(value).__name__
