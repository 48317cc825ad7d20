"""What a real TPU v5e chip printed, replayed through the run mapping (no TPU
needed): tests/runs/data/chip_v5e/ (how it was recorded: its README.md)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "chip_v5e"
KERNELS = HERE.parents[1] / "benchmarks" / "tpu_chip" / "test_three_refused.py"
sys.path.insert(0, str(HERE.parents[1] / "server"))
sys.path.insert(0, str(HERE))

from pallas_lsp.runs import _report  # noqa: E402
from pallas_lsp.runs.mapping import PathMap, failure_diagnostic  # noqa: E402


def test_the_chips_vmem_oom_keeps_its_figures_on_the_kernels_line(tmp_path):
    """On the chip the 2048x2048 f32 blocks fail at run time with a
    JaxRuntimeError whose last line is only a link; the diagnostic used to be
    that link alone. It is PAL404 with the compiler's size, limit and excess."""
    message = (DATA / "vmem_oom_message.txt").read_text(encoding="utf-8")
    assert message.rstrip().endswith("See https://openxla.org/xla/errors/error_1001 for more details.")
    test = tmp_path / "test_three_refused.py"
    shutil.copy(KERNELS, test)
    line = next(i for i, t in enumerate(test.read_text().splitlines(), 1)
                if "np.testing.assert_array_equal(f(x), x)" in t and i > 30)
    f = {"type": "jax.errors.JaxRuntimeError", "message": message,
         "original": _report.original_of(message), "nodeid": "test_three_refused.py::test_big_blocks",
         "frames": [{"file": str(test), "line": line, "name": "test_big_blocks", "col": 34,
                     "end_line": line, "end_col": 38}], "chain": [], "callback": []}
    assert f["original"] is None  # a compiler error wraps no other exception
    d = failure_diagnostic(f, PathMap(root=tmp_path), None)
    assert (d.code, d.span.line + 1) == ("PAL404", line)
    assert "E1001: CompileTimeScopedVmemOom" in d.message
    assert "Scoped allocation with size 64.00M and limit 16.00M exceeded scoped vmem limit by 48.00M" \
        in d.message
    assert "stack_frame_id" not in d.message and "openxla.org" not in d.message


def test_what_the_chip_reported_before_is_what_this_fixes():
    """The recorded `run --mode tpu` output of the chip: PAL401 and PAL402
    were specific already; PAL404 carried only the link."""
    rows = {r["code"]: r for r in json.loads((DATA / "run_tpu.json").read_text())}
    assert set(rows) == {"PAL401", "PAL402", "PAL404"}
    assert rows["PAL404"]["message"].startswith("See https://openxla.org/xla/errors/error_1001")
    assert "TPU v5 lite" in (DATA / "devices.txt").read_text() or "TpuDevice" in \
        (DATA / "devices.txt").read_text()


def test_a_callback_error_still_gives_the_original_exception():
    msg = ("INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
           '  File "/jax/x.py", line 3, in get\n'
           "IndexError: Out-of-bounds read of (0 0 vmem 102): reading [5] but buffer has shape (4,).\n"
           "See https://openxla.org/xla/errors/error_0000 for more details.")
    assert _report.original_of(msg) == {
        "type": "IndexError",
        "message": "Out-of-bounds read of (0 0 vmem 102): reading [5] but buffer has shape (4,)."}


# ---------------------------------------------------------------- issue 33's classes
# Recorded by benchmarks/tpu_chip/run_issue33.sh (whatever of it is in DATA):
# the child's own reports are replayed through the mapping; the CLI's JSON is
# checked as printed. Each must put the code of a `# chip: PALnnn` line there.

ISSUE33 = HERE.parents[1] / "benchmarks" / "tpu_chip" / "test_issue33.py"


def _chip_lines() -> dict[int, str]:
    from test_chip_messages import chip_lines

    return chip_lines(ISSUE33)


def _recorded(pattern: str) -> list:
    return [pytest.param(p, id=p.name) for p in sorted(DATA.glob(pattern))]


@pytest.mark.parametrize("path", _recorded("report_issue33*.json"))
def test_recorded_chip_reports_map_to_the_kernels_lines(path):
    from pallas_lsp.runs.static_context import StaticContext, hang_report, with_kernel_findings

    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["interpret"] is False  # it ran on the chip
    pm = PathMap(root=ISSUE33.parent)
    pm.add_prefix(report["cwd"], ISSUE33.parent)
    ctx = StaticContext(pm)
    expected = _chip_lines()
    got = []
    for f in report["failures"]:
        got.append(with_kernel_findings(failure_diagnostic(f, pm, None), f.get("kernels"), pm, ctx))
    if report.get("hang"):
        got += hang_report(report["hang"], pm, None, 30, ctx)
        (hung,) = [d for d in got if "hung" in d.message]
        assert "kernel `_wait_without_start`" in hung.message
    assert got, "the recording has neither failures nor a hang"
    for d in got:
        assert d.path == str(ISSUE33), (d.path, d.message)
        assert expected.get(d.span.line + 1) == d.code, (d.span.line + 1, d.code, d.message)


@pytest.mark.parametrize("path", _recorded("run_issue33*.json"))
def test_recorded_chip_runs_printed_the_codes_on_the_kernels_lines(path):
    """As printed there: every row is a chip line's code, or (the default run,
    interpret mode) the engine's finding of that code on that line."""
    from pallas_lsp.engine import analyze

    rows = json.loads(path.read_text(encoding="utf-8") or "[]")
    allowed = {(line, code) for line, code in _chip_lines().items()}
    allowed |= {(f.span.line + 1, f.code)
                for f in analyze(ISSUE33.read_text(encoding="utf-8"), str(ISSUE33)).findings}
    assert rows, "the recorded run printed no diagnostics"
    for row in rows:
        assert row["path"].endswith("test_issue33.py"), row
        assert (row["line"], row["code"]) in allowed, row
