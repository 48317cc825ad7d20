"""Signature help for the Pallas APIs: the signature (from the extracted API
docs) and, for each argument, what the engine knows of the value passed,
e.g. `src_ref: Ref[VMEM f32[8,128]] ← x_ref.at[i]`.

The call around the cursor is found in the text, not the AST: while an
argument list is being typed the line does not parse (the engine blanks it).
Argument values come from the engine's record of that call when the code is
complete, else from what the engine knows of the argument's base name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types

from pallas_lsp.engine.model import (Analysis, Array, Descriptor, NameInfo, Ref, Seq, Span,
                                     Unknown, Value)
from pallas_lsp.engine.records import replace
from pallas_lsp.lsp import hover as hover_mod
from pallas_lsp.lsp.inlay import short_kind
from pallas_lsp.lsp.positions import LineIndex

MAX_BACK = 4000  # characters searched backwards for the open parenthesis
MAX_FORWARD = 4000
_CALLEE = re.compile(r"([^\W\d]\w*(?:\s*\.\s*[^\W\d]\w*)*)\s*$")
_KEYWORD = re.compile(r"\s*([^\W\d]\w*)\s*=(?!=)")
_ARG_EXPR = re.compile(r"\s*([^\W\d]\w*)((?:\s*(?:\.\s*at\s*)?\[[^\[\]]*\])*)\s*$")


@dataclass
class CallText:
    callee: str  # dotted, as written
    callee_offset: int  # absolute offset of the callee's first character
    args: list[tuple[int, str]]  # (absolute offset, text) of each argument
    active: int  # index of the argument the cursor is in


def _code_mask(text: str, start: int) -> list[bool]:
    """For text[start:], True where a character is code (not in a string or
    a comment). Starts at a line start, so it cannot begin inside a comment;
    a string opened before `start` is the one thing that fools it."""
    mask = [True] * (len(text) - start)
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k - start] = False
            i = j
            continue
        if ch in "'\"":
            quote = text[i:i + 3] if text[i:i + 3] in ("'''", '"""') else ch
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    j += len(quote)
                    break
                if len(quote) == 1 and text[j] == "\n":
                    break
                j += 1
            for k in range(i, min(j, n)):
                mask[k - start] = False
            i = j
            continue
        i += 1
    return mask


def call_at(text: str, offset: int) -> CallText | None:
    """The innermost call whose argument list contains `offset`."""
    begin = max(0, offset - MAX_BACK)
    begin = text.rfind("\n", 0, begin) + 1 if begin else 0
    end = min(len(text), offset + MAX_FORWARD)
    mask = _code_mask(text[:end], begin)
    code = lambda i: mask[i - begin]  # noqa: E731
    depth = 0
    i = offset - 1
    while i >= begin:
        ch = text[i]
        if code(i):
            if ch in ")]}":
                depth += 1
            elif ch in "([{":
                if depth:
                    depth -= 1
                elif ch == "(":
                    m = _CALLEE.search(text, begin, i)
                    if m is not None and m.end() == i and _not_keyword(m.group(1)):
                        return _arguments(text, m.group(1), m.start(1), i, offset, end, code)
                    # a parenthesised expression, a list, a dict: look further out
        i -= 1
    return None


def _statement_ends(text: str, newline: int, indent: int) -> bool:
    """Does the next non-blank line start at or left of `indent`?"""
    j = newline + 1
    while True:
        k = text.find("\n", j)
        line = text[j:] if k < 0 else text[j:k]
        if line.strip():
            return len(line) - len(line.lstrip()) <= indent and not line.lstrip().startswith(
                (")", "]", "}"))
        if k < 0:
            return True
        j = k + 1


def _not_keyword(callee: str) -> bool:
    return callee.split(".")[-1].strip() not in ("if", "while", "for", "in", "return", "and",
                                                 "or", "not", "elif", "with", "assert", "yield")


