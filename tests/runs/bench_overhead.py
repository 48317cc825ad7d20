"""Overhead of `pallas-lsp run` over running the same pytest command by hand.
Not a test (no `test_` prefix). Run:

    PYTHONPATH=server python tests/runs/bench_overhead.py [REPEATS]

By hand = `python -m pytest -q -p pallas_lsp.runs.pytest_plugin FILE::TEST`
(interpret mode has to come from somewhere: the plugin, or a conftest doing
the same). Through the runner = `start_run(...)` in-process (what the language
server pays) and the `pallas-lsp run` command line (adds the CLI's own start).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVER = str(HERE.parents[1] / "server")
sys.path.insert(0, SERVER)
sys.path.insert(0, str(HERE))

from runs_helpers import make_workspace  # noqa: E402

from pallas_lsp.runs import RunSpec, Status, run  # noqa: E402


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    ws = make_workspace(Path(tempfile.mkdtemp(prefix="pallas-bench-")) / "ws")
    target = "test_kernels.py::test_good"
    env = dict(os.environ, PYTHONPATH=SERVER, JAX_PLATFORMS="cpu", PALLAS_LSP_INTERPRET="1")
    by_hand = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "pallas_lsp.runs.pytest_plugin", target]
    cli = [sys.executable, "-m", "pallas_lsp", "run", target]
    # the exact child command the runner starts, by hand (isolates the runner's own cost)
    child = [sys.executable, "-m", "pallas_lsp.runs.launcher", "--pytest", "--", target,
             "--capture=tee-sys"]
    times: dict[str, list[float]] = {"by hand (pytest + plugin)": [],
                                     "by hand (runner's child argv)": [], "runner API": [],
                                     "pallas-lsp run (CLI)": []}

    def timed(argv):
        t0 = time.perf_counter()
        p = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return time.perf_counter() - t0

    timed(by_hand)  # warm the file cache
    for _ in range(repeats):
        times["by hand (pytest + plugin)"].append(timed(by_hand))
        times["by hand (runner's child argv)"].append(timed(child))
        t0 = time.perf_counter()
        res = run(RunSpec(target=str(ws / target), python=sys.executable))
        assert res.status is Status.PASSED, res.summary
        times["runner API"].append(time.perf_counter() - t0)
        times["pallas-lsp run (CLI)"].append(timed(cli))
    base = statistics.median(times["by hand (pytest + plugin)"])
    print(f"{repeats} repetitions each, interleaved; one passing kernel test")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:30s} median {med:5.2f} s  min {min(ts):5.2f} s  max {max(ts):5.2f} s"
              f"  overhead {med - base:+.2f} s")


if __name__ == "__main__":
    main()
