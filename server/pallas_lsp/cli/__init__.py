"""Command line: `pallas-lsp check`, `coverage`, `rule`, `run`, `serve`, `vmem`.

This module builds the parser and dispatches to the subcommand asked for: one
module each in this package (check.py, coverage.py, rule.py, run.py, serve.py).
Only that one is imported (importing this module imports none of them), and
what it needs loads when it runs.
"""
from __future__ import annotations

import argparse
import sys

from pallas_lsp import __version__

# subcommand -> its line in `pallas-lsp --help`; pallas_lsp.cli.<subcommand> has
# add_arguments(parser) and main(args) -> exit code
COMMANDS = {
    "check": "check files and folders",
    "coverage": "how much of the kernels' code the engine sees",
    "rule": "explain a code (every code check and run can print)",
    "run": "run a kernel's test in TPU interpret mode (or on a TPU)",
    "serve": "run the language server",
    "vmem": "the scoped VMEM each TPU pallas_call needs, against each generation's limit",
}


def main(argv: list[str] | None = None) -> int:
    from pallas_lsp.cli._common import EXIT_CLEAN, EXIT_USAGE

    parser = _parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors already
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if sys.stdout is None and args.command != "serve":  # started with stdout closed
        from pallas_lsp.cli._common import err
        err("standard output is closed: there is nowhere to write the report")
        return EXIT_USAGE
    try:
        return args.func(args)
    except BrokenPipeError:  # nothing more reaches the reader (`| head`)
        from pallas_lsp.cli._common import quiet_stdout
        quiet_stdout()
        return EXIT_CLEAN
    except KeyboardInterrupt:
        return 130


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every subcommand, with its arguments only for the one `argv` names (the
    first word that is not an option, as argparse picks it): the others'
    modules are not imported."""
    words = sys.argv[1:] if argv is None else argv
    chosen = next((w for w in words if not w.startswith("-")), None)
    p = argparse.ArgumentParser(prog="pallas-lsp", description=(
        "Find Ref / semaphore / DMA mistakes in JAX Pallas TPU kernels."))
    p.add_argument("--version", action="version", version=f"pallas-lsp {__version__}")
    sub = p.add_subparsers(dest="command")
    for name, summary in COMMANDS.items():
        parser = sub.add_parser(name, help=summary)
        if name == chosen:
            command = _command(name)
            command.add_arguments(parser)
            parser.set_defaults(func=command.main)
    return p


def _command(name: str):
    """The module of subcommand `name`, imported now."""
    if name == "check":
        from pallas_lsp.cli import check as command
    elif name == "coverage":
        from pallas_lsp.cli import coverage as command
    elif name == "rule":
        from pallas_lsp.cli import rule as command
    elif name == "run":
        from pallas_lsp.cli import run as command
    elif name == "vmem":
        from pallas_lsp.cli import vmem as command
    else:
        from pallas_lsp.cli import serve as command
    return command
