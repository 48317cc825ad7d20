"""Writing new cell sources into a notebook's own text, and nothing else.

The file is not re-serialised: only the `source` values of the changed cells
are replaced, in place, so outputs, metadata, key order, indentation, the
escaping style and the trailing newline stay byte for byte. A list source
keeps its layout (the whitespace after `[`, between lines, before `]`) and
every line that did not change keeps its exact JSON text.
"""
from __future__ import annotations

import json
import re

from pallas_lsp.engine.cells import DocumentError, read_notebook

_WS = re.compile(r"[ \t\n\r]*")
_scanstring = json.decoder.scanstring
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_STRING_SEPARATOR = re.compile(r'(?<!\\)"(,[ \t]*)"')


def replace_sources(raw: str, new_sources: dict[int, str]) -> str:
    """`raw` with cell `index`'s source set to `new_sources[index]`.
    Raises DocumentError when the result would not read back as those sources."""
    nb = read_notebook(raw)
    ascii_only = _escapes_non_ascii(raw)
    out, last = [], 0
    for cell in nb.cells:
        new = new_sources.get(cell.index)
        if new is None or new == cell.source:
            continue
        a, b = cell.span
        token = raw[a:b]
        value = _list_value(token, new, ascii_only, raw) if cell.is_list else \
            json.dumps(new, ensure_ascii=ascii_only)
        out.append(raw[last:a])
        out.append(value)
        last = b
    out.append(raw[last:])
    result = "".join(out)
    check = {c.index: c.source for c in read_notebook(result).cells}
    if any(check.get(i) != s for i, s in new_sources.items()):
        raise DocumentError("the fixed notebook would not read back (please report it)")
    return result


def _escapes_non_ascii(raw: str) -> bool:
    """Was the file written with ensure_ascii (non-ASCII as \\uXXXX)?"""
    if not raw.isascii():
        return False
    return any(int(m.group(1), 16) >= 0x80 for m in _UNICODE_ESCAPE.finditer(raw))


def _list_value(token: str, new: str, ascii_only: bool, raw: str) -> str:
    """A `["line\\n", ...]` value for `new` in the layout of `token`."""
    items: list[tuple[str, str]] = []  # (decoded, as written)
    gaps: list[str] = []  # whitespace and commas around the items
    i = _WS.match(token, 1).end()
    gaps.append(token[1:i])
    while token[i] == '"':
        text, end = _scanstring(token, i + 1)
        items.append((text, token[i:end]))
        j = _WS.match(token, end).end()
        if token[j] == ",":
            j = _WS.match(token, j + 1).end()
        gaps.append(token[end:j])
        i = j
    opener = gaps[0]
    closer = gaps[-1] if items else ""
    if len(items) > 1:
        between = gaps[1]
    elif "\n" in opener:  # indented: one item per line
        between = "," + opener
    else:  # one line: the file's separator between strings (", " or ",")
        found = _STRING_SEPARATOR.search(raw)
        between = found.group(1) if found else ", "
    lines = new.splitlines(keepends=True)
    written = []
    for n, line in enumerate(lines):
        if n < len(items) and items[n][0] == line:
            written.append(items[n][1])
        else:
            written.append(json.dumps(line, ensure_ascii=ascii_only))
    if not written:
        return "[]"
    return "[" + opener + between.join(written) + closer + "]"


def changed_cells(before: str, after: str) -> list[tuple[int, str, str]]:
    """(index, old source, new source) of the cells whose source differs."""
    try:
        old = read_notebook(before).cells
        new = read_notebook(after).cells
    except DocumentError:
        return []
    return [(a.index, a.source, b.source) for a, b in zip(old, new) if a.source != b.source]
