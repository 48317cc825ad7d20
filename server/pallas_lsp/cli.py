"""Command line: `pallas-lsp check`, `coverage`, `rule`, `run`, `serve`."""
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
        try:  # nothing more reaches the reader; keep the interpreter's final flush quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_CLEAN
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    from pallas_lsp.output import FORMATS

    p = argparse.ArgumentParser(prog="pallas-lsp", description=(
        "Find Ref / semaphore / DMA mistakes in JAX Pallas TPU kernels."))
    p.add_argument("--version", action="version", version=f"pallas-lsp {__version__}")
    sub = p.add_subparsers(dest="command")

    c = sub.add_parser("check", help="check files and folders",
                       description="Check files and folders as one project. Exit codes: 0 "
                       "clean, 1 problems found (or, with --diff, files would change), 2 usage "
                       "or configuration error, 3 pallas-lsp itself failed.")
    c.add_argument("paths", nargs="*", default=["."],
                   help="files or folders (default: .); `-` reads the source from stdin")
    c.add_argument("--output-format", choices=FORMATS + ("text",), default=None,
                   help="full (default on a terminal), concise (default otherwise; `text` is "
                   "the same), json, json-lines, github, sarif, junit")
    c.add_argument("-o", "--output-file", metavar="FILE", default=None,
                   help="write the report there instead of stdout")
    sel = c.add_argument_group("rule selection (codes or prefixes, comma-separated; ALL)")
    sel.add_argument("--select", type=_codes, default=None, metavar="CODES",
                     help="report only these (replaces `select` of the configuration)")
    sel.add_argument("--extend-select", type=_codes, action="extend", default=None, metavar="CODES",
                     help="report these too")
    sel.add_argument("--ignore", type=_codes, action="extend", default=None, metavar="CODES",
                     help="do not report these")
    sel.add_argument("--extend-ignore", type=_codes, action="extend", dest="ignore",
                     help=argparse.SUPPRESS)
    fix = c.add_argument_group("fixes")
    fix.add_argument("--fix", action=argparse.BooleanOptionalAction, default=False,
                     help="apply safe fixes in place (with `-`: print the fixed source)")
    fix.add_argument("--unsafe-fixes", action=argparse.BooleanOptionalAction, default=False,
                     help="with --fix/--diff, apply unsafe fixes too")
    fix.add_argument("--diff", action="store_true",
                     help="print a unified diff of what --fix would change; change nothing")
    fix.add_argument("--fix-only", action=argparse.BooleanOptionalAction, default=False,
                     help="apply fixes and report only how many; implies --fix")
    fix.add_argument("--show-fixes", action=argparse.BooleanOptionalAction, default=False,
                     help="list the fixes applied (with --fix) or available")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when something was fixed, even if nothing remains")
    files = c.add_argument_group("files")
    files.add_argument("--stdin-filename", metavar="PATH", default=None,
                       help="the path of the source read from stdin (`-`): for the "
                       "configuration, exclusions and messages")
    files.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction,
                       default=None, help="skip files .gitignore ignores (default: on)")
    files.add_argument("--force-exclude", action=argparse.BooleanOptionalAction, default=None,
                       help="apply `exclude` to paths named on the command line too "
                       "(for pre-commit)")
    files.add_argument("--no-config", "--isolated", dest="no_config", action="store_true",
                       help="ignore [tool.pallas-lsp] settings")
    out = c.add_argument_group("reporting")
    out.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when problems are found")
    out.add_argument("--statistics", action="store_true",
                     help="count problems per code instead of listing them")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="the problems only, no summary")
    out.add_argument("-s", "--silent", action="store_true",
                     help="print nothing; the exit code says it all")
    out.add_argument("-v", "--verbose", action="store_true",
                     help="say which files were skipped and why, and the configuration used")
    c.set_defaults(func=_check)

    v = sub.add_parser("coverage", help="how much of the kernels' code the engine sees")
    v.add_argument("paths", nargs="*", default=["."], help="files or folders (default: .)")
    v.add_argument("--output-format", choices=("text", "json"), default="text")
    v.add_argument("--verbose", action="store_true", help="list known sites and bound kernels too")
    v.add_argument("--no-config", action="store_true", help="ignore [tool.pallas-lsp] settings")
    v.set_defaults(func=_coverage)

    r = sub.add_parser("rule", help="explain a code (every code check and run can print)")
    r.add_argument("code", nargs="?", help="e.g. PAL103, E999, PAL901")
    r.add_argument("--all", action="store_true", help="every code")
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
    return [c.strip() for c in text.split(",") if c.strip()]


