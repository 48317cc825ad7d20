"""`pallas-lsp serve`: run the language server (stdio or TCP)."""
from __future__ import annotations

from pallas_lsp.cli._common import EXIT_CLEAN


def add_arguments(s) -> None:
    s.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    s.add_argument("--tcp", metavar="HOST:PORT", default=None)
    s.add_argument("--log-file", default=None)


def main(args) -> int:
    import sys

    # The server speaks stdio or plain TCP, never TLS. asyncio imports ssl when
    # it can (OpenSSL loaded: 5 MiB of the server's memory for nothing); marked
    # absent here, before anything imports asyncio, it does without, as it is
    # written to.
    if "ssl" not in sys.modules:
        sys.modules["ssl"] = None  # type: ignore[assignment]
    from pallas_lsp.lsp.server import run

    run(tcp=args.tcp, log_file=args.log_file)
    return EXIT_CLEAN
