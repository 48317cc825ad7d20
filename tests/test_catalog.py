"""The error catalog (catalog/*.toml) and its loader (pallas_lsp.catalog).

The source checks read the installed JAX as text (located with
importlib.util.find_spec); jax is never imported here.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from pallas_lsp import catalog

REPO = Path(__file__).resolve().parents[1]
CATALOG_DIR = REPO / "catalog"
TOML_FILES = sorted(CATALOG_DIR.glob("*.toml"))
ENTRIES = catalog.load()
LINE_TOLERANCE = 15

REQUIRED_TOP = {"code", "name", "summary", "jax_message", "exception", "phase",
                "severity", "fix_safety", "related", "raised_at", "doc"}
REQUIRED_RAISED = {"file", "function", "line", "jax_version"}
REQUIRED_DOC = {"what", "why", "causes", "fix", "before", "after"}

# A formatted example of every message -> the code match_message must return.
EXAMPLES = {
    "DMA source/destination/semaphore arguments must be Refs.": "PAL101",
    "DMA source semaphore must be a Ref.": "PAL102",
    "Cannot signal on a non-()-shaped semaphore: (2,)": "PAL103",  # also PAL104's text
    "Either both or neither `src_sem` and `device_id` can be set.": "PAL105",
    "Cannot `wait_send` on a local copy.": "PAL106",
    "dma_start not implemented in LoJAX yet.": "PAL107",
    "dma_wait not implemented in LoJAX yet.": "PAL107",
    "DMA start priority must be non-negative: -1": "PAL108",
    "dma_wait requires a DMA semaphore, but got a regular semaphore."
    " Use pl.semaphore_wait() instead.": "PAL109",
    "Expected the destination semaphore to be a reference": "PAL110",
    "DMA partial discharge add=True not yet implemented.": "PAL111",
    "DMA with add=True is not supported.": "PAL111",
    "ValueError: `JaxprInputEffect` Write<Var(id=1407):float32[8,128]> does not have a"
    " corresponding jaxpr input.": "PAL112",
    "Cannot signal on a non-semaphore Ref: semaphore[]": "PAL201",
    "Cannot wait on a non-semaphore Ref: semaphore[]": "PAL201",
    "Cannot wait on a non-()-shaped semaphore: (2,)": "PAL202",
    "Must wait semaphores of the following types: {<class 'jax._src.pallas.core.semaphore'>,"
    " <class 'jax.numpy.int16'>, <class 'jax._src.pallas.core.barrier_semaphore'>}."
    " Got dma_sem.": "PAL203",
    "Must signal semaphores of the following types: {...}. Got float32.": "PAL203",
    "get_p: Buffers with a memory space of HBM or ANY cannot be referenced directly."
    " Instead, use `pltpu.sync_copy` or `pltpu.async_copy`.": "PAL204",
    "swap_p: Buffers with a memory space of HBM or ANY cannot be referenced directly."
    " Instead, use `pltpu.sync_copy` or `pltpu.async_copy`.": "PAL204",
    "Cannot store a Ref into another Ref. Did you forget to load from it using `[...]`?": "PAL205",
    "Can only call `load` on a `Ref`: JitTracer(float32[8,128]).": "PAL206",
    "Can only call `store` on a `Ref`: JitTracer(float32[8,128]).": "PAL206",
    "Non-decrementing wait is not supported.": "PAL207",
    "Cannot allocate HBM in `run_scoped`.": "PAL208",
    "shift must be non-negative.": "PAL209",
    "axis is out of range.": "PAL209",
    "stride and stride_axis must be both specified or not.": "PAL209",
    "ERROR:root:AsyncCopyDescriptor was not used."
    " Did you mean to call `start` or `wait` on it?": "PAL301",
    "Semaphore 2000 has non-zero count for 0 (global core 0) at kernel exit: 4096": "PAL302",
    "The Pallas TPU lowering currently requires that the last two dimensions of your block"
    " shape are divisible by 8 and 128 respectively, or be equal to the respective dimensions"
    " of the overall array. Block spec for args[0] in pallas_call k at k.py:7 ...": "PAL401",
    "Unimplemented primitive in Pallas TPU lowering for tc: sort. Please file an issue": "PAL402",
    "INTERNAL: Mosaic failed to compile TPU kernel: Not implemented: Only vector<i16> and"
    " vector<i32> are supported, but got 'i8'. Please cast your input.": "PAL403",
    "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space"
    " vmem. Scoped allocation with size 32.00M and limit 16.00M exceeded scoped vmem limit by"
    " 16.00M.": "PAL404",
    "XLA:TPU compile permanent error. Ran out of memory in memory space vmem. Used 24.00M of"
    " 16.00M vmem.": "PAL404",
    "INTERNAL: Mosaic failed to compile TPU kernel: Invalid vector type for load": "PAL405",
    "Only single (1) and double (2) buffering are supported. Got 3.": "PAL407",
    "Pallas encountered an internal verification error. Please file a bug at https://github.com/"
    "jax-ml/jax/issues/new/choose. Error details: 'tpu.wait_dma2' op DMA wait semaphore must be"
    " rank 0": "PAL406",
    "ValueError: Out of bound slice: start=8, size=16, stride=1, dim=16.": "PAL306",
    "Out of bound slice: start=16, dim=16.": "PAL306",
}
# PAL104's message is word for word PAL103's; the text alone cannot select it.
UNREACHABLE_BY_TEXT = {"PAL104"}
# Entries for mistakes JAX has no message for (it hangs, truncates...): they
# describe the behaviour in `jax_behaviour` instead.
NO_MESSAGE = {c for c, e in ENTRIES.items() if not e.jax_message}
WITH_MESSAGE = sorted(set(ENTRIES) - NO_MESSAGE)


# ---------------------------------------------------------------- helpers


def _jax_root() -> Path:
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("jax is not installed")
    return Path(next(iter(spec.submodule_search_locations))).parent


def _literal_templates(path: Path) -> list[tuple[str, int]]:
    """Every string literal in `path` as (template, first line). `ast` joins
    implicit concatenation; f-string fields are written `{expr}`."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    parts.append("{" + ast.unparse(v.value) + "}")
                else:
                    parts.append(v.value)
            out.append(("".join(parts), node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.value, node.lineno))
    return out


