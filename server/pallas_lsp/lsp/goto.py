"""Go to the spec (typeDefinition) and to the launches of a kernel
(implementation), and the kernel outline (documentSymbol, workspace/symbol).

Pure functions over analyses: the server hands in the analysis of the
document, those of the other open documents and the workspace's, and a way
to read another file's text (for its position encoding)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from lsprotocol import types

from pallas_lsp.engine.model import (Analysis, Array, Descriptor, LaunchSite, NameInfo, Ref,
                                     Span)
from pallas_lsp.lsp.positions import LineIndex

TextOf = Callable[[str], "str | None"]

_API_LABEL = {"pallas_call": "pl.pallas_call", "kernel": "pl.kernel", "core_map": "pl.core_map",
              "emit_pipeline": "pltpu.emit_pipeline"}


def _uri(path: str) -> str:
    return Path(path).as_uri()


def _real(path: str | None) -> str:
    return os.path.realpath(path) if path else ""


class Locator:
    """Spans (code points, maybe in another file) -> LSP locations."""

    def __init__(self, encoding: str, text_of: TextOf):
        self.encoding = encoding
        self.text_of = text_of
        self._indexes: dict[str, LineIndex | None] = {}

    def index(self, path: str) -> LineIndex | None:
        if path not in self._indexes:
            text = self.text_of(path)
            self._indexes[path] = LineIndex(text) if text is not None else None
        return self._indexes[path]

    def range(self, span: Span, path: str) -> types.Range | None:
        index = self.index(path)
        if index is None:
            return None
        sl, sc = index.to_client(span.line, span.col, self.encoding)
        el, ec = index.to_client(span.end_line, span.end_col, self.encoding)
        return types.Range(types.Position(sl, sc), types.Position(el, ec))

    def location(self, span: Span | None, here: str) -> types.Location | None:
        """`here`: the file spans without a path belong to."""
        if span is None:
            return None
        path = span.path or here
        if not path:
            return None
        rng = self.range(span, path)
        return types.Location(uri=_uri(path), range=rng) if rng is not None else None


# ---------------------------------------------------------------- typeDefinition


def type_definition(analysis: Analysis, path: str, line: int, col: int,
                    locator: Locator) -> list[types.Location] | None:
    """Where the value under the cursor was made: its BlockSpec, scratch or
    run_scoped allocation, the launch operand, the copy call."""
    info = analysis.name_at(line, col)
    if info is None or info.decl is None:
        return None
    loc = locator.location(info.decl, path)
    return [loc] if loc is not None else None


# ---------------------------------------------------------------- launches


@dataclass(frozen=True)
class Launched:
    """A launch seen by some analysis, with its spans' files made explicit."""

    site: LaunchSite
    path: str  # the file of the launch call
    kernel_path: str  # the file of the kernel's def


def launches_of(analysis: Analysis, path: str) -> list[Launched]:
    out = []
    for site in analysis.launches:
        if site.span is None or site.kernel_span is None:
            continue
        out.append(Launched(site, _real(site.span.path or path),
                            _real(site.kernel_span.path or path)))
    return out


def kernel_at(found: Iterable[Launched], path: str, line: int, col: int) -> LaunchSite | None:
    """The kernel whose `def` line (or name) is under the cursor."""
    real = _real(path)
    for item in found:
        ks = item.site.kernel_span
        if item.kernel_path == real and ks is not None and ks.line == line:
            return item.site
    return None


def implementation(found: list[Launched], path: str, line: int, col: int,
                   locator: Locator) -> list[types.Location] | None:
    kernel = kernel_at(found, path, line, col)
    if kernel is None:
        return None
    real = _real(path)
    out, seen = [], set()
    for item in found:
        ks = item.site.kernel_span
        if item.kernel_path != real or ks is None or ks.line != kernel.kernel_span.line:
            continue
        span = item.site.span
        key = (item.path, span.line, span.col)
        if key in seen:
            continue
        seen.add(key)
        loc = locator.location(Span(span.line, span.col, span.end_line, span.end_col), item.path)
        if loc is not None:
            out.append(loc)
    out.sort(key=lambda l: (l.uri != _uri(real), l.uri, l.range.start.line))
    return out or None


# ---------------------------------------------------------------- outline


def _kind_of(value) -> types.SymbolKind:
    if isinstance(value, Ref):
        return types.SymbolKind.Event if value.sem is not None else types.SymbolKind.Variable
    if isinstance(value, Array):
        return types.SymbolKind.Array
    if isinstance(value, Descriptor):
        return types.SymbolKind.Object
    return types.SymbolKind.Variable


