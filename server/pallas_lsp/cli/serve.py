"""`pallas-lsp serve`: run the language server (stdio or TCP)."""
from __future__ import annotations

from pallas_lsp.cli._common import EXIT_CLEAN


def add_arguments(s) -> None:
    s.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    s.add_argument("--tcp", metavar="HOST:PORT", default=None)
    s.add_argument("--log-file", default=None)


def main(args) -> int:
    from pallas_lsp.lsp.server import run

    run(tcp=args.tcp, log_file=args.log_file)
    return EXIT_CLEAN
