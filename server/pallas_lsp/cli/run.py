"""`pallas-lsp run`: its arguments, and the command-line front end of pallas_lsp.runs
(start a run, stream its output, print its diagnostics and summary)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pallas_lsp.cli.output import Loc

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT, EXIT_CANCELLED = 0, 1, 2, 3, 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", help="a file, `path::test_name`, a pytest node id, or a "
                   "notebook (.ipynb: its cells run in a Jupyter kernel, the `notebook` extra)")
    p.add_argument("args", nargs="*", help="after `--`: extra pytest (or script) arguments")
    p.add_argument("--mode", choices=("interpret", "tpu"), default=None,
                   help="interpret (default): TPU interpret mode on CPU; tpu: run for real")
    p.add_argument("--profile", default=None, metavar="NAME",
                   help="local (default) or a [tool.pallas-lsp.profiles.NAME] table")
    p.add_argument("--races", action="store_true", help="detect data races (interpret mode)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds before the run counts as hung (default 300, or the "
                   "profile's `timeout`)")
    p.add_argument("--devices", type=int, default=None, metavar="N",
                   help="simulated CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count)")
    p.add_argument("--python", default=None, metavar="PATH",
                   help="the Python to run (local profile; default: this one)")
    p.add_argument("--root", default=None, metavar="DIR",
                   help="workspace root (default: the target's project folder)")
    p.add_argument("--compile", default=None, metavar="GENS",
                   help="compile every pallas_call for these TPU generations (v4, v5e, v5p, "
                        "v6e; comma-separated), without a TPU. By default an interpret run "
                        "compiles for v5e,v6e where libtpu is installed, and says so where not")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the default compile: an interpret run alone can pass kernels "
                        "that a TPU refuses")
    p.add_argument("--allow-project-profiles", action="store_true",
                   help="use a profile defined in the repository's pyproject.toml (it decides "
                        "which program runs and where; see --list-profiles)")
    p.add_argument("--list-profiles", action="store_true",
                   help="list the profiles and what each runs, then exit")
    p.add_argument("--output-format", choices=("text", "json"), default="text")


def list_profiles(root: str) -> int:
    from pallas_lsp.runs.profiles import BUILT_IN, ProfileError, describe, project_profiles

    try:
        table, warnings = project_profiles(root)
    except ProfileError as e:
        print(f"pallas-lsp run: {e}", file=sys.stderr)
        return EXIT_USAGE
    for w in warnings:
        print(f"pallas-lsp: {w}", file=sys.stderr)
    for name, profile in BUILT_IN.items():
        print(f"{name}  (built in): {describe(profile)}")
    for name, found in sorted(table.items()):
        print(f"{name}  ({found.source}; needs --allow-project-profiles): {found.summary}")
    return EXIT_PASSED


def _row(d, plan) -> tuple[dict, "Loc"]:
    """A run diagnostic's JSON row and where it is: in a notebook, its cell
    (`cell`, 1-based) and the line and columns in it, as `check` says them."""
    from pallas_lsp.cli.output import span_loc
    from pallas_lsp.runs.mapping import cwd_relative

    shown = cwd_relative(d.path)
    row = d.to_row(shown)
    doc = plan.notebook if plan.notebook is not None and \
        os.path.realpath(d.path) == os.path.realpath(plan.target.path) else None
    loc = span_loc(d.path, shown, d.span, doc)
    if loc.cell is not None:
        row.update(line=loc.line, column=loc.col, end_line=loc.end_line,
                   end_column=loc.end_col, cell=loc.cell)
    return row, loc


def main(args: argparse.Namespace) -> int:
    from pallas_lsp.runs.model import Status
    from pallas_lsp.runs.runner import RunSpec, start_run
    from pallas_lsp.runs.compile_mapping import DEFAULT_GENERATIONS, parse_generations
    from pallas_lsp.runs.target import RunSpecError

    def out(stream: str, line: str) -> None:
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    if args.list_profiles:
        return list_profiles(args.root or os.getcwd())
    if not args.target:
        print("pallas-lsp run: give a TARGET (a file, path::test, a node id or a notebook)",
              file=sys.stderr)
        return EXIT_USAGE
    spec = RunSpec(target=args.target, root=args.root, mode=args.mode, profile=args.profile,
                   races=args.races, timeout=args.timeout, devices=args.devices,
                   python=args.python, args=list(args.args),
                   compile_for=(parse_generations(args.compile) if args.compile
                                else () if args.no_compile else DEFAULT_GENERATIONS),
                   compile_auto=not args.compile and not args.no_compile,
                   allow_project_profiles=bool(args.allow_project_profiles))
    try:
        handle = start_run(spec, on_output=out)
    except RunSpecError as e:
        print(f"pallas-lsp run: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = handle.result()
    except KeyboardInterrupt:
        handle.cancel()
        result = handle.result()
    rows = [_row(d, handle.plan) for d in result.diagnostics]
    if args.output_format == "json":
        print(json.dumps([row for row, _ in rows], indent=2, ensure_ascii=False))
    else:
        for r, loc in rows:
            print(f"{loc.where}: {r['code']} {r['message']}")
    sys.stdout.flush()
    for c in result.compiles:
        print(c["text"], file=sys.stderr)
    print(result.summary, file=sys.stderr, flush=True)
    return {Status.PASSED: EXIT_PASSED, Status.FAILED: EXIT_FAILED, Status.ERROR: EXIT_USAGE,
            Status.TIMEOUT: EXIT_TIMEOUT, Status.CANCELLED: EXIT_CANCELLED}[result.status]
