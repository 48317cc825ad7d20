"""Hover text. Pure functions that render what the engine, the catalog and
jedi know into Markdown; the server gathers the inputs (some asynchronously)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pallas_lsp.engine.model import NameInfo, Span
from pallas_lsp.lsp import noqa_edit
from pallas_lsp.lsp.convert import _catalog, catalog_entry
from pallas_lsp.lsp.jedi_docs import ApiDoc
from pallas_lsp.lsp.selection import Selected

try:  # the engine's table of Pallas module aliases
    from pallas_lsp.engine.api import canonical, tail
except ImportError:  # pragma: no cover
    def canonical(dotted: str) -> str:
        return dotted

    def tail(name: str) -> str:
        head, _, rest = name.partition(".")
        return rest if head in ("pl", "pltpu") else ""

_IDENT = re.compile(r"[^\W\d]\w*")
_DOTTED = re.compile(r"[^\W\d]\w*(?:\s*\.\s*[^\W\d]\w*)*")
_IMPORT_AS = re.compile(r"^\s*import\s+([\w.]+)\s+as\s+(\w+)")
_IMPORT = re.compile(r"^\s*import\s+([\w.]+)\s*(?:#.*)?$")
_FROM = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+\(?([^#)]*)")
MAX_DOC_LINES = 40


@dataclass(frozen=True)
class Word:
    """The dotted name under the cursor, e.g. `pltpu.make_async_copy` with
    the cursor on `make_async_copy`: `dotted` is the chain up to and
    including the part under the cursor."""

    dotted: str
    span: Span  # of the part under the cursor


def word_at(line_text: str, line: int, col: int) -> Word | None:
    for m in _DOTTED.finditer(line_text):
        if m.start() <= col <= m.end():
            text = m.group(0)
            parts = [(p.start() + m.start(), p.end() + m.start()) for p in _IDENT.finditer(text)]
            for i, (s, e) in enumerate(parts):
                if s <= col <= e:
                    dotted = ".".join(line_text[a:b] for a, b in parts[: i + 1])
                    return Word(dotted, Span(line, s, line, e))
            return None
    return None


def import_aliases(lines: list[str]) -> dict[str, str]:
    """alias -> module path from the file's import statements (one-line
    forms; a cheap scan, good enough to name an API when jedi is absent)."""
    out: dict[str, str] = {}
    for text in lines:
        m = _IMPORT_AS.match(text)
        if m:
            out[m.group(2)] = m.group(1)
            continue
        m = _IMPORT.match(text)
        if m:
            out[m.group(1).split(".")[0]] = m.group(1).split(".")[0]
            continue
        m = _FROM.match(text)
        if m:
            for item in m.group(2).split(","):
                bits = item.split()
                if len(bits) == 3 and bits[1] == "as":
                    out[bits[2]] = f"{m.group(1)}.{bits[0]}"
                elif len(bits) == 1 and bits[0].isidentifier():
                    out[bits[0]] = f"{m.group(1)}.{bits[0]}"
    return out


def api_name_from_imports(dotted: str, lines: list[str]) -> str | None:
    """Canonical Pallas name (e.g. `pltpu.make_async_copy`) of `dotted`, or
    None when it is not a Pallas API."""
    root, _, rest = dotted.partition(".")
    module = import_aliases(lines).get(root)
    if module is None:
        return None
    name = canonical(f"{module}.{rest}" if rest else module)
    return name if tail(name) else None


_NOT_USER = ("jax", "jaxlib", "numpy", "functools", "math", "typing", "dataclasses", "os", "sys")


def imported_from_user_code(dotted: str, lines: list[str]) -> bool:
    """Is the root of `dotted` imported from a module that is not jax (nor
    the standard library's usual suspects)? Then only jedi can tell whether
    it is a re-exported Pallas API."""
    module = import_aliases(lines).get(dotted.partition(".")[0])
    return bool(module) and module.split(".")[0] not in _NOT_USER


def api_name_from_jedi(doc: ApiDoc | None) -> str | None:
    if doc is None or not doc.is_pallas:
        return None
    name = canonical(doc.full_name)
    return name if tail(name) else doc.full_name


# ------------------------------------------------------------------ catalog


def entries_for_api(api_name: str) -> list:
    """Catalog entries that document `api_name` (e.g. pltpu.make_async_copy):
    entries whose summary or description names the call in backticks."""
    leaf = tail(api_name) or api_name.rsplit(".", 1)[-1]
    for attr in ("for_api", "entries_for_api"):  # an explicit index, if the catalog has one
        fn = getattr(_catalog, attr, None)
        if callable(fn):
            try:
                return list(fn(api_name))
            except Exception:
                return []
    prose = re.compile(r"`(?:[A-Za-z_]\w*\.)*" + re.escape(leaf) + r"\b")
    call = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*" + re.escape(leaf) + r"\s*\(")
    try:
        entries = list(_catalog.load().values())
    except Exception:
        return []
    out = []
    for e in entries:
        apis = getattr(e, "apis", None)
        if apis:
            if api_name in apis or leaf in apis:
                out.append(e)
        elif prose.search(e.summary) or prose.search(e.what) or \
                any(call.search(line) for line in _bug_lines(e)):
            out.append(e)
    return out


def _bug_lines(entry) -> list[str]:
    """Lines of the entry's `before` example that its `after` changes: the
    buggy call itself, not the calls around it."""
    after = set(line.strip() for line in getattr(entry, "after", "").splitlines())
    return [line for line in getattr(entry, "before", "").splitlines()
            if line.strip() and line.strip() not in after and not line.strip().startswith("#")]


def jax_location(entry, jax_root: Path | None):
    """(abs path, 1-based line) of the entry's raise site in the user's jax."""
    if entry is None:
        return None
    try:
        if jax_root is not None:
            path = jax_root / entry.raised_file
            if path.is_file():
                line = _catalog.find_template(path, entry.jax_message, entry.raised_line)
                if line is not None:
                    return str(path.resolve()), line
            return None
        return _catalog.find_in_installed_jax(entry)
    except Exception:
        return None


def _file_link(path: str, line: int) -> str:
    uri = Path(path).as_uri()
    return f"[{Path(path).name}:{line}]({uri}#L{line})"


# ------------------------------------------------------------------ sections


def catalog_section(code: str, location, fallback_message: str | None = None) -> str:
    entry = catalog_entry(code)
    head = f"**{code}**: {fallback_message}" if fallback_message else ""
    if entry is None:
        return head or f"**{code}**"
    text = entry.to_markdown().rstrip()
    if head:
        text = f"{head}\n\n---\n\n{text}"
    if location is not None:
        text += (f"\n\nIn your installed jax, this is raised at "
                 f"{_file_link(location[0], location[1])}.")
    return text


def name_section(info: NameInfo) -> str:
    kind = info.value.describe()
    role = "parameter" if info.is_param else "variable"
    text = f"```text\n({role}) {info.name}: {kind}\n```"
    origin = getattr(info.value, "origin", "")
    if origin:
        text += f"\n\nFrom: {origin}"
    return text


def api_section(api_name: str, doc: ApiDoc | None, entries: list) -> str:
    parts = []
    if doc is not None and doc.signatures:
        sigs = "\n".join(doc.signatures)
        parts.append(f"```python\n{sigs}\n```")
    else:
        parts.append(f"```python\n{api_name}\n```")
    if doc is not None:
        if doc.full_name and canonical(doc.full_name) != doc.full_name:
            parts.append(f"`{api_name}` (defined in `{doc.full_name}`)")
        lines = doc.docstring.strip().splitlines()
        if lines:
            body = "\n".join(lines[:MAX_DOC_LINES])
            if len(lines) > MAX_DOC_LINES:
                body += "\n…"
            parts.append(f"```text\n{body}\n```")
    else:
        parts.append(f"`{api_name}`: Pallas API (signature and docs need jax "
                     "in the configured Python environment).")
    if entries:
        rows = [f"- **{e.code}** `{e.name}`: {e.summary}" for e in entries]
        parts.append("**Errors pallas-lsp checks for this call**\n\n" + "\n".join(rows))
    return "\n\n".join(parts)


def findings_at(selected: list[Selected], line: int, col: int) -> list[Selected]:
    return [s for s in selected if s.finding.span.contains(line, col)]


def noqa_code_at(line_text: str, col: int) -> str | None:
    return noqa_edit.code_at(line_text, col)


def join_sections(sections: list[str]) -> str:
    return "\n\n---\n\n".join(s for s in sections if s)


def to_plaintext(markdown: str) -> str:
    """Crude Markdown -> text for clients without Markdown hovers."""
    text = re.sub(r"```\w*\n?", "", markdown)
    text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1 (\2)", text)
    return text.replace("**", "").replace("`", "")


def launch_sections(analysis, line: int, col: int) -> list[str]:
    """The scoped VMEM estimate of the TPU pallas_call under the cursor, once
    (the engine already gives one note per launch site)."""
    return list(dict.fromkeys(text for span, text in getattr(analysis, "launch_notes", ())
                              if span.line == line and span.col <= col <= span.end_col))

