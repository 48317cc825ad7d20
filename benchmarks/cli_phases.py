"""Where a cold `pallas-lsp check` spends its time, phase by phase, and the
same trees side by side with `ruff check --select ALL --no-cache` and the
parse floor. Prints numbers; not a test.

    python benchmarks/cli_phases.py [--repeat 5] [--files 2000] [--third-party DIR] [TREE ...]

TREEs default to the installed jax's `jax/experimental/pallas/`, the
third-party kernels in `--third-party` (default /work/tp_cache, when present;
'' leaves it out) and a generated tree of `--files` modules
(benchmarks/project_speed.py's, every one naming Pallas).

1. Side by side, each the wall time of a fresh process (interpreter start-up
   included), the minimum over the repeats (the machine is shared):
   `python -c pass`; the parse floor (a Python process that reads and
   `ast.parse`s every .py file); `check` as shipped (both cores for big
   inputs) and on one process; ruff, when installed (it is no dependency of
   the project: `pip install ruff`; without it that column is left out).
2. Phases, in one fresh process on one core (`PALLAS_LSP_JOBS=1`): the
   imports of the CLI, then the check itself with its functions wrapped in
   timers. Time is exclusive (a parse inside the interpreter counts as
   parse, not as interpretation), CPU seconds: discover, read, the inert-file pre-filter,
   parse, project index (the import scan, its reads included), interpret,
   rules, output; `other` is the rest (noqa, dedup, configuration, the
   engine's glue).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# The parse floor and the timer are cli_speed.py's (this folder is on sys.path when run).
from cli_speed import PARSE, wall  # noqa: E402

PHASES = ("imports", "discover", "read", "pre-filter", "parse", "index", "interpret", "rules",
          "output", "other")


def ruff_command() -> list[str] | None:
    exe = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    return [exe, "check", "--select", "ALL", "--no-cache", "--exit-zero", "--quiet"] \
        if exe else None


# ------------------------------------------------------------------ phases (child)


def child(tree: str) -> None:
    """Run in a fresh process: time the imports, then the check with timers.
    CPU time of this process (one core, PALLAS_LSP_JOBS=1): on a shared machine
    the wall clock also counts the other programs' turns."""
    clock = time.process_time
    t0 = clock()
    from pallas_lsp import cli
    from pallas_lsp.check import checker
    from pallas_lsp.cli import check as _check  # noqa: F401  (what `check` imports first)
    imports = clock() - t0

    from pallas_lsp.cli import output
    from pallas_lsp.engine import backend, project, relevance
    from pallas_lsp.engine.interp import Interpreter
    from pallas_lsp.engine.rules import FLOOR, RULES
    # (the package exports the function, and loads the module only when first asked)
    analyze_mod = importlib.import_module("pallas_lsp.engine.analyze")

    totals = dict.fromkeys(PHASES, 0.0)
    stack: list[list] = []  # [phase, start of its current exclusive slice]

    def timed(phase: str, fn, absorb: tuple = ()):
        def wrapper(*a, **k):
            now = clock()
            if stack:
                top = stack[-1]
                if top[0] in absorb or phase == top[0]:  # counts as the caller's phase
                    return fn(*a, **k)
                totals[top[0]] += now - top[1]
            stack.append([phase, now])
            try:
                return fn(*a, **k)
            finally:
                end = clock()
                totals[phase] += end - stack.pop()[1]
                if stack:
                    stack[-1][1] = end
        return wrapper

    checker.discover = timed("discover", checker.discover)
    checker.read_source = timed("read", checker.read_source)
    checker.read_document = timed("read", checker.read_document)
    project._read_disk = timed("read", project._read_disk, absorb=("index",))
    relevance.inert_file = timed("pre-filter", relevance.inert_file)
    backend.gpu_only = timed("pre-filter", backend.gpu_only)
    analyze_mod.parses = timed("parse", analyze_mod.parses)
    analyze_mod.parse = timed("parse", analyze_mod.parse)
    project.parse = timed("parse", project.parse)
    project._tag = timed("parse", project._tag)
    project.Project.index = timed("index", project.Project.index)
    project.Project.importers = timed("index", project.Project.importers)
    Interpreter.run = timed("interpret", Interpreter.run)
    for mod in (*RULES, *FLOOR):
        mod.check = timed("rules", lambda *a, _f=mod.check: list(_f(*a)))
    output.render = timed("output", output.render)
    output.rows_for = timed("output", output.rows_for)
    import pallas_lsp.cli.check as cli_check
    cli_check_run = cli_check._check_run
    cli_check._check_run = timed("other", cli_check_run)

    t1 = clock()
    cli.main(["check", "--no-cache", "--exit-zero", "--output-format", "json", "-o", os.devnull, tree])
    rest = clock() - t1 - sum(v for k, v in totals.items() if k != "imports")
    totals["other"] += rest  # argparse, main's own lines
    totals["imports"] = imports
    print(json.dumps(totals))


