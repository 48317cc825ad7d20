"""A run's outcome next to the engine's findings for the same kernel (real
JAX, TPU interpret mode): a hang lands on the waits of the kernel dispatched
last, also when the process is killed from outside (as on a chip, where no
interpreter says which wait is stuck); a failure shows its kernels' findings."""
from __future__ import annotations

import textwrap
from pathlib import Path

from runs_helpers import PYTHON, line_of

from pallas_lsp.runs import RunSpec, Status, run
from pallas_lsp.runs.mapping import PathMap
from pallas_lsp.runs.static_context import StaticContext, hang_report

KERNELS = '''
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def wait_without_start(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.wait()  # BUG: never started


def started_never_waited(x_hbm, o_hbm, sem):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.start()  # BUG: never waited


def hang(x):
    return pl.pallas_call(
        wait_without_start, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)


def dropped(x):
    return pl.pallas_call(
        started_never_waited, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
'''

TESTS = '''
import jax.numpy as jnp
import numpy as np

import kernels as k

X = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)


def test_hang():
    np.asarray(k.hang(X))


def test_dropped():
    np.testing.assert_array_equal(np.asarray(k.dropped(X)), np.asarray(X))
'''


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    (ws / "kernels.py").write_text(KERNELS.lstrip(), encoding="utf-8")
    (ws / "test_k.py").write_text(TESTS.lstrip(), encoding="utf-8")
    return ws


def test_a_hang_killed_from_outside_lands_on_the_kernels_wait(tmp_path):
    """No watchdog in the child (PALLAS_LSP_TIMEOUT=0): the runner kills the
    process group, and only the report the child wrote before the kernel ran
    says which pallas_call it was. The diagnostic is PAL303 on the kernel's
    `.wait()` (the engine's finding there), not on the test."""
    ws = _workspace(tmp_path)
    kernels = ws / "kernels.py"
    res = run(RunSpec(target=str(ws / "test_k.py") + "::test_hang", python=PYTHON, timeout=8,
                      compile_for=(), env={"PALLAS_LSP_TIMEOUT": "0"}))
    assert res.status is Status.TIMEOUT, res.summary
    (d,) = res.diagnostics
    assert (d.code, d.path, d.span.line + 1) == ("PAL303", str(kernels),
                                                 line_of(kernels, "copy.wait()  # BUG"))
    assert "hung in kernel `wait_without_start`" in d.message
    assert "the last pallas_call dispatched" in d.message
    rel = {r.message.split(":")[0]: r for r in d.related}
    static = rel["PAL303 (static, kernel `wait_without_start`)"]
    assert static.span.line == d.span.line and "never started" in static.message
    call = next(r for r in d.related if r.message.startswith("the pallas_call of"))
    assert call.span.line + 1 == line_of(kernels, "return pl.pallas_call(", 0)


def test_the_interpreters_wait_line_carries_the_static_finding(tmp_path):
    """With the watchdog (interpret mode names the stuck wait itself): the
    same line, with the engine's PAL303 and the pallas_call as related."""
    ws = _workspace(tmp_path)
    kernels = ws / "kernels.py"
    res = run(RunSpec(target=str(ws / "test_k.py") + "::test_hang", python=PYTHON, timeout=8,
                      compile_for=()))
    assert res.status is Status.TIMEOUT, res.summary
    (d,) = res.diagnostics
    assert (d.code, d.span.line + 1) == ("PAL303", line_of(kernels, "copy.wait()  # BUG"))
    assert any(r.message.startswith("PAL303 (static") for r in d.related)
    assert any(r.message.startswith("the pallas_call of `wait_without_start`") for r in d.related)


def test_a_mismatch_shows_the_static_finding_of_its_kernel(tmp_path):
    """Interpret mode drops the un-waited copy: the test's assert fails on
    NaNs. The failure stays on the assert line and names PAL302 on the
    kernel's `.start()`, in the text and as related information."""
    ws = _workspace(tmp_path)
    kernels = ws / "kernels.py"
    res = run(RunSpec(target=str(ws / "test_k.py") + "::test_dropped", python=PYTHON,
                      timeout=120, compile_for=()))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    start = line_of(kernels, "copy.start()  # BUG")
    assert d.path == str(ws / "test_k.py") and "nan location mismatch" in d.message
    assert f"PAL302 at kernels.py:{start} in `started_never_waited`" in d.message
    (r,) = [r for r in d.related if r.message.startswith("PAL302 (static")]
    assert (r.path, r.span.line + 1) == (str(kernels), start)


def test_a_chip_hang_report_replayed(tmp_path):
    """What the child writes on a chip when a kernel hangs: no interpreter
    waits, the main thread in the test, the dispatched pallas_call. The
    diagnostic moves from the test's line to the kernel's wait."""
    ws = _workspace(tmp_path)
    kernels, test = ws / "kernels.py", ws / "test_k.py"
    call_line = line_of(kernels, "return pl.pallas_call(", 0)
    hang = {
        "timeout": 60, "waits": [],
        "current": {"nodeid": "test_k.py::test_hang", "path": str(test), "line": 8},
        "stacks": [{"main": True, "frames": [
            {"file": str(test), "line": line_of(test, "np.asarray(k.hang(X))"), "name": "test_hang"}]}],
        "dispatched": {"kernel": {"name": "wait_without_start", "file": str(kernels),
                                  "line": line_of(kernels, "def wait_without_start")},
                       "site": [{"file": str(kernels), "line": call_line, "name": "hang"},
                                {"file": "/site-packages/jax/_src/pallas/pallas_call.py",
                                 "line": 1, "name": "_pallas_call"}],
                       "nodeid": "test_k.py::test_hang"},
    }
    pm = PathMap(root=ws)
    (d,) = hang_report(hang, pm, None, 60, StaticContext(pm))
    assert (d.code, d.path, d.span.line + 1) == ("PAL303", str(kernels),
                                                 line_of(kernels, "copy.wait()  # BUG"))
    assert any(r.path == str(test) and "waiting for the kernel" in r.message for r in d.related)
    # without the record it stays where it was: the test's line, PAL902
    del hang["dispatched"]
    (d,) = hang_report(hang, pm, None, 60, StaticContext(pm))
    assert (d.code, d.path) == ("PAL902", str(test))


def test_a_hang_in_a_kernel_without_a_known_wait_lands_on_its_pallas_call(tmp_path):
    ws = _workspace(tmp_path)
    kernels = ws / "kernels.py"
    (ws / "spin.py").write_text(textwrap.dedent('''
        def spin(o_ref):
            while True:
                pass
    ''').lstrip())
    hang = {"timeout": 5, "dispatched": {
        "kernel": {"name": "spin", "file": str(ws / "spin.py"), "line": 1},
        "site": [{"file": str(kernels), "line": 17, "name": "hang"}]}}
    pm = PathMap(root=ws)
    (d,) = hang_report(hang, pm, None, 5, StaticContext(pm))
    assert (d.code, d.path, d.span.line + 1) == ("PAL902", str(kernels), 17)
    assert "hung in kernel `spin`" in d.message and "knows no wait" in d.message


def test_interpret_modes_dma_broadcast_error_moves_to_the_engines_pal305(tmp_path):
    """A copy of 8 rows into a 16-row buffer: TPU interpret mode fails with
    numpy's broadcast error and no kernel line (the diagnostic used to be
    PAL900 on the test's pallas_call). It is PAL305, on the copy the engine
    flags, with the failure's place as related information."""
    import shutil

    from test_chip_messages import CHIP

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    test = ws / "test_issue33.py"
    shutil.copy(CHIP / "test_issue33.py", test)
    res = run(RunSpec(target=str(test), python=PYTHON, timeout=120, compile_for=(),
                      args=["-k", "shape_mismatch"]))
    (d,) = res.diagnostics
    assert (d.code, d.path, d.span.line + 1) == (
        "PAL305", str(test), line_of(test, "make_async_copy(x_ref.at[pl.ds(0, 8)], buf, sem)"))
    assert "could not broadcast input array from shape (8,128) into shape (16,128)" in d.message
    assert d.related[0].message == "the run failed here"


