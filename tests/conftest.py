"""Shared by every test: servers started by tests (directly or by an editor
with its own HOME) read the Pallas API docs from one cache, so jax's API is
extracted once per machine, not once per server."""
from __future__ import annotations

import os

if not os.environ.get("PALLAS_LSP_CACHE_DIR"):
    _base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ["PALLAS_LSP_CACHE_DIR"] = os.path.join(_base, "pallas-lsp")