def _err(message: str) -> None:
    print(f"pallas-lsp: {message}", file=sys.stderr)


# ---------------------------------------------------------------- check


def _check(args) -> int:
    from pallas_lsp.codes import SelectorError, normalise_selector
    from pallas_lsp.config import ConfigError

    try:
        select = [normalise_selector(s, "--select") for s in args.select] \
            if args.select is not None else None
        extend = [normalise_selector(s, "--extend-select") for s in args.extend_select or ()]
        ignore = [normalise_selector(s, "--ignore") for s in args.ignore or ()]
    except SelectorError as exc:
        _err(str(exc))
        return EXIT_USAGE
    if args.fix_only:
        args.fix = True
    stdin = "-" in args.paths
    if stdin and len(args.paths) > 1:
        _err("`-` (stdin) cannot be combined with other paths")
        return EXIT_USAGE
    if args.stdin_filename and not stdin:
        if args.paths != ["."]:
            _err("--stdin-filename names the source read from stdin: give `-`, not paths")
            return EXIT_USAGE
        args.paths = ["-"]  # as in ruff: the name alone means stdin
        stdin = True
    try:
        return _check_run(args, select, extend, ignore, stdin)
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:  # `| head`: the reader is gone, not a failure of ours
        raise
    except Exception as exc:  # MemoryError, RecursionError and bugs alike
        import traceback

        traceback.print_exc()
        _err(f"internal error ({type(exc).__name__}: {exc}); please report it")
        return EXIT_INTERNAL


def _check_run(args, select, extend, ignore, stdin: bool) -> int:
    from pallas_lsp import checker, fixes
    from pallas_lsp.output import TEXT_FORMATS, render, rows_for
    from pallas_lsp.output.text import Style, statistics, summary

    options = checker.Options(select=select, extend_select=extend or None, ignore=ignore,
                              use_config=not args.no_config, force_exclude=args.force_exclude,
                              respect_gitignore=args.respect_gitignore)
    if stdin:
        path = Path(args.stdin_filename) if args.stdin_filename else Path("-")
        data = sys.stdin.buffer.read()
        text, problem = checker.decode(path, data)
        if problem is not None:
            _err(f"{path}: {problem.message}")
            return EXIT_USAGE
        options.sources[os.path.realpath(path)] = text
        paths = [path]
    else:
        paths = [Path(p) for p in args.paths]

    fmt = _output_format(args, paths, options)
    fixing = args.fix or args.diff
    run = None
    if fixing:
        run = fixes.run(paths, options, unsafe=args.unsafe_fixes)
        checked, problems = run.checked, run.problems
    else:
        checked, problems = checker.check_project(paths, options=options)

    missing = [p for p in problems if p.kind == "missing"]
    if missing and len(missing) == len(paths):
        for p in missing:
            _err(f"{p.path}: {p.message}")
        return EXIT_USAGE
    if args.verbose:
        for note in options.notes:
            print(f"pallas-lsp: {note}", file=sys.stderr)
        for source in sorted({str(c.config.source) for c in checked
                              if c.config is not None and c.config.source}):
            print(f"pallas-lsp: configuration: {source}", file=sys.stderr)
        if run is not None:
            for why in run.skipped:
                print(f"pallas-lsp: {why}", file=sys.stderr)
    elif run is not None:
        for why in run.skipped:
            _err(why)

    rows = rows_for(checked, problems, unsafe=args.unsafe_fixes)
    internal = any(p.kind == "internal" for p in problems)
    fixed = run.fixed_count if run is not None else 0

    # Where the report goes: stdout, a file, or (when stdout carries the
    # fixed source or a diff) stderr.
    report = sys.stdout
    if stdin and args.fix and not args.diff:
        report = sys.stderr
    handle = open(args.output_file, "w", encoding="utf-8") if args.output_file else None
    if handle is not None:
        report = handle
    style = Style.for_stream(report) if handle is None else Style(False)
    texts = {}
    for real, text in options.sources.items():
        texts[real] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    try:
        if args.diff:
            _print_diffs(run, stdin, paths)
            if not args.silent:
                n = run.fixed_count
                print(f"Would fix {n} problem{'s' if n != 1 else ''}."
                      if n else "No fixes available.", file=sys.stderr)
            if internal:
                return EXIT_INTERNAL
            return EXIT_FINDINGS if run.files else EXIT_CLEAN
        if args.fix:
            if stdin:
                entry = next(iter(run.files.values()), None)
                sys.stdout.write(entry.text if entry is not None else
                                 options.sources[os.path.realpath(paths[0])])
                sys.stdout.flush()
            else:
                for entry in run.files.values():
                    fixes.write(entry)
        if args.silent:
            pass
        elif args.fix_only:
            if not args.quiet:
                print(f"Fixed {fixed} problem{'s' if fixed != 1 else ''}.", file=report)
        elif args.statistics:
            if rows:
                print(statistics(rows), file=report)
        else:
            body = render(fmt, rows, style=style, texts=texts, show_fixes=args.show_fixes)
            report.write(body)
            if fmt in TEXT_FORMATS and not args.quiet:
                if body and fmt == "full":
                    report.write("\n")
                print(summary(rows, fixed=fixed, fix_mode=args.fix, unsafe=args.unsafe_fixes,
                              style=style), file=report)
        if args.show_fixes and run is not None and fixed and not args.silent:
            print(_fixed_listing(run), file=report)
        report.flush()
    finally:
        if handle is not None:
            handle.close()
    if internal:
        return EXIT_INTERNAL  # the other files were checked, but not all of them
    if args.exit_non_zero_on_fix and fixed:
        return EXIT_FINDINGS
    if args.fix_only or args.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if rows else EXIT_CLEAN


