"""Shapes and dtypes from the callers (fixtures/callers_shapes.py): the
engine's TPU findings are exactly the `# expect PALnnn` lines, each caused by
a bug_* caller (without those callers: nothing); a compile for v5e and v6e
(libtpu, deviceless) fails on the same lines with the same codes when the
bug_* callers run, and compiles every ok_* caller."""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import FIXTURES, GENS  # noqa: E402

from pallas_lsp.engine.analyze import analyze  # noqa: E402
from pallas_lsp.runs import RunSpec, run  # noqa: E402

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
FIXTURE = FIXTURES / "callers_shapes.py"
SCRIPT = FIXTURES / "callers_run.py"


def _expected() -> dict[int, str]:
    return {i + 1: line.split("# expect ")[1].split()[0]
            for i, line in enumerate(FIXTURE.read_text(encoding="utf-8").splitlines())
            if "# expect PAL" in line}


def _tpu_findings(text: str):
    return [f for f in analyze(text, str(FIXTURE)).findings if f.code.startswith("PAL4")]


def _without_bug_callers(text: str) -> str:
    """The fixture with its bug_* callers blanked (lines kept, so spans match)."""
    lines = text.splitlines()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("bug_"):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            for i in range(first - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines) + "\n"


def test_findings_are_the_expected_lines():
    got = {f.span.line + 1: f.code for f in _tpu_findings(FIXTURE.read_text(encoding="utf-8"))}
    assert got == _expected()
    assert set(got.values()) == {"PAL401", "PAL403", "PAL404", "PAL405", "PAL407"}


def test_the_fixed_callers_get_nothing():
    assert _tpu_findings(_without_bug_callers(FIXTURE.read_text(encoding="utf-8"))) == []


def test_findings_name_the_array_and_the_case():
    findings = {f.span.line + 1: f for f in _tpu_findings(FIXTURE.read_text(encoding="utf-8"))}
    text = FIXTURE.read_text(encoding="utf-8").splitlines()
    lanes = findings[next(n for n, c in _expected().items() if "x.shape[1] // 2" in text[n - 1])]
    assert "with x: float32[16, 192]" in lanes.detail
    (made,) = lanes.related
    assert "reshape(16, 192)" in text[made.span.line]
    assert made.message == "x: float32[16, 192] is made here"
    case = next(f for f in findings.values() if "case 2 of 2 of `bug_cases`" in f.detail)
    assert "rows=48, block=(12, 128)" in case.related[0].message
    int8 = next(f for f in findings.values() if "int8[64, 128]" in f.detail)
    assert "(32, 128)" in int8.detail and "E2002" in int8.detail
    add = next(f for f in findings.values() if f.code == "PAL403")
    assert "randint" in text[add.related[0].span.line]


def _compile(which: str):
    return run(RunSpec(target=str(SCRIPT), root=str(FIXTURES), compile_for=GENS, timeout=300,
                       args=[which]))


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_the_compiler_fails_the_bug_callers_on_those_lines():
    result = _compile("bug")
    got = {d.span.line + 1: d.code for d in result.diagnostics
           if Path(d.path).name == FIXTURE.name}
    assert got == _expected(), [(d.span.line + 1, d.code, d.message[:120])
                                for d in result.diagnostics]


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_the_compiler_accepts_the_ok_callers():
    result = _compile("ok")
    assert [(d.code, d.message[:200]) for d in result.diagnostics] == []
    assert result.compiles, "no pallas_call was compiled"
