"""`pallas-lsp coverage`: its arguments, and the report of how much of the
kernels' code the engine sees (built by `pallas_lsp.check.coverage_report`)."""
from __future__ import annotations

import sys
from pathlib import Path

from pallas_lsp.cli._common import EXIT_USAGE, err


def add_arguments(v) -> None:
    v.add_argument("paths", nargs="*", default=["."],
                   help="files or folders (default: .), notebooks and named .md / .rst pages "
                   "as for `check`")
    v.add_argument("--output-format", choices=("text", "json"), default="text")
    v.add_argument("--verbose", action="store_true", help="list known sites and bound kernels too")
    v.add_argument("--no-config", action="store_true", help="ignore [tool.pallas-lsp] settings")
    from pallas_lsp.cli import _cache

    _cache.add_arguments(v)


def main(args) -> int:
    from pallas_lsp.check.config import ConfigError
    from pallas_lsp.check.coverage_report import run
    from pallas_lsp.cli import _cache

    try:
        text, code = run([Path(p) for p in args.paths], args.output_format, args.verbose,
                         use_config=not args.no_config,
                         cache_dir=_cache.folder(args, not args.no_config))
    except ConfigError as exc:
        err(str(exc))
        return EXIT_USAGE
    print(text, file=sys.stderr if code else sys.stdout)
    return code