def _arguments(text: str, callee: str, callee_at: int, paren: int, cursor: int, end: int,
               code) -> CallText:
    args: list[tuple[int, str]] = []
    depth, start, active = 0, paren + 1, 0
    line_start = text.rfind("\n", 0, callee_at) + 1
    indent = len(text[line_start:callee_at]) - len(text[line_start:callee_at].lstrip())
    i = paren + 1
    while i < end:
        ch = text[i]
        if ch == "\n" and i >= cursor and _statement_ends(text, i, indent):
            break  # an unclosed call being typed: the next statement is not ours
        if code(i):
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                args.append((start, text[start:i]))
                start = i + 1
                if i < cursor:
                    active = len(args)
        i += 1
    last = text[start:i]
    if last.strip() or args or start <= cursor:
        args.append((start, last))
    callee = re.sub(r"\s+", "", callee)
    return CallText(callee, callee_at, args, active)


# ---------------------------------------------------------------- values


def _nearest(names: list[NameInfo], name: str, line: int, col: int) -> NameInfo | None:
    """The last occurrence of `name` at or before (line, col) whose value the
    engine knows (uses are recorded in source order)."""
    best = None
    for info in names:
        if (info.span.line, info.span.col) > (line, col):
            break
        if info.name == name and not isinstance(info.value, Unknown):
            best = info
    return best


def guess_value(arg: str, names: list[NameInfo], line: int, col: int) -> Value | None:
    """What `x`, `x.at[i]`, `x[...]` denote, from what the engine knows of `x`."""
    m = _ARG_EXPR.match(arg)
    if m is None:
        return None
    info = _nearest(names, m.group(1), line, col)
    if info is None:
        return None
    value = info.value
    rest = re.sub(r"\s+", "", m.group(2))
    while rest and value is not None:
        if rest.startswith(".at["):
            close = rest.index("]")
            value = replace(value, view=True, shape=None) if isinstance(value, Ref) else None
            rest = rest[close + 1:]
        elif rest.startswith("["):
            close = rest.index("]")
            whole = rest[1:close] in ("...", ":")
            if isinstance(value, Ref):
                value = Array(origin=f"read of {m.group(1)}", dtype=value.dtype, sem=value.sem,
                              shape=value.shape if whole else None)
            elif not isinstance(value, Seq):
                value = None
            else:
                value = None
            rest = rest[close + 1:]
        else:
            value = None
    return value


def describe(value: Value | None) -> str | None:
    if value is None or isinstance(value, Unknown):
        return None
    if not isinstance(value, (Ref, Array, Descriptor, Seq)):
        return None
    return short_kind(NameInfo(span=Span(0, 0, 0, 0), name="", value=value))


# ---------------------------------------------------------------- the answer


_POSITIONAL = ("positional_only", "positional_or_keyword")


def _label(name: str, params: list[dict]) -> tuple[str, list[tuple[int, int]]]:
    """`name(p1, p2=1, *, p3)` and each parameter's [start, end) in it."""
    text = f"{name.rsplit('.', 1)[-1]}("
    spans = []
    star_done = any(p["kind"] == "var_positional" for p in params)
    for i, p in enumerate(params):
        if i:
            text += ", "
        if p["kind"] == "keyword_only" and not star_done:
            text += "*, "
            star_done = True
        piece = {"var_positional": "*", "var_keyword": "**"}.get(p["kind"], "") + p["name"]
        if p.get("annotation"):
            piece += f": {p['annotation'].strip(chr(39))}"
        if p.get("default") is not None:
            piece += f" = {p['default']}" if p.get("annotation") else f"={p['default']}"
        spans.append((len(text), len(text) + len(piece)))
        text += piece
        if p["kind"] == "positional_only" and (i + 1 == len(params)
                                               or params[i + 1]["kind"] != "positional_only"):
            text += ", /"
    return text + ")", spans


def _param_for(params: list[dict], index: int, keyword: str | None) -> int | None:
    if keyword is not None:
        for i, p in enumerate(params):
            if p["name"] == keyword and p["kind"] != "positional_only":
                return i
        for i, p in enumerate(params):
            if p["kind"] == "var_keyword":
                return i
        return None
    positional = [i for i, p in enumerate(params) if p["kind"] in _POSITIONAL]
    if index < len(positional):
        return positional[index]
    for i, p in enumerate(params):
        if p["kind"] == "var_positional":
            return i
    return None


