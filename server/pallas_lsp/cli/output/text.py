"""The formats for people: `concise` (one line per problem, for grep and
editors' problem matchers) and `full` (the source line with the range
underlined, the related locations with their lines, the fix)."""
from __future__ import annotations

import os
import sys

from pallas_lsp.cli.output import Loc, Row, loc_lines


class Style:
    """ANSI colours on a terminal (NO_COLOR turns them off, FORCE_COLOR on)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream) -> "Style":
        if os.environ.get("NO_COLOR"):
            return cls(False)
        if os.environ.get("FORCE_COLOR"):
            return cls(True)
        return cls(hasattr(stream, "isatty") and stream.isatty())

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def red(self, t: str) -> str:
        return self._wrap("1;31", t)

    def yellow(self, t: str) -> str:
        return self._wrap("1;33", t)

    def cyan(self, t: str) -> str:
        return self._wrap("36", t)

    def blue(self, t: str) -> str:
        return self._wrap("1;34", t)

    def green(self, t: str) -> str:
        return self._wrap("32", t)

    def level(self, severity: str, text: str) -> str:
        return self.red(text) if severity == "error" else self.yellow(text) \
            if severity == "warning" else self.cyan(text)


def _head(row: Row, style: Style) -> str:
    mark = " [*]" if row.fixable else ""
    return f"{style.bold(row.code)}{mark} {style.level(row.severity, row.severity + ':')}"


def concise(rows: list[Row], *, style: Style | None = None, show_fixes: bool = False,
            **_) -> str:
    style = style or Style(False)
    out = []
    for r in rows:
        where = f"{r.loc.where}:"
        out.append(f"{style.bold(where)} {_head(r, style)} {r.text}")
        if show_fixes and r.fix is not None:
            out.append(f"    fix ({'safe' if r.fix.safe else 'unsafe'}): {r.fix.title}")
    return "\n".join(out) + ("\n" if out else "")


def full(rows: list[Row], *, style: Style | None = None, texts: dict | None = None, **_) -> str:
    style = style or Style(False)
    cache: dict = dict(texts or {})
    blocks = []
    for r in rows:
        # One gutter width for the whole block, from the largest line number shown.
        numbers = [min(r.loc.end_line, r.loc.line + 4) + 1] + [
            min(loc.end_line, loc.line + 4) for loc, _ in r.related]
        width = len(str(max(numbers)))
        pad = " " * width
        lines = [f"{_head(r, style)} {style.bold(r.message)}",
                 f"{pad}{style.blue('-->')} {r.loc.where}"]
        lines += _snippet(r.loc, cache, style, r.severity, width)
        if r.detail:
            lines.append(f"{pad} {style.blue('=')} {r.detail}")
        for loc, message in r.related:
            lines.append(f"{pad}{style.blue(':::')} {loc.where}: {message}")
            lines += _snippet(loc, cache, style, "info", width, context=0)
        if r.fix is not None:
            how = ("safe fix" if r.fix.safe else
                   "unsafe fix, applied with `--fix --unsafe-fixes`")
            lines.append(f"{style.cyan('help:')} {r.fix.title} ({how})")
            lines += _fix_preview(r, cache, style, width)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _gutter(width: int, style: Style, number: int | None = None) -> str:
    n = str(number) if number is not None else ""
    return style.blue(f"{n:>{width}} |")


def _snippet(loc: Loc, cache: dict, style: Style, severity: str, width: int,
             context: int = 1) -> list[str]:
    lines = loc_lines(loc, cache)
    if not lines or loc.line < 1 or loc.line > len(lines):
        return []
    first = max(1, loc.line - context)
    last = min(len(lines), max(loc.line, loc.end_line))
    if last - loc.line > 4:  # a long range: its first lines are enough
        last = loc.line + 4
    out = [_gutter(width, style)]
    for n in range(first, min(len(lines), last + context) + 1):
        text = lines[n - 1].replace("\t", " ")  # one column per code point, as the spans
        out.append(f"{_gutter(width, style, n)} {text}".rstrip())
        if loc.line <= n <= last:
            start = loc.col - 1 if n == loc.line else len(text) - len(text.lstrip())
            end = loc.end_col - 1 if n == loc.end_line else len(text)
            if n == loc.line == loc.end_line and end <= start:
                end = start + 1
            if end > start:
                marks = style.level(severity, "^" * (end - start))
                out.append(f"{_gutter(width, style)} {' ' * start}{marks}")
    out.append(_gutter(width, style))
    return out


def _fix_preview(row: Row, cache: dict, style: Style, width: int) -> list[str]:
    """The lines the fix changes, before (-) and after (+)."""
    from pallas_lsp.check.fixes import _offset, offsets

    lines = loc_lines(row.loc, cache)
    if not lines or row.fix is None:
        return []
    text = "\n".join(lines)
    starts = offsets(text)
    edits = []
    for e in row.fix.edits:
        if e.span.path and os.path.abspath(e.span.path) != row.loc.path and \
                os.path.realpath(e.span.path) != os.path.realpath(row.loc.path):
            return []
        a = _offset(starts, text, e.span.line, e.span.col)
        b = _offset(starts, text, e.span.end_line, e.span.end_col)
        if a is None or b is None:
            return []
        edits.append((a, b, e.new_text, e.span.line, e.span.end_line))
    if not edits:
        return []
    first = min(e[3] for e in edits)
    last = max(e[4] for e in edits)
    new = text
    for a, b, t, _, _ in sorted(edits, reverse=True):
        new = new[:a] + t + new[b:]
    grow = new.count("\n") - text.count("\n")
    before = lines[first:last + 1]
    after = new.split("\n")[first:last + 1 + grow]
    width = max(width, len(str(last + 1 + max(grow, 0))))
    out = [_gutter(width, style)]
    out += [f"{_gutter(width, style, first + 1 + i)} {style.red('-')} {t}".rstrip()
            for i, t in enumerate(before)]
    out += [f"{_gutter(width, style, first + 1 + i)} {style.green('+')} {t}".rstrip()
            for i, t in enumerate(after)]
    out.append(_gutter(width, style))
    return out


def summary(rows: list[Row], *, fixed: int = 0, fix_mode: bool = False, unsafe: bool = False,
            style: Style | None = None) -> str:
    """ruff-style closing lines."""
    style = style or Style(False)
    n = len(rows)
    if n == 0 and fixed == 0:
        return style.green("All checks passed!")

    def plural(k: int, word: str = "problem") -> str:
        return f"{k} {word}{'s' if k != 1 else ''}"

    if fix_mode:
        out = [f"Found {plural(n + fixed)} ({fixed} fixed, {n} remaining)."]
    else:
        by_level = {}
        for r in rows:
            by_level[r.severity] = by_level.get(r.severity, 0) + 1
        levels = ", ".join(f"{plural(k, lvl)}" for lvl, k in sorted(
            by_level.items(), key=lambda kv: ("error", "warning", "info", "hint").index(kv[0])
            if kv[0] in ("error", "warning", "info", "hint") else 9))
        out = [f"Found {plural(n)}" + (f" ({levels})." if len(by_level) > 1 else ".")]
    fixable = sum(1 for r in rows if r.fixable)
    hidden = sum(1 for r in rows if r.fix is not None and not r.fixable)
    hint = (f"{hidden} more with `--fix --unsafe-fixes`" if hidden and not unsafe else "")
    if fixable:
        again = "`--fix`" if not unsafe else "`--fix --unsafe-fixes`"
        out.append(f"[*] {fixable} fixable with {again}" + (f" ({hint})." if hint else "."))
    elif hint:
        out.append(f"No safe fixes ({hint}).")
    return "\n".join(out)


def statistics(rows: list[Row]) -> str:
    """Problems per code, most frequent first, with the rule's name."""
    from pallas_lsp import catalog
    from pallas_lsp.check.codes import TOOL_CODES

    def name(code: str) -> str:
        entry = catalog.get(code) or TOOL_CODES.get(code)
        return entry.name if entry is not None else ""

    counts: dict[str, list] = {}
    for r in rows:
        entry = counts.setdefault(r.code, [0, 0, name(r.code)])
        entry[0] += 1
        entry[1] += r.fixable
    width = max((len(str(c[0])) for c in counts.values()), default=1)
    out = []
    for code, (n, fixable, message) in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0])):
        mark = "[*]" if fixable else "   "
        out.append(f"{n:>{width}}\t{code}\t{mark} {message}")
    return "\n".join(out)


def stream_style() -> Style:
    return Style.for_stream(sys.stdout)
