"""The error catalog: one TOML file per diagnostic code (``catalog/PAL101.toml``...).

Each entry ties a pallas-lsp code to the exact message JAX raises for the same
mistake, where JAX raises it, and the documentation shown in hovers, in
``pallas-lsp rule PAL101``-style output and on the docs site.

This module never imports jax. ``find_in_installed_jax`` reads the installed
jax sources as text to locate a raise site.
"""
from __future__ import annotations

import dataclasses

import ast
import functools
import importlib.resources
import importlib.util
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

__all__ = [
    "CatalogError",
    "Entry",
    "PHASES",
    "SEVERITIES",
    "FIX_SAFETIES",
    "load",
    "load_dir",
    "get",
    "match_message",
    "find_in_installed_jax",
    "catalog_dir",
]

PHASES = frozenset({"trace", "construction", "interpret", "discharge", "lojax", "lowering",
                    "compile"})
SEVERITIES = frozenset({"error", "warning", "information", "hint"})
FIX_SAFETIES = frozenset({"safe", "unsafe", "none"})

_CODE_RE = re.compile(r"^PAL\d{3}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# A `{...}` placeholder in a message template (f-string replacement field).
_PLACEHOLDER_RE = re.compile(r"\{[^{}]*\}")

_TOP_STR_KEYS = ("code", "name", "summary", "exception", "phase",
                 "severity", "fix_safety")
_TOP_KEYS = frozenset(_TOP_STR_KEYS) | {"jax_message", "jax_behaviour", "related",
                                        "also_matches", "raised_at", "doc", "on_tpu"}
# Codes whose entries must describe JAX's behaviour in `jax_behaviour` (protocol
# mistakes JAX does not raise for: it hangs, drops, prints or logs).
_BEHAVIOUR_PREFIXES = ("PAL3",)
_RAISED_KEYS = ("file", "function", "line", "jax_version")
_DOC_STR_KEYS = ("what", "why", "fix", "before", "after")
_DOC_KEYS = frozenset(_DOC_STR_KEYS) | {"causes"}
# `[on_tpu]`: what a real chip did with the rule's buggy kernels (optional).
TPU_OUTCOMES = frozenset({"error", "hang", "core-halt", "wrong-result", "runs"})
_TPU_KEYS = frozenset({"generation", "jax_version", "date", "outcomes", "message", "note",
                       "record"})


class CatalogError(ValueError):
    """A catalog file is missing, unreadable or does not follow the schema."""


def _fragments(template: str) -> list[str]:
    """The literal pieces of a message template, split on `{...}` placeholders."""
    return [p for p in _PLACEHOLDER_RE.split(template) if p]


def _template_regex(template: str) -> str:
    return ".+?".join(re.escape(p) for p in _PLACEHOLDER_RE.split(template))


@dataclass(frozen=True)
class TpuRecord:
    """What the rule's buggy kernels did on a real TPU, measured (not predicted)."""

    generation: str  # "v5e"
    jax_version: str
    date: str
    outcomes: tuple[str, ...]  # of TPU_OUTCOMES, one per kind of result seen
    message: str  # the chip's words (a fragment), "" when it raised nothing
    note: str
    record: str  # the recording in this repository that backs the claim

    def to_markdown(self) -> str:
        said = ", ".join(o.replace("-", " ") for o in self.outcomes)
        out = [f"Measured on a TPU {self.generation} chip (jax {self.jax_version}, {self.date}): "
               f"{said}."]
        if self.message:
            out += ["", "```", self.message, "```"]
        if self.note:
            out += ["", self.note]
        return "\n".join(out)


@dataclass(frozen=True)
class Entry:
    code: str
    name: str
    summary: str
    jax_message: str
    exception: str
    phase: str
    severity: str
    fix_safety: str
    related: tuple[str, ...]
    also_matches: tuple[str, ...]
    raised_file: str
    raised_function: str
    raised_line: int
    jax_version: str
    what: str
    why: str
    causes: tuple[str, ...]
    fix: str
    before: str
    after: str
    # What JAX does (measured) when it does not raise: hangs, drops, prints, logs.
    # Required for PAL3xx and for every entry whose `jax_message` is empty.
    jax_behaviour: str = ""
    on_tpu: TpuRecord | None = None

    # ------------------------------------------------------------ matching

    @property
    def templates(self) -> tuple[str, ...]:
        """`jax_message` (if any) followed by every `also_matches` template."""
        return tuple(t for t in (self.jax_message, *self.also_matches) if t)

    def message_regex(self) -> re.Pattern[str]:
        """Regex for the formatted `jax_message` (placeholders become `.+?`)."""
        return _compiled(self.jax_message)

    def matches(self, text: str) -> bool:
        """True if `jax_message` or an `also_matches` message occurs in `text`."""
        return any(_compiled(t).search(text) for t in self.templates)

    def match_score(self, text: str) -> int:
        """Literal length of the longest template found in `text`, or -1."""
        best = -1
        for t in self.templates:
            if _compiled(t).search(text):
                best = max(best, sum(len(f) for f in _fragments(t)))
        return best

    # ------------------------------------------------------------ rendering

    def source_link(self, jax_source_url: str | None = None) -> str:
        if not self.raised_file:
            return ""
        loc = f"`{self.raised_file}:{self.raised_line}`"
        if not jax_source_url:
            return loc
        if "{file}" in jax_source_url or "{line}" in jax_source_url:
            url = jax_source_url.format(file=self.raised_file, line=self.raised_line)
        else:
            url = f"{jax_source_url.rstrip('/')}/{self.raised_file}#L{self.raised_line}"
        return f"[{loc}]({url})"

    def to_dict(self) -> dict:
        """JSON-ready form (for `pallas-lsp rule --output-format json`)."""
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def to_markdown(self, jax_source_url: str | None = None) -> str:
        """Render the entry like `ruff rule <code>`.

        `jax_source_url` is either a base URL (``.../blob/jax-v0.10.2``), to
        which ``/<file>#L<line>`` is appended, or a format string with
        ``{file}`` and ``{line}`` fields.
        """
        out: list[str] = [f"# {self.code} ({self.name})", "", self.summary, ""]
        out += [
            f"Phase: {self.phase} · Exception: `{self.exception}` · "
            f"Severity: {self.severity} · Fix: {self.fix_safety}",
            "",
        ]
        if self.jax_message:
            out += ["## JAX's message", "", "```", self.jax_message, "```", ""]
        if self.jax_behaviour:
            out += ["## What JAX does", "", self.jax_behaviour, ""]
        if self.on_tpu is not None:
            out += ["## On a real TPU", "", self.on_tpu.to_markdown(), ""]
        if self.also_matches:
            out += ["Also reported as:", ""]
            for m in self.also_matches:
                out += ["```", m, "```", ""]
        out += ["## What it does", "", self.what, ""]
        out += ["## Why is this bad?", "", self.why, ""]
        out += ["## Common causes", ""]
        out += [f"- {c}" for c in self.causes]
        out += ["", "## How to fix", "", self.fix, ""]
        out += ["## Example", "", "```python", self.before, "```", "",
                "Use instead:", "", "```python", self.after, "```", ""]
        if self.raised_file:
            if not self.jax_message:
                verb = "Behaviour comes from"
            elif self.exception.startswith("none"):
                verb = "Reported at"
            else:
                verb = "Raised at"
            out += [
                f"{verb} {self.source_link(jax_source_url)} "
                f"(`{self.raised_function}`, jax {self.jax_version}).",
            ]
        if self.related:
            out += ["", "Related: " + ", ".join(f"`{c}`" for c in self.related)]
        return "\n".join(out) + "\n"


@functools.lru_cache(maxsize=None)
def _compiled(template: str) -> re.Pattern[str]:
    return re.compile(_template_regex(template))


# ---------------------------------------------------------------- loading


def _need(table: dict[str, Any], key: str, kind: type, where: str, src: str) -> Any:
    if key not in table:
        raise CatalogError(f"{src}: missing required key {where}{key!r}")
    value = table[key]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise CatalogError(
            f"{src}: {where}{key!r} must be a {kind.__name__}, got {type(value).__name__}")
    if kind is str and not value.strip():
        raise CatalogError(f"{src}: {where}{key!r} must not be empty")
    return value


def _str_list(table: dict[str, Any], key: str, where: str, src: str,
              required: bool = True) -> tuple[str, ...]:
    if key not in table and not required:
        return ()
    value = _need(table, key, list, where, src)
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise CatalogError(f"{src}: {where}{key!r} must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _check_keys(table: dict[str, Any], allowed: frozenset[str], where: str, src: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise CatalogError(f"{src}: unknown key(s) in {where or 'top level'}: {', '.join(unknown)}")


def _raised_at_required(t: dict[str, Any]) -> bool:
    """`[raised_at]` may be omitted only by an entry whose `jax_message` is empty."""
    msg = t.get("jax_message")
    return not (isinstance(msg, str) and not msg.strip())


def parse_entry(data: bytes | str, source: str, stem: str | None = None) -> Entry:
    """Parse and validate one TOML file. `source` names the file in errors."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CatalogError(f"{source}: not valid UTF-8: {e}") from e
    try:
        t = tomllib.loads(data)
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{source}: invalid TOML: {e}") from e

    _check_keys(t, _TOP_KEYS, "", source)
    top = {k: _need(t, k, str, "", source).strip() for k in _TOP_STR_KEYS}
    has_raised = "raised_at" in t or _raised_at_required(t)
    raised = _need(t, "raised_at", dict, "", source) if has_raised else {}
    doc = _need(t, "doc", dict, "", source)
    _check_keys(raised, frozenset(_RAISED_KEYS), "[raised_at]", source)
    _check_keys(doc, _DOC_KEYS, "[doc]", source)

    code = top["code"]
    if not _CODE_RE.match(code):
        raise CatalogError(f"{source}: code {code!r} is not of the form PAL123")
    if stem is not None and stem != code:
        raise CatalogError(f"{source}: code {code!r} does not match the file name {stem!r}")
    if not _NAME_RE.match(top["name"]):
        raise CatalogError(f"{source}: name {top['name']!r} is not kebab-case")
    for key, allowed in (("phase", PHASES), ("severity", SEVERITIES),
                         ("fix_safety", FIX_SAFETIES)):
        if top[key] not in allowed:
            raise CatalogError(
                f"{source}: {key} {top[key]!r} is not one of {', '.join(sorted(allowed))}")

    if "jax_message" not in t:
        raise CatalogError(f"{source}: missing required key 'jax_message'")
    jax_message = t["jax_message"]
    if not isinstance(jax_message, str):
        raise CatalogError(
            f"{source}: 'jax_message' must be a str, got {type(jax_message).__name__}")
    jax_message = jax_message.strip()
    behaviour = ""
    if "jax_behaviour" in t:
        behaviour = _need(t, "jax_behaviour", str, "", source).strip()
    if code.startswith(_BEHAVIOUR_PREFIXES) and not behaviour:
        raise CatalogError(f"{source}: {code} needs a 'jax_behaviour' (what JAX does)")
    if not jax_message and not behaviour:
        raise CatalogError(
            f"{source}: 'jax_message' is empty; then 'jax_behaviour' is required")

    related = _str_list(t, "related", "", source)
    for r in related:
        if not _CODE_RE.match(r):
            raise CatalogError(f"{source}: related code {r!r} is not of the form PAL123")
    also = _str_list(t, "also_matches", "", source, required=False)

    if has_raised:
        line = _need(raised, "line", int, "[raised_at].", source)
        if line < 1:
            raise CatalogError(f"{source}: [raised_at].line must be >= 1")
        raised_file = _need(raised, "file", str, "[raised_at].", source).strip()
        raised_function = _need(raised, "function", str, "[raised_at].", source).strip()
        jax_version = _need(raised, "jax_version", str, "[raised_at].", source).strip()
    else:  # only allowed for entries without a message (checked above)
        line, raised_file, raised_function, jax_version = 0, "", "", ""

    def block(key: str) -> str:
        return _need(doc, key, str, "[doc].", source).strip("\n")

    return Entry(
        code=code,
        name=top["name"],
        summary=top["summary"],
        jax_message=jax_message,
        exception=top["exception"],
        phase=top["phase"],
        severity=top["severity"],
        fix_safety=top["fix_safety"],
        related=related,
        also_matches=also,
        raised_file=raised_file,
        raised_function=raised_function,
        raised_line=line,
        jax_version=jax_version,
        what=_need(doc, "what", str, "[doc].", source).strip(),
        why=_need(doc, "why", str, "[doc].", source).strip(),
        causes=_str_list(doc, "causes", "[doc].", source),
        fix=_need(doc, "fix", str, "[doc].", source).strip(),
        before=block("before").rstrip(),
        after=block("after").rstrip(),
        jax_behaviour=behaviour,
        on_tpu=_tpu_record(t, source),
    )


def _tpu_record(t: dict[str, Any], source: str) -> TpuRecord | None:
    if "on_tpu" not in t:
        return None
    tpu = _need(t, "on_tpu", dict, "", source)
    _check_keys(tpu, _TPU_KEYS, "[on_tpu]", source)
    outcomes = _str_list(tpu, "outcomes", "[on_tpu].", source)
    bad = [o for o in outcomes if o not in TPU_OUTCOMES]
    if not outcomes or bad:
        raise CatalogError(f"{source}: [on_tpu].outcomes must be some of "
                           f"{', '.join(sorted(TPU_OUTCOMES))}, got {list(outcomes)}")
    text = {k: _need(tpu, k, str, "[on_tpu].", source).strip()
            for k in ("generation", "jax_version", "date", "record")}
    opt = {k: (_need(tpu, k, str, "[on_tpu].", source).strip() if k in tpu else "")
           for k in ("message", "note")}
    return TpuRecord(outcomes=outcomes, **text, **opt)


def _parse_all(files: Iterable[tuple[str, str, bytes]]) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for stem, source, data in sorted(files):
        e = parse_entry(data, source, stem)
        if e.code in entries:
            raise CatalogError(f"{source}: duplicate code {e.code}")
        entries[e.code] = e
    return dict(sorted(entries.items()))


def load_dir(path: str | Path) -> dict[str, Entry]:
    """Load every ``*.toml`` in a directory (uncached)."""
    p = Path(path)
    return _parse_all((f.stem, str(f), f.read_bytes()) for f in p.glob("*.toml"))


def _packaged_files() -> list[tuple[str, str, bytes]]:
    try:
        root = importlib.resources.files("pallas_lsp.catalog_data")
    except (ModuleNotFoundError, ImportError, TypeError, ValueError):
        return []
    try:
        items = [f for f in root.iterdir() if f.is_file() and f.name.endswith(".toml")]
    except (FileNotFoundError, NotADirectoryError, OSError):
        return []
    return [(f.name[: -len(".toml")], str(f), f.read_bytes()) for f in items]


def catalog_dir() -> Path:
    """The source-checkout catalog directory (``<repo>/catalog``)."""
    return Path(__file__).resolve().parents[2] / "catalog"


@functools.lru_cache(maxsize=1)
def load() -> dict[str, Entry]:
    """All catalog entries by code, sorted by code.

    Reads the TOML files shipped in the wheel (package
    ``pallas_lsp.catalog_data``); in a source checkout, where that package does
    not exist, reads ``<repo>/catalog`` instead.
    """
    files = _packaged_files()
    if files:
        return _parse_all(files)
    d = catalog_dir()
    if not d.is_dir() or not any(d.glob("*.toml")):
        raise CatalogError(
            "no catalog found: package 'pallas_lsp.catalog_data' has no TOML files "
            f"and {d} does not exist or is empty")
    return load_dir(d)


def get(code: str) -> Entry | None:
    return load().get(code.strip().upper())


def match_message(text: str) -> Entry | None:
    """The entry whose message occurs in `text` (an exception message or a
    traceback). When several match, the template with the most literal text
    wins; ties go to the lower code (so the shared DMA-semaphore message gives
    PAL103, not PAL104)."""
    best: tuple[int, str] | None = None
    for code, entry in load().items():
        score = entry.match_score(text)
        if score < 0:
            continue
        if best is None or score > best[0] or (score == best[0] and code < best[1]):
            best = (score, code)
    return load()[best[1]] if best else None


# ---------------------------------------------------------------- jax source


def jax_site_root() -> Path | None:
    """The directory that contains the installed ``jax`` package (not imported)."""
    try:
        spec = importlib.util.find_spec("jax")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        pkg = Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin:
        pkg = Path(spec.origin).parent
    else:
        return None
    return pkg.parent


def _joined_template(node: ast.AST) -> str | None:
    """Source text of a string literal as a template: implicit concatenation is
    already joined by `ast`; f-string fields become `{expr}`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                parts.append("{" + ast.unparse(v.value) + "}")
        return "".join(parts)
    return None


def source_strings(text: str) -> list[tuple[str, int]]:
    """(template, line) for every string literal in a Python source. `line` is
    the line of the enclosing ``raise`` if the string is part of one, else the
    string's first line."""
    tree = ast.parse(text)
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, raise_line: int | None) -> None:
        if isinstance(node, ast.Raise):
            raise_line = node.lineno
        elif isinstance(node, ast.stmt):
            raise_line = None
        tmpl = _joined_template(node)
        if tmpl is not None:
            out.append((tmpl, raise_line or node.lineno))  # type: ignore[attr-defined]
            return  # do not descend into the parts of an f-string
        for child in ast.iter_child_nodes(node):
            visit(child, raise_line)

    visit(tree, None)
    return out


@functools.lru_cache(maxsize=64)
def _file_strings(path: str) -> tuple[tuple[str, int], ...]:
    text = Path(path).read_text(encoding="utf-8")
    try:
        return tuple(source_strings(text))
    except SyntaxError:
        return tuple((line, i) for i, line in enumerate(text.splitlines(), 1))


def find_template(path: str | Path, template: str, near: int | None = None) -> int | None:
    """Line (1-based) in `path` of the string literal containing `template`'s
    longest literal fragment, preferring the occurrence closest to `near`."""
    frags = _fragments(template)
    if not frags or not str(path).endswith(".py"):  # compiler messages live in libtpu.so
        return None
    key = max(frags, key=len)
    try:
        strings = _file_strings(str(path))
    except OSError:
        return None
    # Prefer literals that contain every fragment in order, then any with the key.
    full = re.compile(".*?".join(re.escape(f) for f in frags), re.S)
    hits = [ln for s, ln in strings if full.search(s)] or [ln for s, ln in strings if key in s]
    if not hits:
        return None
    if near is None:
        return hits[0]
    return min(hits, key=lambda ln: (abs(ln - near), ln))


def find_in_installed_jax(entry: Entry) -> tuple[str, int] | None:
    """(absolute path, 1-based line) of `entry`'s raise site in the installed
    jax, searched near the recorded line; None if jax or the message is gone."""
    root = jax_site_root()
    if root is None:
        return None
    path = root / entry.raised_file
    if not path.is_file() or path.suffix != ".py":  # e.g. libtpu.so: the compiler's messages
        return None
    line = find_template(path, entry.jax_message, entry.raised_line)
    if line is None:
        return None
    return str(path.resolve()), line
