"""Unit tests: code points <-> UTF-8/16/32 columns, LSP line splitting, and
incremental changes in the document store."""
from __future__ import annotations

from hypothesis import given, strategies as st
from lsprotocol import types

from pallas_lsp.lsp.documents import Document
from pallas_lsp.lsp.positions import (UTF8, UTF16, UTF32, LineIndex, choose_encoding,
                                      col_from_units, col_to_units, split_lines, units)


def test_choose_encoding():
    assert choose_encoding(None) == UTF16
    assert choose_encoding([]) == UTF16
    assert choose_encoding(["utf-32", "utf-8", "utf-16"]) == UTF8
    assert choose_encoding(["utf-32", "utf-16"]) == UTF16


def test_units_of_wide_characters():
    line = 'x = "🚀数据é"; y'
    col = line.index("y")
    assert col_to_units(line, col, UTF32) == col
    assert col_to_units(line, col, UTF16) == col + 1  # the rocket is a surrogate pair
    assert col_to_units(line, col, UTF8) == col + 3 + 2 * 2 + 1  # 4-byte, 3-byte x2, 2-byte
    for enc in (UTF8, UTF16, UTF32):
        assert col_from_units(line, col_to_units(line, col, enc), enc) == col


def test_inside_a_character_rounds_down_and_past_the_end_clamps():
    line = "a🚀b"
    assert col_from_units(line, 2, UTF16) == 1  # between the two surrogates
    assert col_from_units(line, 3, UTF8) == 1  # inside the 4 UTF-8 bytes
    assert col_from_units(line, 99, UTF16) == 3
    assert col_from_units(line, -1, UTF16) == 0


def test_split_lines_is_lsp_not_splitlines():
    text = "a\x0cb\u2028c\r\nd\re\nf\x85g"
    assert split_lines(text) == ["a\x0cb\u2028c", "d", "e", "f\x85g"]
    assert split_lines("x\n") == ["x", ""]


def test_line_index_offsets_and_clamping():
    idx = LineIndex("ab\r\ncd\n")
    assert idx.lines == ["ab", "cd", ""]
    assert idx.offset(1, 1) == 5
    assert idx.pos_at(5).line == 1 and idx.pos_at(5).col == 1
    assert idx.from_client(10, 3, UTF16) == idx.from_client(2, 0, UTF16)  # past the end: end of text
    assert idx.to_client(10, 0, UTF16) == (2, 0)


@given(st.text(), st.data())
def test_round_trip(text, data):
    idx = LineIndex(text)
    line = data.draw(st.integers(0, len(idx.lines) - 1))
    col = data.draw(st.integers(0, len(idx.lines[line])))
    for enc in (UTF8, UTF16, UTF32):
        ln, ch = idx.to_client(line, col, enc)
        p = idx.from_client(ln, ch, enc)
        assert (p.line, p.col) == (line, col)
    assert units(idx.lines[line], UTF16) == len(idx.lines[line].encode("utf-16-le")) // 2


def _change(sl, sc, el, ec, text):
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(sl, sc), types.Position(el, ec)), text=text)


def test_document_incremental_changes():
    doc = Document("file:///k.py", 'x = "🚀"\ny = 1\n', 1)
    doc.apply(_change(0, 8, 0, 8, "!"), UTF16)  # after the rocket (2 UTF-16 units) and quote
    assert doc.text == 'x = "🚀"!\ny = 1\n'
    doc.apply(_change(0, 9, 1, 0, ""), UTF16)  # join lines
    assert doc.text == 'x = "🚀"!y = 1\n'
    doc.apply(_change(5, 0, 9, 9, "tail"), UTF16)  # past the end: appended
    assert doc.text == 'x = "🚀"!y = 1\ntail'
    doc.apply(types.TextDocumentContentChangeWholeDocument(text="new"), UTF16)
    assert doc.text == "new"


def test_document_form_feed_and_line_separator_are_not_line_breaks():
    doc = Document("file:///k.py", 'a = "\u2028"\n\x0cbcd\n', 1)
    doc.apply(_change(1, 1, 1, 2, "X"), UTF16)
    assert doc.text == 'a = "\u2028"\n\x0cXcd\n'