def _output_format(args, paths, options) -> str:
    fmt = args.output_format or os.environ.get("PALLAS_LSP_OUTPUT_FORMAT")
    if fmt is None and options.use_config:
        from pallas_lsp.checker import Configs

        first = paths[0] if paths else Path(".")
        folder = first if first.is_dir() else first.absolute().parent
        fmt = Configs(options).for_dir(os.path.abspath(folder)).output_format
    if fmt is None:
        fmt = "full" if sys.stdout.isatty() else "concise"
    if fmt == "text":
        fmt = "concise"
    from pallas_lsp.output import FORMATS

    if fmt not in FORMATS:
        from pallas_lsp.config import ConfigError

        raise ConfigError(f"PALLAS_LSP_OUTPUT_FORMAT={fmt!r}: not one of {', '.join(FORMATS)}")
    return fmt


def _print_diffs(run, stdin: bool, paths) -> None:
    from pallas_lsp import fixes
    from pallas_lsp.output import display_path

    for entry in run.files.values():
        label = str(paths[0]) if stdin else display_path(entry.path)
        sys.stdout.write(fixes.unified_diff(entry, label))
    sys.stdout.flush()


def _fixed_listing(run) -> str:
    from collections import Counter

    from pallas_lsp.output import display_path

    lines = [f"Fixed {run.fixed_count} problem{'s' if run.fixed_count != 1 else ''}:"]
    for entry in run.files.values():
        lines.append(f"- {display_path(entry.path)}:")
        counts = Counter((f.code, f.message) for f in entry.fixed)
        for (code, message), n in sorted(counts.items()):
            lines.append(f"    {n} × {code} ({message})")
    return "\n".join(lines)


# ---------------------------------------------------------------- coverage


def _coverage(args) -> int:
    from pallas_lsp.config import ConfigError
    from pallas_lsp.coverage_report import run

    try:
        text, code = run([Path(p) for p in args.paths], args.output_format, args.verbose,
                         use_config=not args.no_config)
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    print(text, file=sys.stderr if code else sys.stdout)
    return code


# ---------------------------------------------------------------- rule


def _rule(args) -> int:
    from pallas_lsp import catalog
    from pallas_lsp.codes import TOOL_CODES

    pages = dict(catalog.load())
    pages.update(TOOL_CODES)
    if args.all:
        chosen = [pages[c] for c in sorted(pages)]
    elif args.code:
        entry = pages.get(args.code.strip().upper())
        if entry is None:
            _err(f"unknown code {args.code!r}; known: {', '.join(sorted(pages))}")
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
