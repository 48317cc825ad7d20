"""`pallas-lsp rule`: explain a code (every code check and run can print), from
the catalog and the tool's own pages."""
from __future__ import annotations

import json
import sys

from pallas_lsp.cli._common import EXIT_CLEAN, EXIT_USAGE, err


def add_arguments(r) -> None:
    r.add_argument("code", nargs="?", help="e.g. PAL103, E999, PAL901")
    r.add_argument("--all", action="store_true", help="every code")
    r.add_argument("--output-format", choices=("text", "json"), default="text")


def main(args) -> int:
    from pallas_lsp import catalog
    from pallas_lsp.check.codes import TOOL_CODES

    pages = dict(catalog.load())
    pages.update(TOOL_CODES)
    if args.all:
        chosen = [pages[c] for c in sorted(pages)]
    elif args.code:
        entry = pages.get(args.code.strip().upper())
        if entry is None:
            err(f"unknown code {args.code!r}; known: {', '.join(sorted(pages))}")
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