_STRINGS: dict[Path, list[tuple[str, int]]] = {}


def _strings(path: Path) -> list[tuple[str, int]]:
    if path not in _STRINGS:
        _STRINGS[path] = _literal_templates(path)
    return _STRINGS[path]


def _occurrences(path: Path, template: str) -> list[int]:
    """Lines where `template` occurs in a string literal of `path`, placeholder
    names included. Falls back to the literal fragments (split on `{...}`)
    appearing in order, in case JAX renamed an f-string variable."""
    exact = [ln for s, ln in _strings(path) if template in s]
    if exact:
        return exact
    frags = [f for f in re.split(r"\{[^{}]*\}", template) if f]
    pat = re.compile(".*?".join(re.escape(f) for f in frags), re.S)
    return [ln for s, ln in _strings(path) if pat.search(s)]


def _binary_has(path: Path, template: str) -> bool:
    """Every literal fragment of `template` occurs in the binary `path` (the
    compiler's messages, in libtpu.so)."""
    import mmap

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return all(m.find(f.encode()) >= 0 for f in re.split(r"\{[^{}]*\}", template) if f)


def _compiler_file(e) -> bool:
    return not e.raised_file.endswith(".py")


# ---------------------------------------------------------------- schema


def test_catalog_dir_has_entries():
    assert TOML_FILES, f"no TOML files in {CATALOG_DIR}"
    assert sorted(ENTRIES) == [p.stem for p in TOML_FILES]


