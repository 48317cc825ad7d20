"""Oracle fixtures: every rule checked against what real JAX does.

Each file in ``tests/oracle/fixtures/`` is a standalone Pallas TPU script
(run on CPU in TPU interpret mode, or with ``interpret=True`` where that is
the phase being tested). Line 1 says what JAX must do with it:

* ``# oracle: PAL101`` -- a buggy kernel. Running it must fail with the
  message of that catalog entry, and exactly one line ends with ``# BUG``:
  the line where the engine's diagnostic must land.
* ``# oracle: clean`` -- the fixed twin (``<buggy stem>_fixed.py``). Running it
  must succeed (it checks its own numerical result), and the engine must
  report nothing.

File names are ``<code lowercase>_<shape>.py``; the shape says how the bad
value reaches the call (direct, alias, helper, list, run_scoped, fori, when,
partial, prefetch, dict_scratch...).

``test_jax_verdict`` runs every fixture in its own subprocess (one JAX process
at a time). ``test_static_verdict`` runs the static engine on the same source.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURE_DIR = Path(__file__).resolve().parent / "oracle" / "fixtures"
JAX_TIMEOUT_S = 120

# Every code the oracle must cover (PAL107 needs a hijax type and is skipped).
CODES = (
    "PAL101", "PAL102", "PAL103", "PAL104", "PAL105", "PAL106", "PAL108",
    "PAL109", "PAL110", "PAL111", "PAL112",
    "PAL201", "PAL202", "PAL203", "PAL204", "PAL205", "PAL206", "PAL207",
    "PAL208", "PAL209", "PAL306",
)
MIN_FIXTURES_PER_CODE = 2
MIN_SHAPES_PER_CODE = 2

_HEADER_RE = re.compile(r"^# oracle: (clean|PAL\d{3})\s*$")
_NAME_RE = re.compile(r"^(pal\d{3})_([a-z0-9_]+?)(_fixed)?$")

# Printed by TPU interpret mode (not raised) when a kernel finishes in a bad
# state; a clean fixture must not produce any of them.
_CLEAN_RUN_RED_FLAGS = (
    "has non-zero count",                    # semaphore left signalled at exit
    "RACE DETECTED",                         # detect_races report
    "AsyncCopyDescriptor was not used",      # descriptor never started/waited
)


@dataclass(frozen=True)
class Fixture:
    path: Path
    code: str | None  # None for clean fixtures
    name_code: str    # PAL101 from pal101_<shape>[_fixed]
    shape: str
    fixed: bool       # file name ends in _fixed
    bug_lines: tuple[int, ...]  # 1-based lines ending in "# BUG"

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def bug_line(self) -> int:
        assert len(self.bug_lines) == 1, (self.id, self.bug_lines)
        return self.bug_lines[0]


def _load(path: Path) -> Fixture:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    m = _HEADER_RE.match(lines[0]) if lines else None
    if m is None:
        raise AssertionError(f"{path.name}: line 1 must be '# oracle: PAL1xx' or '# oracle: clean'")
    n = _NAME_RE.match(path.stem)
    if n is None:
        raise AssertionError(f"{path.name}: name must be <code>_<shape>[_fixed].py")
    code = None if m.group(1) == "clean" else m.group(1)
    bugs = tuple(i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("# BUG"))
    return Fixture(path=path, code=code, name_code=n.group(1).upper(), shape=n.group(2),
                   fixed=n.group(3) is not None, bug_lines=bugs)


def _discover() -> list[Fixture]:
    return [_load(p) for p in sorted(FIXTURE_DIR.glob("pal*.py"))]


FIXTURES = _discover()
BUGGY = [f for f in FIXTURES if f.code is not None]


def _params(fixtures):
    return [pytest.param(f, id=f.id) for f in fixtures]


# ---------------------------------------------------------------- structure


def test_fixture_headers_and_names():
    assert FIXTURES, f"no fixtures in {FIXTURE_DIR}"
    for f in FIXTURES:
        if f.fixed:
            assert f.code is None, f"{f.id}: a _fixed file must say '# oracle: clean'"
            assert f.bug_lines == (), f"{f.id}: a clean fixture has no '# BUG' line"
        else:
            assert f.code == f.name_code, f"{f.id}: header says {f.code}, name says {f.name_code}"
            assert len(f.bug_lines) == 1, f"{f.id}: needs exactly one '# BUG' line, has {f.bug_lines}"


def test_every_code_is_covered_and_twinned():
    by_code: dict[str, list[Fixture]] = defaultdict(list)
    for f in BUGGY:
        by_code[f.code].append(f)
    for code in CODES:
        got = by_code.get(code, [])
        shapes = {f.shape for f in got}
        assert len(got) >= MIN_FIXTURES_PER_CODE, f"{code}: {len(got)} buggy fixture(s)"
        assert len(shapes) >= MIN_SHAPES_PER_CODE, f"{code}: shapes {sorted(shapes)}"
    assert set(by_code) <= set(CODES), f"unexpected codes: {set(by_code) - set(CODES)}"

    stems = {f.id for f in FIXTURES}
    for f in FIXTURES:
        if f.fixed:
            assert f.id[: -len("_fixed")] in stems, f"{f.id}: no buggy twin"
        else:
            assert f"{f.id}_fixed" in stems, f"{f.id}: no _fixed twin"


def test_every_code_is_in_the_catalog():
    from pallas_lsp.catalog import get

    for code in CODES:
        assert get(code) is not None, f"{code} missing from the catalog"


# ---------------------------------------------------------------- JAX


def _run(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("PYTHONPATH", None)  # fixtures import only jax/numpy
    try:
        return subprocess.run(
            [sys.executable, str(path)], cwd=cwd, env=env, capture_output=True,
            text=True, timeout=JAX_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{path.name}: no result after {JAX_TIMEOUT_S} s (hang?)\n"
                    f"stderr tail:\n{(e.stderr or b'')[-2000:]!r}")


def _tail(text: str, n: int = 3000) -> str:
    return text[-n:]


_EXC_LINE_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): .*$", re.M)


def _final_exception(stderr: str) -> str | None:
    """The last ``SomeError: message`` line: the exception that ended the run."""
    hits = _EXC_LINE_RE.findall(stderr)
    return hits[-1] if hits else None


@pytest.mark.parametrize("fx", _params(FIXTURES))
def test_jax_verdict(fx: Fixture, tmp_path: Path):
    proc = _run(fx.path, tmp_path)
    if fx.code is None:
        assert proc.returncode == 0, (
            f"{fx.id} should run cleanly, rc={proc.returncode}\n{_tail(proc.stderr)}")
        output = proc.stdout + proc.stderr
        for flag in _CLEAN_RUN_RED_FLAGS:
            assert flag not in output, f"{fx.id}: interpreter reported {flag!r}\n{_tail(output)}"
        return

    from pallas_lsp.catalog import get

    entry = get(fx.code)
    assert entry is not None, f"{fx.code} is not in the catalog"
    assert proc.returncode != 0, f"{fx.id}: expected JAX to reject it, but it ran (rc=0)"
    assert entry.matches(proc.stderr), (
        f"{fx.id}: stderr does not contain {fx.code}'s message {entry.jax_message!r}\n"
        f"{_tail(proc.stderr)}")
    final = _final_exception(proc.stderr)
    assert final is not None and entry.matches(final), (
        f"{fx.id}: the run ended with {final!r}, not with {fx.code}'s message")
    # The engine's JAX part on the BUG line (where JAX stops) is what JAX
    # printed, values included (`(2,)`, `-1`); `…` stands for a value only the
    # running program knows (a traced value, a set of classes).
    from pallas_lsp.engine import analyze

    static = [f.message for f in analyze(fx.path.read_text(encoding="utf-8"),
                                         str(fx.path)).findings
              if f.code == fx.code and f.span.line + 1 == fx.bug_line]
    assert static and all(re.search(".+?".join(map(re.escape, m.split("…"))), proc.stderr)
                          for m in static), (
        f"{fx.id}: {static} not in JAX's output\n{_tail(proc.stderr)}")


# ---------------------------------------------------------------- engine


@pytest.mark.parametrize("fx", _params(FIXTURES))
def test_static_verdict(fx: Fixture):
    from pallas_lsp.engine import analyze

    source = fx.path.read_text(encoding="utf-8")
    analysis = analyze(source, str(fx.path))
    # PAL4xx are TPU-compile errors: interpret mode (what the oracle runs) never
    # raises them, so they are no part of its verdict. pal109_prefetch's (1, 128)
    # output block is one (tests/compile/ proves those rules against libtpu).
    findings = [f for f in analysis.findings if not f.code.startswith("PAL4")]
    codes = {f.code for f in findings}
    listing = "\n".join(f"  {f.code} line {f.span.line + 1}: {getattr(f, 'message', '')}"
                        for f in findings)
    if fx.code is None:
        assert codes == set(), f"{fx.id} is clean but the engine reported:\n{listing}"
        return
    assert codes == {fx.code}, f"{fx.id}: expected {{{fx.code}}}, got:\n{listing or '  nothing'}"
    lines = sorted(f.span.line + 1 for f in findings if f.code == fx.code)
    assert fx.bug_line in lines, (
        f"{fx.id}: {fx.code} reported on line(s) {lines}, expected line {fx.bug_line}")
    _check_message_parts(fx, findings)


def _check_message_parts(fx: Fixture, findings) -> None:
    """Every message is JAX's text (the catalog's template, formatted), then
    our explanation after a dash; checks JAX has no message for use the
    rule's own title."""
    from pallas_lsp.catalog import _compiled, get
    from pallas_lsp.engine.rules import RULES

    titles = {r.CODE: r.MESSAGE for r in RULES}
    for f in findings:
        entry = get(f.code)
        if entry.jax_message:
            assert any(_compiled(t).fullmatch(f.message) for t in entry.templates), (
                f"{fx.id}: {f.code} message {f.message!r} is not JAX's {entry.templates!r}")
        else:
            assert f.message == titles[f.code], (fx.id, f.code, f.message)
        assert f.detail and f.text == f"{f.message} — {f.detail}", (fx.id, f.code, f.text)
