"""Semantic tokens: what the engine inferred for each name inside a kernel,
as standard token types (`parameter` where a parameter is declared,
`variable` elsewhere) with our own modifiers (`ref`, `array`, `semaphore`,
`descriptor`, the memory space, `view`, `remote`).

Standard types keep clients without a theme for our modifiers colouring
these names as they would anyway; themes, `semanticTokenScopes` (VS Code)
and `@lsp.mod.*` groups (Neovim) tell Refs from Arrays. Names the engine
does not know get no token at all, so whatever else colours them stays.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from lsprotocol import types

from pallas_lsp.engine.model import Array, Descriptor, NameInfo, Ref, Space
from pallas_lsp.lsp.positions import LineIndex, col_to_units, units

TOKEN_TYPES = ["parameter", "variable"]
TOKEN_MODIFIERS = ["declaration", "ref", "array", "semaphore", "descriptor", "view",
                   "vmem", "smem", "hbm", "any", "remote"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)

_TYPE = {name: i for i, name in enumerate(TOKEN_TYPES)}
_BIT = {name: 1 << i for i, name in enumerate(TOKEN_MODIFIERS)}
_SPACE = {Space.VMEM: "vmem", Space.SMEM: "smem", Space.HBM: "hbm", Space.ANY: "any"}


@dataclass(frozen=True)
class Token:
    line: int  # client units from here on
    start: int
    length: int
    type: int
    modifiers: int


def modifiers_of(value) -> list[str] | None:
    """Our modifiers for a value, or None when it gets no token."""
    if isinstance(value, Ref):
        if value.sem is not None:
            mods = ["semaphore"]
        else:
            mods = ["ref"]
            space = _SPACE.get(value.space)
            if space:
                mods.append(space)
        if value.view:
            mods.append("view")
        return mods
    if isinstance(value, Array):
        return ["array"]
    if isinstance(value, Descriptor):
        return ["descriptor", "remote"] if value.remote else ["descriptor"]
    return None


def tokens(names: list[NameInfo], index: LineIndex, encoding: str,
           first_line: int = 0, last_line: int | None = None) -> list[Token]:
    """Tokens for the names in lines [first_line, last_line], in order."""
    out: list[Token] = []
    last_key = None
    for info in names:  # sorted by position (Analysis.names)
        span = info.span
        if span.line < first_line or (last_line is not None and span.line > last_line):
            continue
        if span.line != span.end_line or (span.line, span.col) == last_key:
            continue
        mods = modifiers_of(info.value)
        if mods is None:
            continue
        text = index.line_text(span.line)
        if text[span.col:span.end_col] != info.name:
            continue  # the engine saw another text
        if info.is_param or info.is_assign:
            mods = ["declaration"] + mods
        bits = 0
        for m in mods:
            bits |= _BIT[m]
        start = col_to_units(text, span.col, encoding)
        out.append(Token(span.line, start, units(info.name, encoding),
                         _TYPE["parameter" if info.is_param else "variable"], bits))
        last_key = (span.line, span.col)
    return out


def encode(toks: list[Token]) -> list[int]:
    """The LSP wire form: five integers per token, relative to the previous one."""
    data: list[int] = []
    line = start = 0
    for t in toks:
        delta_line = t.line - line
        delta_start = t.start - start if delta_line == 0 else t.start
        data.extend((delta_line, delta_start, t.length, t.type, t.modifiers))
        line, start = t.line, t.start
    return data


def decode(data: list[int]) -> list[tuple[int, int, int, str, list[str]]]:
    """(line, start, length, type, modifiers) per token (tests, debugging)."""
    out = []
    line = start = 0
    for i in range(0, len(data), 5):
        dl, ds, length, typ, bits = data[i:i + 5]
        line += dl
        start = ds if dl else start + ds
        out.append((line, start, length, TOKEN_TYPES[typ],
                    [m for m, b in _BIT.items() if bits & b]))
    return out


def delta(old: list[int], new: list[int]) -> list[types.SemanticTokensEdit]:
    """One edit replacing what differs between `old` and `new` (common prefix
    and suffix kept, in whole tokens)."""
    if old == new:
        return []
    n = min(len(old), len(new))
    prefix = 0
    while prefix < n and old[prefix] == new[prefix]:
        prefix += 1
    prefix -= prefix % 5
    suffix = 0
    while suffix < n - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    suffix -= suffix % 5
    return [types.SemanticTokensEdit(start=prefix, delete_count=len(old) - prefix - suffix,
                                     data=new[prefix:len(new) - suffix])]


class ResultCache:
    """The last full result per document, so a delta request can be answered
    with the difference (result ids are unique per server)."""

    def __init__(self, limit: int = 64):
        self._ids = itertools.count(1)
        self._last: dict[str, tuple[str, list[int]]] = {}
        self._limit = limit

    def store(self, uri: str, data: list[int]) -> str:
        result_id = str(next(self._ids))
        self._last.pop(uri, None)
        if len(self._last) >= self._limit:
            self._last.pop(next(iter(self._last)))
        self._last[uri] = (result_id, data)
        return result_id

    def previous(self, uri: str, result_id: str | None) -> list[int] | None:
        hit = self._last.get(uri)
        if hit is None or hit[0] != result_id:
            return None
        return hit[1]

    def had_tokens(self, uri: str) -> bool:
        hit = self._last.get(uri)
        return bool(hit and hit[1])

    def forget(self, uri: str) -> None:
        self._last.pop(uri, None)