def phases(tree: str, env: dict, repeat: int) -> dict[str, float]:
    """Each phase's minimum over the repeats (fresh processes)."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        out = subprocess.run([sys.executable, str(Path(__file__)), "--child", tree], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            continue
        got = json.loads(out.stdout.strip().splitlines()[-1])
        for k, v in got.items():
            best[k] = min(best.get(k, v), v)
    return best


# ------------------------------------------------------------------ main


def synthetic(root: Path, n: int) -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO / "server"))
    from project_speed import make_workspace
    make_workspace(root, n)


def measure(name: str, tree: str, env: dict, repeat: int) -> None:
    files = [p for p in Path(tree).rglob("*.py") if "__pycache__" not in p.parts]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    print(f"\n## {name}: {tree} ({len(files)} .py files, {lines / 1000:.1f} kLOC)")
    env1 = dict(env, PALLAS_LSP_JOBS="1")
    check = [sys.executable, "-m", "pallas_lsp", "check", "--no-cache", "--exit-zero",
             "--output-format", "json", "-o", os.devnull, tree]
    start, start_cpu = wall([sys.executable, "-c", "pass"], env, repeat)
    floor, floor_cpu = wall([sys.executable, "-c", PARSE, tree], env, repeat)
    shipped, shipped_cpu = wall(check, env, repeat)
    one, one_cpu = wall(check, env1, repeat)
    ruff = ruff_command()
    rows = [("python -c pass", start, start_cpu), ("parse floor (ast.parse)", floor, floor_cpu),
            ("pallas-lsp check, as shipped", shipped, shipped_cpu),
            ("pallas-lsp check, one process", one, one_cpu)]
    ruff_t = None
    if ruff:
        ruff_t, ruff_cpu = wall(ruff + [tree], env, repeat)
        rows.append(("ruff check --select ALL --no-cache", ruff_t, ruff_cpu))
    # On a shared machine the wall clock counts the other programs' turns too:
    # CPU seconds (every process and thread of the command) say what each costs.
    print("| command | wall s | CPU s | wall / floor | CPU / floor | wall / ruff | CPU / ruff |")
    print("|---|---|---|---|---|---|---|")
    for label, t, cpu in rows:
        w_ruff = f"{t / ruff_t:.2f}x" if ruff_t else "-"
        c_ruff = f"{cpu / ruff_cpu:.2f}x" if ruff_t else "-"
        print(f"| {label} | {t:.3f} | {cpu:.3f} | {t / floor:.2f}x | {cpu / floor_cpu:.2f}x | "
              f"{w_ruff} | {c_ruff} |")
    got = phases(tree, env1, repeat)
    if got:
        total = sum(got.values())
        print(f"\nphases, one process (min of {repeat}; sum {total:.3f} s, plus start-up "
              f"{start:.3f} s):")
        print("| phase | s | share |\n|---|---|---|")
        for k in PHASES:
            print(f"| {k} | {got.get(k, 0.0):.3f} | {got.get(k, 0.0) / total:5.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="*")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000, help="size of the generated tree (0: none)")
    ap.add_argument("--third-party", default="/work/tp_cache",
                    help="a folder of third-party kernels ('': none)")
    ap.add_argument("--no-jax", action="store_true", help="leave out jax's Pallas tree")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: pallas-lsp's .pyc files exist
    env.pop("PALLAS_LSP_JOBS", None)
    subprocess.run([sys.executable, "-c", ("import pallas_lsp.cli.check, pallas_lsp.check.checker,"
                                           " pallas_lsp.cli.output.machine")],
                   env=env, check=False)  # bytecode once
    print(f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; min of {args.repeat}; "
          f"ruff: {'yes' if ruff_command() else 'not installed'}")
    trees = [(t, t) for t in args.trees]
    if not args.trees:
        jax = None if args.no_jax else importlib.util.find_spec("jax")
        if jax is not None and jax.origin:
            trees.append(("jax pallas", str(Path(jax.origin).parent / "experimental" / "pallas")))
        if args.third_party and os.path.isdir(args.third_party):
            trees.append(("third-party", args.third_party))
    with tempfile.TemporaryDirectory() as tmp:
        if args.files and not args.trees:
            synthetic(Path(tmp), args.files)
            trees.append((f"generated, {args.files} modules", tmp))
        for name, tree in trees:
            measure(name, tree, env, args.repeat)


if __name__ == "__main__":
    main()
