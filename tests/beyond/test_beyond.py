"""Protocol rules (PAL3xx) tied to what JAX really does with each mistake.

JAX raises nothing for these: a descriptor that is never used is logged, a
DMA that is never waited is dropped or leaves a semaphore non-zero, a wait
without a start hangs, a DMA started on a REGULAR semaphore is only rejected at its wait, and a DMA
whose ends differ in size or dtype is truncated or fails deep inside the
interpreter. Each fixture in ``fixtures/`` is a standalone script that runs
its kernel on CPU in TPU interpret mode and prints ``MODE <name>`` before each
run and ``RESULT <json>`` at the end (per mode: ``nan``, ``ok``,
``max_abs_err``).

* ``pal3xx_<shape>.py``: line 1 ``# beyond: PAL3xx``, line 2
  ``# effect: <what JAX does>``, exactly one line ending in ``# BUG`` (where the
  engine's diagnostic must land).
* ``pal3xx_<shape>_fixed.py``: ``# beyond: clean``; runs correctly.
* ``neg_<pattern>.py``: ``# beyond: clean``; a correct pattern real kernels use
  (double buffering, conditional start/wait, helpers, descriptor lists,
  remote copies) that must get no diagnostic and run correctly.

``test_jax_effect`` runs every fixture in its own subprocess (one at a time).
``test_static`` runs the engine on the same source.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures"
JAX_TIMEOUT_S = 120
HANG_TIMEOUT_S = 20  # a clean fixture of the same size finishes in ~3 s

CODES = ("PAL301", "PAL302", "PAL303", "PAL304", "PAL305")
MIN_FIXTURES_PER_CODE = 2
MIN_SHAPES_PER_CODE = 2

# What a buggy fixture may claim JAX does, per code.
EFFECTS = {
    "PAL301": {"logged"},
    "PAL302": {"dropped"},
    "PAL303": {"hang"},
    "PAL304": {"wait-rejected"},
    "PAL305": {"truncated", "broadcast-error", "dtype-assert"},
}

# The correct patterns that must stay silent (tests/beyond/fixtures/neg_*.py).
NEGATIVE_PATTERNS = {
    "fori_double_buffer",    # (a) start i+1 in the loop body, wait with a rebuilt descriptor
    "when_same_cond",        # (b) start and wait under two pl.when with the same condition
    "rebuilt_descriptor",    # (c) an identical (or same-size) descriptor built only to wait
    "helper_descriptors",    # (d) descriptors handed to helpers that start / wait them
    "descriptor_class",      # (d) a class holding a list of descriptors (paged attention)
    "grid_prefetch",         # (e) prefetch the next grid step's block, wait the current one
    "descriptor_list",       # (f) start all in one Python loop, wait all in another
    "remote_copy",           # (g) remote copy with wait_recv and wait_send
}

_HEADER_RE = re.compile(r"^# beyond: (clean|PAL3\d{2})\s*$")
_EFFECT_RE = re.compile(r"^# effect: ([a-z][a-z-]*)\s*$")
# Optional line 3: other codes the same bug also earns (e.g. PAL304 at the
# start and PAL109 at the wait where JAX raises).
_ALSO_RE = re.compile(r"^# also: ((?:PAL\d{3}[ ,]*)+)$")
_NAME_RE = re.compile(r"^(?:(pal3\d{2})_([a-z0-9_]+?)(_fixed)?|neg_([a-z0-9_]+))$")

UNUSED_LOG = ("ERROR:root:AsyncCopyDescriptor was not used."
              " Did you mean to call `start` or `wait` on it?")
NONZERO_RE = re.compile(
    r"^Semaphore \d+ has non-zero count for \d+ \(global core \d+\) at kernel exit: (\d+)$",
    re.M)
# Printed or logged by JAX when a kernel ends in a bad state; a clean run has none.
RED_FLAGS = ("has non-zero count", "RACE DETECTED", "AsyncCopyDescriptor was not used")
_EXC_LINE_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception):(?: .*)?$", re.M)


@dataclass(frozen=True)
class Fixture:
    path: Path
    code: str | None        # None for clean fixtures (fixed twins and neg_*)
    name_code: str | None   # PAL301 from pal301_<shape>[_fixed]; None for neg_*
    shape: str
    fixed: bool
    negative: bool
    effect: str | None
    bug_lines: tuple[int, ...]
    also: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def bug_line(self) -> int:
        assert len(self.bug_lines) == 1, (self.id, self.bug_lines)
        return self.bug_lines[0]


def _load(path: Path) -> Fixture:
    lines = path.read_text(encoding="utf-8").splitlines()
    m = _HEADER_RE.match(lines[0]) if lines else None
    if m is None:
        raise AssertionError(f"{path.name}: line 1 must be '# beyond: PAL3xx' or '# beyond: clean'")
    n = _NAME_RE.match(path.stem)
    if n is None:
        raise AssertionError(f"{path.name}: name must be pal3xx_<shape>[_fixed].py or neg_<pattern>.py")
    e = _EFFECT_RE.match(lines[1]) if len(lines) > 1 else None
    negative = n.group(4) is not None
    return Fixture(
        path=path,
        code=None if m.group(1) == "clean" else m.group(1),
        name_code=None if negative else n.group(1).upper(),
        shape=n.group(4) if negative else n.group(2),
        fixed=n.group(3) is not None,
        negative=negative,
        effect=e.group(1) if e else None,
        bug_lines=tuple(i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("# BUG")),
        also=tuple(_ALSO_RE.match(lines[2]).group(1).replace(",", " ").split())
        if len(lines) > 2 and _ALSO_RE.match(lines[2]) else (),
    )


FIXTURES = [_load(p) for p in sorted(FIXTURE_DIR.glob("*.py"))]
BUGGY = [f for f in FIXTURES if f.code is not None]


def _params(fixtures):
    return [pytest.param(f, id=f.id) for f in fixtures]


# ---------------------------------------------------------------- structure


def test_fixture_headers_and_names():
    assert FIXTURES, f"no fixtures in {FIXTURE_DIR}"
    for f in FIXTURES:
        if f.code is None:
            assert f.fixed or f.negative, f"{f.id}: a clean fixture is <buggy>_fixed or neg_*"
            assert f.bug_lines == (), f"{f.id}: a clean fixture has no '# BUG' line"
            assert f.effect is None, f"{f.id}: a clean fixture has no '# effect:' line"
        else:
            assert not (f.fixed or f.negative), f"{f.id}: must say '# beyond: clean'"
            assert f.code == f.name_code, f"{f.id}: header says {f.code}, name says {f.name_code}"
            assert len(f.bug_lines) == 1, f"{f.id}: needs exactly one '# BUG' line, has {f.bug_lines}"
            assert f.effect in EFFECTS[f.code], (
                f"{f.id}: line 2 must be '# effect: X' with X in {sorted(EFFECTS[f.code])}")


def test_every_code_is_covered_and_twinned():
    by_code: dict[str, list[Fixture]] = defaultdict(list)
    for f in BUGGY:
        by_code[f.code].append(f)
    for code in CODES:
        got = by_code.get(code, [])
        assert len(got) >= MIN_FIXTURES_PER_CODE, f"{code}: {len(got)} buggy fixture(s)"
        assert len({f.shape for f in got}) >= MIN_SHAPES_PER_CODE, code
    assert set(by_code) <= set(CODES), f"unexpected codes: {set(by_code) - set(CODES)}"
    stems = {f.id for f in FIXTURES}
    for f in FIXTURES:
        if f.fixed:
            assert f.id[: -len("_fixed")] in stems, f"{f.id}: no buggy twin"
        elif not f.negative:
            assert f"{f.id}_fixed" in stems, f"{f.id}: no _fixed twin"


def test_negative_patterns_present():
    have = {f.shape for f in FIXTURES if f.negative}
    assert NEGATIVE_PATTERNS <= have, f"missing neg_ fixtures: {NEGATIVE_PATTERNS - have}"


def test_every_code_is_in_the_catalog():
    from pallas_lsp.catalog import get

    for code in CODES:
        entry = get(code)
        assert entry is not None, f"{code} missing from the catalog"
        assert entry.jax_behaviour, f"{code}: catalog entry has no jax_behaviour"


# ---------------------------------------------------------------- running JAX


@dataclass
class Run:
    rc: int | None       # None when the process was killed after the timeout
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def result(self) -> dict | None:
        lines = [ln for ln in self.stdout.splitlines() if ln.startswith("RESULT ")]
        return json.loads(lines[-1][len("RESULT "):]) if lines else None

    def sections(self) -> dict[str, str]:
        """stdout split at the fixture's ``MODE <name>`` lines (what the
        interpreter printed while that mode ran)."""
        out: dict[str, list[str]] = {}
        current = None
        for line in self.stdout.splitlines():
            if line.startswith("MODE "):
                current = line[len("MODE "):].strip()
                out[current] = []
            elif current is not None and not line.startswith("RESULT "):
                out[current].append(line)
        return {k: "\n".join(v) for k, v in out.items()}

    def final_exception(self) -> str | None:
        hits = _EXC_LINE_RE.findall(self.stderr)
        return hits[-1] if hits else None

    def describe(self) -> str:
        return (f"rc={self.rc} timed_out={self.timed_out}\n--- stdout ---\n{self.stdout[-2000:]}"
                f"\n--- stderr ---\n{self.stderr[-3000:]}")


def _run(path: Path, cwd: Path, timeout: float) -> Run:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("PYTHONPATH", None)  # fixtures import only jax/numpy
    proc = subprocess.Popen(
        [sys.executable, str(path)], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return Run(proc.returncode, out, err, timed_out=False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the fixture and nothing else
        out, err = proc.communicate()
        return Run(None, out, err, timed_out=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _check_clean(fx: Fixture, run: Run) -> None:
    assert not run.timed_out and run.rc == 0, f"{fx.id} should run cleanly\n{run.describe()}"
    result = run.result
    assert result, f"{fx.id}: no RESULT line\n{run.describe()}"
    assert {"on_wait", "eager"} <= set(result), f"{fx.id}: runs {sorted(result)}"
    for mode, r in result.items():
        assert r["ok"] and not r["nan"], f"{fx.id}: wrong values in mode {mode}: {r}"
    for flag in RED_FLAGS:
        assert flag not in run.stdout + run.stderr, (
            f"{fx.id}: JAX reported {flag!r}\n{run.describe()}")


def _check_logged(fx: Fixture, run: Run) -> None:
    from pallas_lsp.catalog import get

    assert run.rc == 0, f"{fx.id}: JAX raised nothing for an unused descriptor\n{run.describe()}"
    assert UNUSED_LOG in run.stderr, f"{fx.id}: no root-logger line\n{run.describe()}"
    assert get("PAL301").matches(run.stderr)
    for mode, r in run.result.items():
        # The copy never happens in either DMA execution mode.
        assert r["nan"] and not r["ok"], f"{fx.id}: {mode}: expected NaN output, got {r}"


def _check_dropped(fx: Fixture, run: Run) -> None:
    from pallas_lsp.catalog import get

    assert run.rc == 0, run.describe()
    result, sections = run.result, run.sections()
    # on_wait (the default): the DMA is never executed and nothing is printed.
    assert result["on_wait"]["nan"], f"{fx.id}: on_wait output has no NaN: {result['on_wait']}"
    assert not NONZERO_RE.search(sections["on_wait"]), sections["on_wait"]
    # eager: the DMA runs at start(), so the data arrives, but its semaphore is
    # still signalled at kernel exit and the interpreter prints it.
    assert result["eager"]["ok"], f"{fx.id}: eager values wrong: {result['eager']}"
    m = NONZERO_RE.search(sections["eager"])
    assert m and int(m.group(1)) > 0, f"{fx.id}: no non-zero count line in eager mode\n{run.describe()}"
    assert get("PAL302").matches(m.group(0))


def _check_hang(fx: Fixture, run: Run) -> None:
    assert run.timed_out, f"{fx.id}: expected a hang, finished instead\n{run.describe()}"
    assert "MODE on_wait" in run.stdout, (
        f"{fx.id}: killed before it reached the kernel (machine too slow?)\n{run.describe()}")
    assert run.result is None


def _check_truncated(fx: Fixture, run: Run) -> None:
    assert run.rc == 0 and run.final_exception() is None, (
        f"{fx.id}: expected a silent truncation\n{run.describe()}")
    for mode, r in run.result.items():
        # Wrong values where the cut-down copy landed (and NaN where nothing did).
        assert not r["ok"] and r["max_abs_err"] > 0, f"{fx.id}: {mode}: expected wrong values, got {r}"


def _check_runtime_error(fx: Fixture, run: Run, final_re: str) -> None:
    assert not run.timed_out and run.rc not in (0, None), (
        f"{fx.id}: expected the interpreter to fail\n{run.describe()}")
    assert "jax.errors.JaxRuntimeError" in run.stderr, run.describe()
    final = run.final_exception()
    assert final is not None and re.search(final_re, final), (
        f"{fx.id}: the run ended with {final!r}, expected /{final_re}/")
    assert "RESULT " not in run.stdout


def _check_wait_rejected(fx: Fixture, run: Run) -> None:
    assert not run.timed_out and run.rc not in (0, None), run.describe()
    final = run.final_exception()
    assert final is not None and final.startswith(
        "ValueError: dma_wait requires a DMA semaphore, but got a regular semaphore."), (
        f"{fx.id}: the run ended with {final!r}")


_EFFECT_CHECKS = {
    "wait-rejected": _check_wait_rejected,
    "logged": _check_logged,
    "dropped": _check_dropped,
    "hang": _check_hang,
    "truncated": _check_truncated,
    "broadcast-error": lambda fx, run: _check_runtime_error(
        fx, run, r"^ValueError: could not broadcast input array from shape \(\d+(,\d+)*\) into shape"),
    "dtype-assert": lambda fx, run: _check_runtime_error(fx, run, r"^AssertionError:\s*$"),
}


@pytest.mark.parametrize("fx", _params(FIXTURES))
def test_jax_effect(fx: Fixture, tmp_path: Path):
    timeout = HANG_TIMEOUT_S if fx.effect == "hang" else JAX_TIMEOUT_S
    run = _run(fx.path, tmp_path, timeout)
    if fx.code is None:
        _check_clean(fx, run)
    else:
        _EFFECT_CHECKS[fx.effect](fx, run)


# ---------------------------------------------------------------- engine


@pytest.mark.parametrize("fx", _params(FIXTURES))
def test_static(fx: Fixture):
    from pallas_lsp.engine import analyze

    analysis = analyze(fx.path.read_text(encoding="utf-8"), str(fx.path))
    findings = list(analysis.findings)
    listing = "\n".join(f"  {f.code} line {f.span.line + 1}: {getattr(f, 'message', '')}"
                        for f in findings)
    if fx.code is None:
        assert not findings, f"{fx.id} is clean but the engine reported:\n{listing}"
        return
    codes = {f.code for f in findings}
    expected = {fx.code, *fx.also}
    assert codes == expected, f"{fx.id}: expected {expected}, got:\n{listing or '  nothing'}"
    lines = sorted(f.span.line + 1 for f in findings if f.code == fx.code)
    assert fx.bug_line in lines, (
        f"{fx.id}: {fx.code} reported on line(s) {lines}, expected line {fx.bug_line}")
