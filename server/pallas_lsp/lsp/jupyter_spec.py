"""pallas-lsp for jupyterlab-lsp: the server spec jupyter-lsp discovers.

jupyter-lsp (the Jupyter server extension behind jupyterlab-lsp) loads the
`jupyter_lsp_spec_v1` entry points of the environment it runs in and calls
each with its manager; this one answers how to start pallas-lsp. It runs in
the Jupyter server's process, so `sys.executable` is the Python that has this
package installed: the server starts with that Python and nothing else, with
safe-path on (`-P`), so the notebook's folder (the server's working
directory) is never on its import path.

jupyterlab-lsp sends a notebook as one text document of its Python cells
under the notebook's own name (no LSP notebook sync); lsp/notebooks.py tells
that text from a notebook's JSON.
"""
from __future__ import annotations

import sys

NAME = "pallas-lsp"
SPEC_VERSION = 2  # jupyter-lsp's schema: "current-version"


def argv() -> list[str]:
    return [sys.executable, "-P", "-m", "pallas_lsp", "serve"]


def spec(manager=None) -> dict:
    """{name: spec}, as jupyter-lsp's spec finders return; empty when this
    Python cannot name its own executable (an embedded interpreter)."""
    if not sys.executable:
        return {}
    return {NAME: {
        "version": SPEC_VERSION,
        "argv": argv(),
        "languages": ["python"],
        "mime_types": ["text/python", "text/x-ipython"],
        "display_name": NAME,
        # analyses the text it is sent: no copies of unsaved cells on disk
        "requires_documents_on_disk": False,
        "install": {"pip": "pip install pallas-lsp"},
    }}
