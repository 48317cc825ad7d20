"""`pallas-lsp check`: its arguments, and files on disk -> the report (stdout, a
file, or with --fix / --diff the fixed source and diffs), with its exit code."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pallas_lsp.cli._common import (EXIT_CLEAN, EXIT_FINDINGS, EXIT_INTERNAL, EXIT_USAGE, err,
                                    quiet_stdout)
from pallas_lsp.cli.output import FORMATS


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.description = ("Check files and folders as one project. Exit codes: 0 "
                     "clean, 1 problems found (or, with --diff, files would change), 2 usage "
                     "or configuration error, 3 pallas-lsp itself failed.")
    c.add_argument("paths", nargs="*", default=["."],
                   help="files or folders (default: .); a folder gives its .py, .pyi and "
                   ".ipynb files (`include`); .md / .rst pages are read when named; `-` reads "
                   "the source from stdin")
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
    from pallas_lsp.cli import _cache

    _cache.add_arguments(c)
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


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def main(args) -> int:
    from pallas_lsp.check.codes import SelectorError, normalise_selector
    from pallas_lsp.check.config import ConfigError

    try:
        select = [normalise_selector(s, "--select") for s in args.select] \
            if args.select is not None else None
        extend = [normalise_selector(s, "--extend-select") for s in args.extend_select or ()]
        ignore = [normalise_selector(s, "--ignore") for s in args.ignore or ()]
    except SelectorError as exc:
        err(str(exc))
        return EXIT_USAGE
    if args.fix_only:
        args.fix = True
    stdin = "-" in args.paths
    if stdin and len(args.paths) > 1:
        err("`-` (stdin) cannot be combined with other paths")
        return EXIT_USAGE
    if args.stdin_filename and not stdin:
        if args.paths != ["."]:
            err("--stdin-filename names the source read from stdin: give `-`, not paths")
            return EXIT_USAGE
        args.paths = ["-"]  # as in ruff: the name alone means stdin
        stdin = True
    try:
        return _check_run(args, select, extend, ignore, stdin)
    except ConfigError as exc:
        err(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:  # `| head`: the reader is gone, not a failure of ours
        raise
    except Exception as exc:  # MemoryError, RecursionError and bugs alike
        import traceback

        traceback.print_exc()
        err(f"internal error ({type(exc).__name__}: {exc}); please report it")
        return EXIT_INTERNAL


def _check_run(args, select, extend, ignore, stdin: bool) -> int:
    from pallas_lsp.check import checker, fixes
    from pallas_lsp.cli import _cache
    from pallas_lsp.cli.output import TEXT_FORMATS, render, rows_for
    from pallas_lsp.cli.output.text import Style, statistics, summary

    options = checker.Options(select=select, extend_select=extend or None, ignore=ignore,
                              use_config=not args.no_config, force_exclude=args.force_exclude,
                              respect_gitignore=args.respect_gitignore,
                              cache_dir=_cache.folder(args, not args.no_config))
    if stdin:
        path = Path(args.stdin_filename) if args.stdin_filename else Path("-")
        data = sys.stdin.buffer.read()
        text, problem = checker.decode(path, data)
        if problem is not None:
            err(f"{path}: {problem.message}")
            return EXIT_USAGE
        options.sources[os.path.realpath(path)] = text
        paths = [path]
    else:
        paths = [Path(p) for p in args.paths]

    fmt = _output_format(args, paths, options)
    fixing = args.fix or args.diff
    run = None
    write_failures: list[str] = []
    if fixing:
        run = fixes.run(paths, options, unsafe=args.unsafe_fixes)
        checked, problems = run.checked, run.problems
        if args.fix and not args.diff and not stdin:
            write_failures = fixes.write_all(run, options)
            for line in write_failures:
                err(line)
            if write_failures:  # report what is on disk now, not what the fixes would give
                checked, problems = checker.check_project(paths, options=options)
    else:
        checked, problems = checker.check_project(paths, options=options)

    if not args.silent:
        for warning in options.warnings:
            err(warning)
    missing = [p for p in problems if p.kind == "missing"]
    if missing and len(missing) == len(paths):
        for p in missing:
            err(f"{p.path}: {p.message}")
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
            err(why)

    rows = rows_for(checked, problems, unsafe=args.unsafe_fixes)
    internal = any(p.kind == "internal" for p in problems)
    fixed = run.fixed_count if run is not None else 0

    # Where the report goes: stdout, a file, or (when stdout carries the
    # fixed source or a diff) stderr.
    report = sys.stdout
    if stdin and args.fix and not args.diff:
        report = sys.stderr
    try:
        handle = open(args.output_file, "w", encoding="utf-8") if args.output_file else None
    except OSError as exc:
        err(f"cannot write the report to {args.output_file}: {exc.strerror or exc}")
        return EXIT_USAGE
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
            # (files were written above, before the report was made)
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
        if handle is not None:
            handle.close()  # a full disk shows here, as an OSError
    except BrokenPipeError:
        raise  # the reader left (`| head`): main() ends quietly, as Unix tools do
    except OSError as exc:  # stdout unusable, a full disk
        err(f"cannot write the report: {exc.strerror or exc}")
        quiet_stdout()
        return EXIT_USAGE
    finally:
        if handle is not None and not handle.closed:
            try:
                handle.close()
            except OSError:
                pass
    if write_failures:
        return EXIT_USAGE  # said above, one line per file; the other files were fixed
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
        from pallas_lsp.check.checker import Configs

        first = paths[0] if paths else Path(".")
        folder = first if os.path.isdir(first) else first.absolute().parent
        fmt = Configs(options).for_dir(os.path.abspath(folder)).output_format
    if fmt is None:
        fmt = "full" if sys.stdout.isatty() else "concise"
    if fmt == "text":
        fmt = "concise"
    if fmt not in FORMATS:
        from pallas_lsp.check.config import ConfigError

        raise ConfigError(f"PALLAS_LSP_OUTPUT_FORMAT={fmt!r}: not one of {', '.join(FORMATS)}")
    return fmt


def _print_diffs(run, stdin: bool, paths) -> None:
    from pallas_lsp.check import fixes
    from pallas_lsp.cli.output import display_path

    for entry in run.files.values():
        label = str(paths[0]) if stdin else display_path(entry.path)
        sys.stdout.write(fixes.unified_diff(entry, label))
    sys.stdout.flush()


def _fixed_listing(run) -> str:
    from collections import Counter

    from pallas_lsp.cli.output import display_path

    lines = [f"Fixed {run.fixed_count} problem{'s' if run.fixed_count != 1 else ''}:"]
    for entry in run.files.values():
        lines.append(f"- {display_path(entry.path)}:")
        counts = Counter((f.code, f.message) for f in entry.fixed)
        for (code, message), n in sorted(counts.items()):
            lines.append(f"    {n} × {code} ({message})")
    return "\n".join(lines)
