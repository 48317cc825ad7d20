"""Start a Python of the user's without letting the workspace in.

The server starts interpreters on its own (the API-docs probe and extractor,
the catalog's raise-site finder). None of them may import a file of the
workspace: a repository's `json.py`, `sitecustomize.py` or `pallas_lsp.py`
would otherwise run with the user's rights as soon as a folder is opened.

Python puts one directory first on `sys.path` by itself: the working
directory for `-c` and `-m`, the script's folder for `python script.py`.
So every such child gets

* a working directory of its own: an empty folder private to this process
  (not the workspace, not a shared /tmp another user could write to);
* `PYTHONSAFEPATH=1`, which drops that first entry on Python 3.11+ (older
  interpreters ignore it; the empty working directory covers `-c` there).

Not `-I`: it also drops PYTHONPATH and the user's site-packages, where a
`pip install --user jax` lives, and the probe would then say "jax is not
installed". What the user's own environment puts on the path is the user's
decision; what the opened folder holds is not.

Runs, which execute the user's code on an explicit command, do not come here.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

_lock = threading.Lock()
_dir: str | None = None


def neutral_cwd() -> str:
    """An empty folder, private to this process (mode 0700), removed at exit."""
    global _dir
    with _lock:
        if _dir is None or not os.path.isdir(_dir):
            _dir = tempfile.mkdtemp(prefix="pallas-lsp-cwd-")
            atexit.register(shutil.rmtree, _dir, True)
        return _dir


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a probe: `base` (default: ours) with safe-path on."""
    env = dict(os.environ if base is None else base)
    env["PYTHONSAFEPATH"] = "1"
    return env


def isolated(python: str, *args: str) -> dict:
    """`subprocess.run` keywords, and the argv, for running `python` safely:
    ``subprocess.run(**isolated(exe, "-c", code), capture_output=True)``."""
    return {"args": [python, *args], "cwd": neutral_cwd(), "env": child_env()}
