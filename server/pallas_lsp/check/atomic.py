"""Replacing a file whole: the new content goes to a temporary file in the
same folder, which is then renamed over the old one, so that a reader (or a
second pallas-lsp run) sees the old file or the new one, never a part."""
from __future__ import annotations

import os
import tempfile
from typing import Callable


def replace_file(path: str, data: bytes, *, prefix: str, suffix: str,
                 finish: Callable[[int, str], None] | None = None) -> None:
    """Write `data` to `path` through a temporary file; `finish(fd, tmp)`
    runs on the written file before the rename (permissions, owner, fsync).
    On any failure the temporary file is removed, `path` is as it was, and
    the error goes on."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if finish is not None:
                finish(fh.fileno(), tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
