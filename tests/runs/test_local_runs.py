"""Local runs of buggy kernels in TPU interpret mode (real JAX, real
subprocesses): the diagnostics land on the user's lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runs_helpers import PYTHON, line_of, make_workspace, processes_in_group, workspace  # noqa: F401

from pallas_lsp.runs import RunSpec, Status, run, start_run

SERVER = str(Path(__file__).resolve().parents[2] / "server")


def _by_test(res):
    return {d.test.split("::")[-1]: d for d in res.diagnostics if d.test}


def test_dma_bugs_land_on_the_start_lines_and_unmodified_tests_run_interpreted(workspace):
    """PAL101 (an Array passed to a DMA) and PAL103 (a vector semaphore), each at
    its `.start()` line in kernels.py; test_good has no `interpret=` and passes
    only because the plugin forces TPU interpret mode (on CPU it would raise
    "Only interpret mode is supported on CPU backend")."""
    out = []
    res = run(RunSpec(target=str(workspace / "test_kernels.py"), python=PYTHON, timeout=180,
                      args=["-k", "array_to_dma or vector_sem or good"]),
              on_output=lambda stream, line: out.append((stream, line)))
    assert res.status is Status.FAILED, res.summary
    assert res.tests == {"failed": 2, "passed": 1}
    kernels = workspace / "kernels.py"
    diags = _by_test(res)
    assert set(diags) == {"test_array_to_dma", "test_vector_sem"}
    a, v = diags["test_array_to_dma"], diags["test_vector_sem"]
    assert (a.code, a.path, a.span.line + 1) == ("PAL101", str(kernels),
                                                 line_of(kernels, "copy.start()", 0))
    assert (v.code, v.path, v.span.line + 1) == ("PAL103", str(kernels),
                                                 line_of(kernels, "copy.start()", 1))
    assert a.message.startswith("DMA source/destination/semaphore arguments must be Refs.")
    assert v.message.startswith("Cannot signal on a non-()-shaped semaphore: (2,)")
    assert a.span.col == 4 and a.source == "pallas-lsp run"
    # the call chain is kept as related locations, outermost last
    assert [r.path for r in a.related][-1] == str(workspace / "test_kernels.py")
    assert a.to_finding().code == "PAL101"
    # output was streamed line by line, both streams
    assert any(s == "stdout" and "short test summary" in line for s, line in out)
    assert "2 failed" in res.summary and "1 passed" in res.summary
    assert res.argv[1:4] == ["-m", "pallas_lsp.runs.launcher", "--pytest"]


def test_races_only_with_races_flag(workspace):
    target = str(workspace / "test_kernels.py") + "::test_racy"
    quiet = run(RunSpec(target=target, python=PYTHON, timeout=180))
    assert quiet.status is Status.PASSED, quiet.summary
    assert quiet.diagnostics == []
    res = run(RunSpec(target=target, python=PYTHON, timeout=180, races=True))
    assert res.status is Status.FAILED, res.summary
    kernels = workspace / "kernels.py"
    got = {(d.code, d.span.line + 1) for d in res.diagnostics}
    start = line_of(kernels, "copy.start()", 2)
    touch = line_of(kernels, "t_ref[...] = t_ref[...]")
    assert got == {("PAL901", start), ("PAL901", touch)}
    assert all(d.path == str(kernels) for d in res.diagnostics)
    # the read and the write of line `touch` are both reported, at their columns
    cols = sorted(d.span.col for d in res.diagnostics if d.span.line + 1 == touch)
    assert cols == [4, 17]
    assert "DMA" in res.diagnostics[0].message


def test_hang_times_out_at_the_wait_line_via_cli(workspace):
    """The CLI: exit 3, the diagnostic says the kernel hung, at `copy.wait()`."""
    env = dict(os.environ, PYTHONPATH=SERVER)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--timeout", "12",
                        "--output-format", "json", "test_kernels.py::test_hangs"],
                       cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    (row,) = json.loads(p.stdout)
    from pallas_lsp import catalog
    expected = "PAL303" if "PAL303" in catalog.load() else "PAL902"  # PAL303: wait-without-start
    assert row["code"] == expected and "hung" in row["message"]
    assert row["path"] == "kernels.py"
    assert row["line"] == line_of(workspace / "kernels.py", "copy.wait()  # BUG: never started")
    summary = p.stderr.strip().splitlines()[-1]
    assert summary.startswith("pallas-lsp run test_kernels.py::test_hangs: timeout")


def test_cli_text_output_and_exit_codes(workspace):
    env = dict(os.environ, PYTHONPATH=SERVER)
    ok = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "test_kernels.py::test_good"],
                        cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert ok.stdout == ""
    assert "1 passed" in ok.stderr  # pytest's own output is streamed to stderr
    assert ok.stderr.strip().splitlines()[-1].startswith(
        "pallas-lsp run test_kernels.py::test_good: passed")
    bad = subprocess.run([sys.executable, "-m", "pallas_lsp", "run",
                          "test_kernels.py::test_vector_sem"],
                         cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    line = line_of(workspace / "kernels.py", "copy.start()", 1)
    assert bad.stdout.startswith(f"kernels.py:{line}:5: PAL103 Cannot signal on a non-()-shaped")


def test_odd_file_names_script_and_test(tmp_path):
    """Spaces, quotes and semicolons in the folder, the test file and a script."""
    ws = make_workspace(tmp_path / "my ws; it's \"odd\"", test_name="test it's; \"odd\".py")
    script = ws / "run me; 'now' \"please\".py"
    script.write_text(
        "import sys\nimport jax.numpy as jnp\nfrom jax.experimental.pallas import tpu as pltpu\n"
        "import kernels as k\n\n"
        "if __name__ == '__main__':\n"
        "    assert sys.argv[1:] == ['a b', '$HOME;']\n"
        "    k.call(k.array_to_dma, [pltpu.VMEM(k.SHAPE, jnp.float32), pltpu.SemaphoreType.DMA])\n")
    res = run(RunSpec(target=str(script), python=PYTHON, timeout=180, args=["a b", "$HOME;"]))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    assert (d.code, d.path) == ("PAL101", str(ws / "kernels.py"))
    assert d.span.line + 1 == line_of(ws / "kernels.py", "copy.start()", 0)
    assert [r.path for r in d.related][-1] == str(script)
    test_file = ws / "test it's; \"odd\".py"
    res = run(RunSpec(target=f"{test_file}::test_vector_sem", python=PYTHON, timeout=180))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    assert d.code == "PAL103" and d.path == str(ws / "kernels.py")


def test_cancel_kills_the_whole_process_group(workspace):
    pidfile = workspace / "grandchild.pid"
    (workspace / "test_spawn.py").write_text(
        "import subprocess, time\n\n"
        "def test_spawn_and_wait():\n"
        "    p = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(300)\n")
    handle = start_run(RunSpec(target=str(workspace / "test_spawn.py"), python=PYTHON,
                               timeout=300))
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    pgid = handle.pid
    grandchild = int(pidfile.read_text())
    assert pgid is not None and grandchild in processes_in_group(pgid)
    t0 = time.monotonic()
    handle.cancel()
    res = handle.result(20)
    assert time.monotonic() - t0 < 5
    assert res.status is Status.CANCELLED
    assert res.summary.startswith("pallas-lsp run ") and "cancelled" in res.summary
    assert processes_in_group(pgid) == []
    assert not Path(f"/proc/{grandchild}").exists() or \
        Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_devices_flag_reaches_the_child(workspace):
    (workspace / "test_devices.py").write_text(
        "import jax\n\ndef test_count():\n    assert jax.device_count() == 4\n")
    res = run(RunSpec(target=str(workspace / "test_devices.py"), python=PYTHON, devices=4,
                      timeout=180))
    assert res.status is Status.PASSED, res.summary
    res = run(RunSpec(target=str(workspace / "test_devices.py"), python=PYTHON, timeout=180))
    assert res.status is Status.FAILED
    (d,) = res.diagnostics
    assert d.code == "PAL900" and d.message.startswith("AssertionError")
    assert d.span.line + 1 == 4 and d.path == str(workspace / "test_devices.py")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


ESCAPE = (
    "import subprocess, sys, time\n\n"
    "def test_escape():\n"
    "    # a grandchild in a session of its own, holding the run's stdout and stderr\n"
    "    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
    "                         start_new_session=True)\n"
    "    open({pidfile!r}, 'w').write(str(p.pid))\n"
    "    {then}\n")


def test_a_setsid_grandchild_does_not_delay_the_timeout(workspace):
    """The run's result arrives within a second of the timeout (the child's
    watchdog line), and the escaped grandchild is gone. A process-group kill
    missed it, and the result waited 10 s for the pipes it held."""
    pidfile = workspace / "escaped.pid"
    script = workspace / "escape.py"
    script.write_text(ESCAPE.format(pidfile=str(pidfile), then="time.sleep(120)")
                      + "\ntest_escape()\n")
    fired: list[float] = []

    def out(stream: str, line: str) -> None:
        if "no result after" in line:
            fired.append(time.monotonic())

    handle = start_run(RunSpec(target=str(script), python=PYTHON, timeout=8, kind="script"),
                       on_output=out)
    res = handle.result(60)
    arrived = time.monotonic()
    assert res.status is Status.TIMEOUT, res.summary
    assert pidfile.exists(), "the script did not get to start its grandchild"
    assert fired and arrived - fired[0] < 1.0, (arrived - fired[0]) if fired else res.summary
    assert not _alive(int(pidfile.read_text()))


def test_what_a_passing_run_leaves_behind_is_ended(workspace):
    pidfile = workspace / "escaped.pid"
    (workspace / "test_escape.py").write_text(ESCAPE.format(pidfile=str(pidfile), then="pass"))
    t0 = time.monotonic()
    res = run(RunSpec(target=str(workspace / "test_escape.py"), python=PYTHON, timeout=120))
    assert res.status is Status.PASSED, res.summary
    assert time.monotonic() - t0 < 30
    assert not _alive(int(pidfile.read_text()))
