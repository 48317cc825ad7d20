"""What every subcommand of the command line shares: exit codes and the error line."""
from __future__ import annotations

import sys

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERNAL = 3  # `check`: pallas-lsp itself failed (a bug to report), never "findings"


def err(message: str) -> None:
    try:
        print(f"pallas-lsp: {message}", file=sys.stderr)
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass
