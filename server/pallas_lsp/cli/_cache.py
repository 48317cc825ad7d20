"""The result cache's options, shared by `check` and `coverage`."""
from __future__ import annotations

import os
from pathlib import Path


def add_arguments(parser) -> None:
    group = parser.add_argument_group("cache (results of unchanged files are reused)")
    group.add_argument("--no-cache", action="store_true",
                       help="analyse every file; read and write no cache")
    group.add_argument("--cache-dir", metavar="DIR", default=None,
                       help="the cache folder (default: $PALLAS_LSP_CACHE_DIR, else `cache-dir` "
                       "of the configuration, else .pallas_lsp_cache in the project root)")


def folder(args, use_config: bool) -> Path | None:
    """Where the cache is, or None (`--no-cache`)."""
    if args.no_cache:
        return None
    from pallas_lsp.check.cache import ENV, folder_for

    configured = None
    if use_config and not args.cache_dir and not os.environ.get(ENV, "").strip():
        from pallas_lsp.check.config import load_project_config

        cfg = load_project_config(Path.cwd(), strict=True)
        if cfg.cache_dir is not None and cfg.root is not None:
            configured = cfg.root / os.path.expanduser(cfg.cache_dir)
    return folder_for(args.cache_dir, configured)