def _recorded(analysis: Analysis, api: str, line: int, col: int):
    for call in analysis.calls:
        if call.api == api and call.span.line == line and call.span.col == col:
            return call
    return None


def signature_help(text: str, index: LineIndex, line: int, col: int, analysis: Analysis,
                   docs, markdown: bool = True) -> types.SignatureHelp | None:
    """`line`/`col` in code points. `docs` is an api_docs.ApiDocs."""
    offset = index.offset(line, col)
    found = call_at(text, offset)
    if found is None:
        return None
    api = hover_mod.api_name_from_imports(found.callee, index.lines)
    if api is None:
        return None
    params = docs.params(api) if docs is not None else None
    doc = docs.lookup(api) if docs is not None else None
    callee_pos = index.pos_at(found.callee_offset)
    call = _recorded(analysis, api, callee_pos.line, callee_pos.col)
    positional = 0
    rows: list[str] = []
    per_param: dict[int, str] = {}
    active_param = None
    fallback: list[tuple[str, str]] = []  # (label, row) when the signature is unknown
    for i, (start, arg_text) in enumerate(found.args):
        m = _KEYWORD.match(arg_text)
        keyword = m.group(1) if m else None
        expr = arg_text[m.end():] if m else arg_text
        if arg_text.lstrip().startswith("*"):
            keyword = None
        p_index = _param_for(params, positional, keyword) if params is not None else None
        name = params[p_index]["name"] if p_index is not None else (keyword or f"#{positional}")
        value = _value_of(call, positional, keyword) if call is not None else None
        if value is None:
            where = index.pos_at(start)
            value = guess_value(expr, analysis.names, where.line, where.col)
        kind = describe(value)
        shown = " ".join(expr.split())
        if len(shown) > 40:
            shown = shown[:39] + "…"
        row = f"{name}: {kind} ← {shown}" if kind else f"{name} ← {shown}" if shown else name
        if i == found.active:
            active_param = p_index if params is not None else i
        if p_index is not None and kind:
            per_param[p_index] = row
        if shown:
            rows.append(row)
        fallback.append((name, row))
        if keyword is None:
            positional += 1
    if params is not None:
        label, spans = _label(api, params)
        infos = [types.ParameterInformation(label=span, documentation=per_param.get(k))
                 for k, span in enumerate(spans)]
    else:
        label = f"{api.rsplit('.', 1)[-1]}(" + ", ".join(n for n, _ in fallback) + ")"
        infos, at = [], len(api.rsplit(".", 1)[-1]) + 1
        for n, row in fallback:
            infos.append(types.ParameterInformation(label=(at, at + len(n)),
                                                    documentation=row))
            at += len(n) + 2
    documentation = _documentation(api, rows, doc, markdown)
    sig = types.SignatureInformation(label=label, documentation=documentation, parameters=infos,
                                     active_parameter=active_param)
    return types.SignatureHelp(signatures=[sig], active_signature=0,
                               active_parameter=active_param)


def _value_of(call, positional: int, keyword: str | None) -> Value | None:
    n = 0
    for a in call.args:
        if keyword is not None and a.keyword == keyword:
            return a.value
        if keyword is None and a.keyword is None:
            if n == positional:
                return a.value
            n += 1
    return None


def _documentation(api: str, rows: list[str], doc, markdown: bool):
    parts = []
    if rows:
        listing = "\n".join(rows)
        parts.append(f"```text\n{listing}\n```" if markdown else listing)
    if doc is not None and doc.docstring:
        first = doc.docstring.strip().split("\n\n", 1)[0]
        parts.append(first)
    if not parts:
        return None
    text = "\n\n".join(parts)
    if markdown:
        return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)
    return types.MarkupContent(kind=types.MarkupKind.PlainText, value=text)
