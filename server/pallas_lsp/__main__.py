"""`python -m pallas_lsp`: the same as the `pallas-lsp` command.

`-m` puts the working directory first on `sys.path`; an editor that starts
the server inside a project would then import that project's `json.py` (or
any module it shadows) into the server. Start it as `python -P -m pallas_lsp`
(the VS Code extension does) or as `pallas-lsp`; for the other spellings the
entry is dropped here, before anything else is imported. `pallas_lsp` itself
was found already, which only `-P` or the console script can make safe.
"""
import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from pallas_lsp.cli import main  # noqa: E402

raise SystemExit(main())
