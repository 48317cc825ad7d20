"""Command line: `pallas-lsp check`, `pallas-lsp rule`, `pallas-lsp serve`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pallas_lsp import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERNAL = 3  # `check`: pallas-lsp itself failed (a bug to report), never "findings"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors already
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.func(args)
    except BrokenPipeError:
        return EXIT_CLEAN
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pallas-lsp", description=(
        "Find Ref / semaphore / DMA mistakes in JAX Pallas TPU kernels."))
    p.add_argument("--version", action="version", version=f"pallas-lsp {__version__}")
    sub = p.add_subparsers(dest="command")

    c = sub.add_parser("check", help="check files and folders")
    c.add_argument("paths", nargs="*", default=["."], help="files or folders (default: .)")
    c.add_argument("--output-format", choices=("text", "json"), default="text")
    c.add_argument("--select", type=_codes, default=None, help="comma-separated code prefixes")
    c.add_argument("--ignore", type=_codes, default=None, help="comma-separated code prefixes")
    c.add_argument("--no-config", action="store_true", help="ignore [tool.pallas-lsp] settings")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found")
    c.set_defaults(func=_check)

    v = sub.add_parser("coverage", help="how much of the kernels' code the engine sees")
    v.add_argument("paths", nargs="*", default=["."], help="files or folders (default: .)")
    v.add_argument("--output-format", choices=("text", "json"), default="text")
    v.add_argument("--verbose", action="store_true", help="list known sites and bound kernels too")
    v.add_argument("--no-config", action="store_true", help="ignore [tool.pallas-lsp] settings")
    v.set_defaults(func=_coverage)

    r = sub.add_parser("rule", help="explain a rule (catalog entry)")
    r.add_argument("code", nargs="?", help="e.g. PAL103")
    r.add_argument("--all", action="store_true", help="every rule")
    r.add_argument("--output-format", choices=("text", "json"), default="text")
    r.set_defaults(func=_rule)

    u = sub.add_parser("run", help="run a kernel's test in TPU interpret mode (or on a TPU)")
    from pallas_lsp.runs.command import add_arguments as _run_arguments
    _run_arguments(u)
    u.set_defaults(func=_run)

    s = sub.add_parser("serve", help="run the language server")
    s.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    s.add_argument("--tcp", metavar="HOST:PORT", default=None)
    s.add_argument("--log-file", default=None)
    s.set_defaults(func=_serve)
    return p


def _codes(text: str) -> list[str]:
    return [c.strip().upper() for c in text.split(",") if c.strip()]


# ---------------------------------------------------------------- check


def _check(args) -> int:
    from pallas_lsp.checker import check_paths
    from pallas_lsp.config import ConfigError

    try:
        results, problems = check_paths([Path(p) for p in args.paths], select=args.select,
                                        ignore=args.ignore, use_config=not args.no_config)
    except ConfigError as exc:
        print(f"pallas-lsp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # MemoryError, RecursionError and bugs alike
        import traceback

        traceback.print_exc()
        print(f"pallas-lsp: internal error ({type(exc).__name__}: {exc}); please report it",
              file=sys.stderr)
        return EXIT_INTERNAL
    missing = [p for p in problems if p.kind == "missing"]
    if missing and len(missing) == len(args.paths):
        for p in missing:
            print(f"pallas-lsp: {p.path}: {p.message}", file=sys.stderr)
        return EXIT_USAGE
    rows = []
    for path, finding in results:
        s = finding.span
        rows.append({"path": str(path), "line": s.line + 1, "column": s.col + 1,
                     "end_line": s.end_line + 1, "end_column": s.end_col + 1,
                     "code": finding.code, "message": finding.message,
                     "severity": finding.severity.value})
    for p in problems:
        rows.append({"path": str(p.path), "line": p.line, "column": 1, "end_line": p.line,
                     "end_column": 1,
                     "code": {"syntax": "E999", "internal": "E001"}.get(p.kind, "E902"),
                     "message": p.message, "severity": "error"})
    if args.output_format == "json":
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        for r in rows:
            print(f"{r['path']}:{r['line']}:{r['column']}: {r['code']} {r['message']}")
        n = len(rows)
        sys.stdout.flush()
        if n:
            print(f"Found {n} problem{'s' if n != 1 else ''}.", file=sys.stderr)
    if any(p.kind == "internal" for p in problems):
        return EXIT_INTERNAL  # the other files were checked, but not all of them
    return EXIT_FINDINGS if rows and not args.exit_zero else EXIT_CLEAN


# ---------------------------------------------------------------- coverage


def _coverage(args) -> int:
    from pallas_lsp.coverage_report import run

    text, code = run([Path(p) for p in args.paths], args.output_format, args.verbose,
                     use_config=not args.no_config)
    print(text, file=sys.stderr if code else sys.stdout)
    return code


# ---------------------------------------------------------------- rule


def _rule(args) -> int:
    from pallas_lsp import catalog

    entries = catalog.load()
    if args.all:
        chosen = [entries[c] for c in sorted(entries)]
    elif args.code:
        entry = entries.get(args.code.upper())
        if entry is None:
            print(f"pallas-lsp: unknown rule {args.code!r}; known: {', '.join(sorted(entries))}",
                  file=sys.stderr)
            return EXIT_USAGE
        chosen = [entry]
    else:
        print("pallas-lsp rule: give a CODE or --all", file=sys.stderr)
        return EXIT_USAGE
    if args.output_format == "json":
        out = [e.to_dict() for e in chosen]
        print(json.dumps(out if args.all else out[0], indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(e.to_markdown() for e in chosen))
    return EXIT_CLEAN


# ---------------------------------------------------------------- run


def _run(args) -> int:
    from pallas_lsp.runs.command import main as run_main

    return run_main(args)


# ---------------------------------------------------------------- serve


def _serve(args) -> int:
    from pallas_lsp.lsp.server import run

    run(tcp=args.tcp, log_file=args.log_file)
    return EXIT_CLEAN
