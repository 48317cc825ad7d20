"""`pallas-lsp check` against the parse floor. Prints numbers; not a test.

    python benchmarks/cli_speed.py [--repeat 5] [TREE]

TREE defaults to the installed jax's `jax/experimental/pallas/` (48 files).
Every number is the wall time of a fresh process (interpreter start-up
included), the minimum over the repeats (the machine is shared):

- parse floor: a Python process that reads and `ast.parse`s every file;
- check, one process (`PALLAS_LSP_JOBS=1`), and check as shipped (both cores
  once the input is big enough, see checker.PARALLEL_MIN_BYTES);
- the same for a small input (examples/), which must stay on one process.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

PARSE = """
import ast, os, sys
for top in sys.argv[1:]:
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(d, f), "rb") as fh:
                    try:
                        ast.parse(fh.read())
                    except (SyntaxError, ValueError):
                        pass
"""


def wall(cmd: list[str], env: dict | None = None, repeat: int = 5) -> tuple[float, float]:
    """(wall, CPU) seconds, each the minimum over the repeats. CPU counts every
    process of the run (workers too): on a loaded machine it says what the
    wall time cannot."""
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        best = min(best, time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return best, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", nargs="?")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE if set (every run compiles the modules)")
    args = ap.parse_args()
    tree = args.tree or str(Path(importlib.util.find_spec("jax").origin).parent
                            / "experimental" / "pallas")
    base = dict(os.environ)
    if not args.no_bytecode:
        # As installed (pip writes .pyc files): without them every run
        # compiles pallas-lsp's own modules first (~0.2 s here).
        base.pop("PYTHONDONTWRITEBYTECODE", None)
    env1 = dict(base, PALLAS_LSP_JOBS="1")
    env = {k: v for k, v in base.items() if k != "PALLAS_LSP_JOBS"}
    subprocess.run([sys.executable, "-c", "import pallas_lsp.cli, pallas_lsp.check.checker"],
                   env=env, check=False)  # writes the bytecode once
    # --no-cache: the analysis itself (cli_cache.py measures the cache)
    check = [sys.executable, "-m", "pallas_lsp", "check", "--no-cache", "--exit-zero",
             "--output-format", "concise"]
    files = sum(1 for _ in Path(tree).rglob("*.py"))
    print(f"tree: {tree} ({files} files); {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f}; min of {args.repeat}")
    for name, target in (("big", tree), ("small", str(REPO / "examples"))):
        floor, floor_cpu = wall([sys.executable, "-c", PARSE, target], env, repeat=args.repeat)
        one, one_cpu = wall(check + [target], env1, args.repeat)
        shipped, shipped_cpu = wall(check + [target], env, args.repeat)
        print(f"{name:5}  parse floor {floor:6.3f} s | check, one process {one:6.3f} s "
              f"({one / floor:4.1f}x) | check as shipped {shipped:6.3f} s "
              f"({shipped / floor:4.1f}x)")
        print(f"{'':5}  CPU         {floor_cpu:6.3f} s |                    {one_cpu:6.3f} s "
              f"({one_cpu / floor_cpu:4.1f}x) |                  {shipped_cpu:6.3f} s "
              f"({shipped_cpu / floor_cpu:4.1f}x)")


if __name__ == "__main__":
    main()