def test_a_semaphore_wait_hang_lands_on_the_wait_the_interpreter_does_not_name(tmp_path):
    """Interpret mode does not say which `pl.semaphore_wait` is stuck (the
    diagnostic used to sit on the test's line); the kernel dispatched last
    has one wait, and the diagnostic is there."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname = 'ws'\nversion = '0'\n")
    test = ws / "test_sem.py"
    test.write_text(textwrap.dedent('''
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import tpu as pltpu


        def sem_kernel(x_ref, o_ref, sem):
            pl.semaphore_signal(sem, 1)
            pl.semaphore_wait(sem, 2)
            o_ref[...] = x_ref[...]


        def test_sem():
            x = jnp.ones((8, 128), jnp.float32)
            f = pl.pallas_call(sem_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                               scratch_shapes=[pltpu.SemaphoreType.REGULAR])
            np.asarray(f(x))
    ''').lstrip())
    res = run(RunSpec(target=str(test), python=PYTHON, timeout=8, compile_for=()))
    assert res.status is Status.TIMEOUT, res.summary
    (d,) = res.diagnostics
    assert (d.code, d.span.line + 1) == ("PAL902", line_of(test, "pl.semaphore_wait(sem, 2)"))
    assert "hung in kernel `sem_kernel`" in d.message and "semaphore wait" in d.message
    assert any(r.message == "the test was waiting for the kernel here" for r in d.related)


def _chip_halt_failure(test_file: Path) -> dict:
    """The failure a TPU v5e chip raised for a DMA started and never waited
    (tests/oracle/data/chip_v5e.jsonl, beyond/pal302_direct.py), as the child
    reports it from the test's frame."""
    import json
    record = Path(__file__).resolve().parents[1] / "oracle" / "data" / "chip_v5e.jsonl"
    row = next(r for r in map(json.loads, record.read_text().splitlines())
               if r["fixture"] == "beyond/pal302_direct.py")
    message = row["error"].split(": ", 1)[1]
    line = line_of(test_file, "k.dropped(X)")
    return {"type": "jax.errors.JaxRuntimeError", "message": message, "original": None,
            "nodeid": "test_k.py::test_dropped", "chain": [], "callback": [],
            "frames": [{"file": str(test_file), "line": line, "name": "test_dropped"}]}


def test_a_chips_core_halt_is_pal302_where_the_engine_finds_a_copy_never_waited(tmp_path):
    from pallas_lsp.runs.mapping import failure_diagnostic
    from pallas_lsp.runs.static_context import with_kernel_findings

    ws = _workspace(tmp_path)
    kernels, test = ws / "kernels.py", ws / "test_k.py"
    f = _chip_halt_failure(test)
    assert "Core halted unexpectedly" in f["message"]
    pm = PathMap(root=ws)
    ctx = StaticContext(pm)
    record = {"file": str(kernels), "name": "started_never_waited",
              "line": line_of(kernels, "def started_never_waited")}
    d = with_kernel_findings(failure_diagnostic(f, pm, None), [record], pm, ctx)
    assert (d.code, d.path, d.span.line + 1) == ("PAL302", str(kernels),
                                                 line_of(kernels, "copy.start()  # BUG"))
    assert any(r.message == "the run failed here" and r.path == str(test) for r in d.related)
    # The same halt after a kernel the engine finds no un-waited copy in stays generic.
    other = {"file": str(kernels), "name": "wait_without_start",
             "line": line_of(kernels, "def wait_without_start")}
    d = with_kernel_findings(failure_diagnostic(f, pm, None), [other], pm, ctx)
    assert d.code == "PAL900" and d.path == str(test)