@pytest.mark.parametrize("path", TOML_FILES, ids=lambda p: p.stem)
def test_toml_has_required_keys(path: Path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert REQUIRED_TOP <= set(data), f"{path.name}: missing {REQUIRED_TOP - set(data)}"
    assert REQUIRED_RAISED <= set(data["raised_at"]), path.name
    assert REQUIRED_DOC <= set(data["doc"]), path.name
    assert data["code"] == path.stem


@pytest.mark.parametrize("code", sorted(ENTRIES))
def test_entry_fields(code: str):
    e = ENTRIES[code]
    assert re.fullmatch(r"PAL\d{3}", e.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", e.name)
    assert e.phase in catalog.PHASES
    assert e.severity in catalog.SEVERITIES
    assert e.fix_safety in catalog.FIX_SAFETIES
    # "none (logged)", "none (hangs)"...: JAX raises nothing for most PAL3xx.
    assert e.exception.isidentifier() or e.exception.startswith("none ("), e.exception
    for field in ("summary", "what", "why", "fix", "before", "after"):
        assert getattr(e, field).strip(), f"{code}: empty {field}"
    assert e.jax_message or e.jax_behaviour, f"{code}: no jax_message and no jax_behaviour"
    if code.startswith("PAL3"):
        assert e.jax_behaviour, f"{code}: PAL3xx entries need jax_behaviour"
    if e.jax_message or e.raised_file:
        for field in ("raised_file", "raised_function", "jax_version"):
            assert getattr(e, field).strip(), f"{code}: empty {field}"
        assert e.raised_line > 0
    assert e.causes and all(c.strip() for c in e.causes), f"{code}: no causes"
    assert "```" not in e.before + e.after, f"{code}: markdown fence in before/after"
    for snippet in (e.before, e.after):
        ast.parse(snippet)  # the examples are valid Python
    assert e.before != e.after
    for r in e.related:
        assert r in ENTRIES, f"{code}: related code {r} is not in the catalog"
        assert r != code


def test_names_are_unique():
    names = [e.name for e in ENTRIES.values()]
    assert len(names) == len(set(names))


def test_get():
    assert catalog.get("PAL101") is ENTRIES["PAL101"]
    assert catalog.get("pal101") is ENTRIES["PAL101"]
    assert catalog.get("PAL999") is None


# ---------------------------------------------------------------- installed JAX


@pytest.mark.parametrize("code", WITH_MESSAGE)
def test_jax_message_still_in_installed_jax(code: str):
    e = ENTRIES[code]
    path = _jax_root() / e.raised_file
    if _compiler_file(e):
        if not path.is_file():
            pytest.skip(f"{e.raised_file} is not installed (pip install 'jax[tpu]')")
        assert _binary_has(path, e.jax_message), (code, e.jax_message)
        return
    assert path.is_file(), f"{code}: {e.raised_file} is not in the installed jax"
    lines = _occurrences(path, e.jax_message)
    assert lines, (
        f"{code}: JAX's message changed or moved out of {e.raised_file}: "
        f"{e.jax_message!r} not found (catalog records jax {e.jax_version})")
    nearest = min(lines, key=lambda ln: abs(ln - e.raised_line))
    assert abs(nearest - e.raised_line) <= LINE_TOLERANCE, (
        f"{code}: {e.jax_message!r} found at {e.raised_file}:{nearest}, "
        f"catalog records line {e.raised_line}")


@pytest.mark.parametrize("code", sorted(c for c, e in ENTRIES.items() if e.also_matches))
def test_also_matches_still_in_installed_jax(code: str):
    e = ENTRIES[code]
    root = _jax_root()
    recorded = root / e.raised_file
    if _compiler_file(e):
        if not recorded.is_file():
            pytest.skip(f"{e.raised_file} is not installed (pip install 'jax[tpu]')")
        for template in e.also_matches:
            assert _binary_has(recorded, template), (code, template)
        return
    pallas_files = sorted((root / "jax" / "_src" / "pallas").rglob("*.py"))
    for template in e.also_matches:
        found = _occurrences(recorded, template) or [
            1 for p in pallas_files if _occurrences(p, template)]
        assert found, (
            f"{code}: also_matches message {template!r} no longer occurs in "
            f"{e.raised_file} or anywhere under jax/_src/pallas")


@pytest.mark.parametrize("code", sorted(c for c in NO_MESSAGE if ENTRIES[c].raised_file))
def test_behaviour_site_still_in_installed_jax(code: str):
    """An entry without a message may point at the code behind the behaviour:
    the file must exist and define the recorded function near the line."""
    e = ENTRIES[code]
    path = _jax_root() / e.raised_file
    assert path.is_file(), f"{code}: {e.raised_file} is not in the installed jax"
    name = e.raised_function.split(".")[-1]
    defs = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    assert any(d.lineno <= e.raised_line <= d.end_lineno for d in defs), (
        f"{code}: {e.raised_function} does not span {e.raised_file}:{e.raised_line}")


def test_empty_message_matches_nothing():
    for code in NO_MESSAGE:
        assert not ENTRIES[code].matches("any text at all"), code
    assert catalog.match_message("") is None


@pytest.mark.parametrize("code", WITH_MESSAGE)
def test_find_in_installed_jax(code: str):
    e = ENTRIES[code]
    _jax_root()
    found = catalog.find_in_installed_jax(e)
    if _compiler_file(e):  # no source line to link to
        assert found is None
        return
    assert found is not None, f"{code}: raise site of {e.jax_message!r} not found"
    path, line = found
    assert Path(path).is_absolute() and path.endswith(e.raised_file)
    assert abs(line - e.raised_line) <= LINE_TOLERANCE, (code, line, e.raised_line)


# ---------------------------------------------------------------- matching


@pytest.mark.parametrize("text,code", sorted(EXAMPLES.items()))
def test_match_message(text: str, code: str):
    m = catalog.match_message(text)
    assert m is not None and m.code == code, (text, m and m.code)
    assert ENTRIES[code].matches(text)


def test_every_code_has_an_example():
    covered = set(EXAMPLES.values()) | UNREACHABLE_BY_TEXT | NO_MESSAGE
    assert covered == set(ENTRIES), set(ENTRIES) ^ covered


def test_match_message_inside_a_traceback():
    text = (
        "jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback:\n"
        "Traceback (most recent call last):\n"
        "  ...\n"
        "ValueError: DMA start priority must be non-negative: -3\n"
    )
    assert catalog.match_message(text).code == "PAL108"
    assert catalog.match_message("something unrelated") is None


def test_shared_template_prefers_pal103():
    text = "Cannot signal on a non-()-shaped semaphore: (4,)"
    assert ENTRIES["PAL103"].matches(text)
    assert ENTRIES["PAL104"].matches(text)
    assert ENTRIES["PAL202"].matches(text)
    assert catalog.match_message(text).code == "PAL103"


def test_message_regex():
    rx = ENTRIES["PAL108"].message_regex()
    assert rx.pattern == re.escape("DMA start priority must be non-negative: ") + ".+?"
    assert rx.fullmatch("DMA start priority must be non-negative: -1")
    assert not rx.search("DMA start priority must be non-negative: ")
    rx = ENTRIES["PAL201"].message_regex()
    assert rx.fullmatch("Cannot wait on a non-semaphore Ref: semaphore[]")
    # literal parts are escaped: `(`, `)`, `[`, `.` and backticks match themselves only
    assert ENTRIES["PAL205"].message_regex().fullmatch(
        "Cannot store a Ref into another Ref. Did you forget to load from it using `[...]`?")
    assert not ENTRIES["PAL202"].message_regex().search(
        "Cannot wait on a non-XX-shaped semaphore: (2,)")


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize("code", sorted(ENTRIES))
def test_to_markdown(code: str):
    e = ENTRIES[code]
    md = e.to_markdown()
    assert md.startswith(f"# {code} ({e.name})")
    assert e.jax_message in md
    assert e.before in md and e.after in md
    for heading in ("## What it does", "## Why is this bad?",
                    "## Common causes", "## How to fix", "## Example"):
        assert heading in md, (code, heading)
    assert ("## JAX's message" in md) == bool(e.jax_message), code
    assert ("## What JAX does" in md) == bool(e.jax_behaviour), code
    if e.jax_behaviour:
        assert e.jax_behaviour in md
    if e.raised_file:
        assert f"`{e.raised_file}:{e.raised_line}`" in md
    for m in e.also_matches:
        assert m in md
    for r in e.related:
        assert r in md


def test_to_markdown_links():
    e = ENTRIES["PAL108"]
    base = "https://github.com/jax-ml/jax/blob/jax-v0.10.2/"
    md = e.to_markdown(base)
    assert f"({base}{e.raised_file}#L{e.raised_line})" in md
    md = e.to_markdown("https://example.org/{file}?line={line}")
    assert f"(https://example.org/{e.raised_file}?line={e.raised_line})" in md


# ---------------------------------------------------------------- loader errors


def test_malformed_toml_names_the_file(tmp_path: Path):
    bad = tmp_path / "PAL901.toml"
    bad.write_text('code = "PAL901"\nname = \n', encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match="PAL901.toml"):
        catalog.load_dir(tmp_path)


def test_missing_key_names_the_file(tmp_path: Path):
    text = (CATALOG_DIR / "PAL101.toml").read_text(encoding="utf-8")
    (tmp_path / "PAL101.toml").write_text(
        text.replace('fix_safety = "safe"\n', ""), encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match=r"PAL101\.toml.*fix_safety"):
        catalog.load_dir(tmp_path)


def test_bad_phase_names_the_file(tmp_path: Path):
    text = (CATALOG_DIR / "PAL101.toml").read_text(encoding="utf-8")
    (tmp_path / "PAL101.toml").write_text(
        text.replace('phase = "trace"', 'phase = "runtime"'), encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match=r"PAL101\.toml.*phase"):
        catalog.load_dir(tmp_path)


def test_code_must_match_file_name(tmp_path: Path):
    text = (CATALOG_DIR / "PAL101.toml").read_text(encoding="utf-8")
    (tmp_path / "PAL199.toml").write_text(text, encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match="PAL199.toml"):
        catalog.load_dir(tmp_path)


def test_load_dir_matches_load():
    assert catalog.load_dir(CATALOG_DIR) == ENTRIES


def test_empty_message_needs_behaviour(tmp_path: Path):
    text = (CATALOG_DIR / "PAL303.toml").read_text(encoding="utf-8")
    start = text.index("jax_behaviour = ")
    end = text.index('"""', text.index('"""', start) + 3) + 3
    (tmp_path / "PAL303.toml").write_text(text[:start] + text[end:], encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match=r"PAL303\.toml.*jax_behaviour"):
        catalog.load_dir(tmp_path)


def test_empty_message_may_omit_raised_at(tmp_path: Path):
    text = (CATALOG_DIR / "PAL303.toml").read_text(encoding="utf-8")
    start = text.index("[raised_at]")
    (tmp_path / "PAL303.toml").write_text(
        text[:start] + text[text.index("[doc]"):], encoding="utf-8")
    e = catalog.load_dir(tmp_path)["PAL303"]
    assert (e.raised_file, e.raised_line) == ("", 0)
    md = e.to_markdown()
    assert "## What JAX does" in md and "## JAX's message" not in md
    assert catalog.find_in_installed_jax(e) is None
