"""Buffers the engine cannot take as they are, and what the user is told.

* Lone surrogates (U+D800-U+DFFF on their own: a client can send them as
  JSON escapes) make `ast.parse` fail on the whole text. They are replaced by
  U+FFFD for the engine: one code point for one code point, so every position
  stays where it was.
* A buffer longer than the engine's limit is analysed up to the last
  top-level statement that starts before the limit; positions are unchanged
  because it is a prefix.
* A MemoryError is retried once on the first half of the file.

Each case becomes a `Notice`: logged once per document, and (except for
surrogates, where nothing is lost) a diagnostic on line 1.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pallas_lsp.engine.analyze import MAX_BYTES

_SURROGATE = re.compile("[\ud800-\udfff]")
_TOP_LEVEL = re.compile(r"^(?:async[ \t]+def\b|def\b|class\b|@)", re.MULTILINE)


@dataclass(frozen=True)
class Notice:
    kind: str  # "surrogates" | "cut" | "internal"
    message: str
    severity: str = "info"  # info | warning (a diagnostic), or "log" (log only)


def clean_surrogates(text: str) -> tuple[str, int, int]:
    """(text with lone surrogates replaced, how many, 0-based line of the first)."""
    if text.isascii():
        return text, 0, 0
    first = _SURROGATE.search(text)
    if first is None:
        return text, 0, 0
    line = text.count("\n", 0, first.start())
    cleaned, n = _SURROGATE.subn("\ufffd", text)
    return cleaned, n, line


def cut(text: str, limit: int) -> tuple[str, int]:
    """A prefix of at most `limit` code points ending just before a top-level
    `def`/`class`/decorator line (else at a line break), and the number of
    whole lines it holds."""
    if len(text) <= limit:
        return text, text.count("\n") + 1
    end = None
    for m in _TOP_LEVEL.finditer(text, 0, limit):
        end = m.start()
    if not end:
        end = text.rfind("\n", 0, limit) + 1
    prefix = text[:end]
    return prefix, prefix.count("\n")


def surrogate_notice(name: str, count: int, line: int) -> Notice:
    what = "an unpaired surrogate" if count == 1 else f"{count} unpaired surrogates"
    return Notice("surrogates", f"{name} contains {what} (invalid Unicode, first on line "
                  f"{line + 1}); pallas-lsp read {'it' if count == 1 else 'them'} as U+FFFD",
                  "log")


def cut_notice(name: str, length: int, lines: int, why: str) -> Notice:
    return Notice("cut", f"pallas-lsp checked only lines 1-{lines} of {name}: {why}; nothing "
                  f"after line {lines} is checked", "info")


def too_large(length: int) -> str:
    return f"it has {length:,} characters, more than the {MAX_BYTES:,} it analyses"


def internal_notice(name: str, error: str) -> Notice:
    return Notice("internal", f"pallas-lsp could not analyse {name} ({error}); it shows no "
                  "diagnostics for it. Please report this.", "warning")


__all__ = ["MAX_BYTES", "Notice", "clean_surrogates", "cut", "surrogate_notice", "cut_notice",
           "too_large", "internal_notice"]