def _params(names: list[NameInfo], kernel_def: Span) -> list[NameInfo]:
    """The kernel's own parameters: the parameter names that open its def
    (nested bodies' parameters come later, after other names)."""
    out = []
    for info in names:
        s = info.span
        if (s.line, s.col) < (kernel_def.line, kernel_def.col):
            continue
        if (s.line, s.col) > (kernel_def.end_line, kernel_def.end_col):
            break
        if not info.is_param:
            break
        out.append(info)
    return out


def _launch_summary(apis: list[str]) -> str:
    counts: dict[str, int] = {}
    for a in apis:
        counts[a] = counts.get(a, 0) + 1
    return ", ".join(f"{_API_LABEL.get(a, a)}" + (f" ×{n}" if n > 1 else "")
                     for a, n in counts.items())


def kernels_in(found: list[Launched], path: str) -> list[tuple[LaunchSite, list[str], bool]]:
    """Kernels defined in `path`: (one launch of it, the apis launching it,
    launched from this file)."""
    real = _real(path)
    by_def: dict[tuple, list[Launched]] = {}
    for item in found:
        if item.kernel_path == real and item.site.kernel_def is not None:
            d = item.site.kernel_def
            by_def.setdefault((d.line, d.col), []).append(item)
    out = []
    for key in sorted(by_def):
        items = by_def[key]
        here = [i for i in items if i.path == real]
        first = (here or items)[0].site
        seen, apis = set(), []
        for i in items:
            k = (i.path, i.site.span.line, i.site.span.col)
            if k not in seen:
                seen.add(k)
                apis.append(i.site.api)
        out.append((first, apis, bool(here)))
    return out


def document_symbols(analysis: Analysis, found: list[Launched], path: str, locator: Locator,
                     hierarchical: bool):
    out = []
    for site, apis, _here in kernels_in(found, path):
        rng = locator.range(_local(site.kernel_def), path)
        sel = locator.range(_local(site.kernel_span), path)
        if rng is None or sel is None:
            continue
        detail = f"pallas-lsp: Pallas kernel, launched by {_launch_summary(apis)}"
        params = _params(analysis.names, _local(site.kernel_def))
        if hierarchical:
            children = []
            for p in params:
                prng = locator.range(p.span, path)
                if prng is None:
                    continue
                kind = p.value.describe()
                children.append(types.DocumentSymbol(
                    name=p.name, detail="?" if kind == "unknown" else kind,
                    kind=_kind_of(p.value), range=prng, selection_range=prng))
            out.append(types.DocumentSymbol(name=site.kernel, detail=detail,
                                            kind=types.SymbolKind.Function, range=rng,
                                            selection_range=sel, children=children))
        else:
            uri = _uri(path)
            out.append(types.SymbolInformation(
                name=site.kernel, kind=types.SymbolKind.Function,
                location=types.Location(uri=uri, range=rng),
                container_name="pallas-lsp kernels"))
            for p in params:
                prng = locator.range(p.span, path)
                if prng is not None:
                    out.append(types.SymbolInformation(
                        name=p.name, kind=_kind_of(p.value),
                        location=types.Location(uri=uri, range=prng),
                        container_name=site.kernel))
    return out


def _local(span: Span) -> Span:
    return Span(span.line, span.col, span.end_line, span.end_col)


def matches(query: str, name: str) -> bool:
    """Fuzzy: the query's characters appear in order (case-insensitive)."""
    q = query.lower()
    n = name.lower()
    i = 0
    for ch in n:
        if i < len(q) and ch == q[i]:
            i += 1
    return i == len(q)


def workspace_symbols(found: list[Launched], query: str, locator: Locator,
                      limit: int = 500) -> list[types.SymbolInformation]:
    out, seen = [], set()
    for item in found:
        site = item.site
        if not site.kernel or not matches(query, site.kernel) or site.kernel_span is None:
            continue
        key = (item.kernel_path, site.kernel_span.line)
        if key in seen:
            continue
        seen.add(key)
        loc = locator.location(_local(site.kernel_span), item.kernel_path)
        if loc is None:
            continue
        out.append(types.SymbolInformation(
            name=site.kernel, kind=types.SymbolKind.Function, location=loc,
            container_name=f"pallas-lsp kernel ({_API_LABEL.get(site.api, site.api)})"))
        if len(out) >= limit:
            break
    out.sort(key=lambda s: (s.name, s.location.uri))
    return out
