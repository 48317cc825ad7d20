"""What every subcommand of the command line shares: exit codes and the error line."""
from __future__ import annotations

import os
import sys

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERNAL = 3  # `check`: pallas-lsp itself failed (a bug to report), never "findings"


def quiet_stdout() -> None:
    """stdout is gone (a closed pipe, a full disk): point it at /dev/null so
    that Python's own flush at exit does not print a second, longer error."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def err(message: str) -> None:
    try:
        print(f"pallas-lsp: {message}", file=sys.stderr)
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass
