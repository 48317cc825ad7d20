"""jedi, run in the user's Python environment, for the one thing only it
can do here: follow an import of the user's own modules to the Pallas API it
re-exports (`from mypkg.common import pl`). The API docs themselves come from
api_docs.py; jedi's caches of jax are most of what it costs in memory, so it
starts only when such a name is hovered.

jedi is not thread-safe, so every call runs on one background thread.
Nothing here is on the diagnostics path. Every entry point returns None when
jedi, the interpreter or jax is unavailable, or when jedi is too slow.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
from dataclasses import dataclass

from pallas_lsp.lsp.worker import Worker

log = logging.getLogger(__name__)

PALLAS_MODULES = ("jax._src.pallas", "jax.experimental.pallas")


@dataclass(frozen=True)
class ApiDoc:
    name: str  # e.g. "make_async_copy"
    full_name: str  # e.g. "jax._src.pallas.mosaic.primitives.make_async_copy"
    kind: str  # jedi's type: function, class, instance, module, ...
    signatures: tuple[str, ...]
    docstring: str
    module_path: str | None
    line: int | None  # 1-based

    @property
    def is_pallas(self) -> bool:
        return self.full_name.startswith(PALLAS_MODULES)


def is_pallas_name(full_name: str | None) -> bool:
    return bool(full_name) and full_name.startswith(PALLAS_MODULES)


class JediDocs:
    def __init__(self) -> None:
        self._worker = Worker("pallas-jedi")
        self._interpreter: str | None = None
        self._root: str | None = None
        self._env = None  # jedi Environment, created on the jedi thread
        self._project = None
        self.available: bool | None = None  # None until the first attempt

    # -------------------------------------------------------------- setup

    def configure(self, interpreter: str | None, root: str | None) -> None:
        """Use `interpreter` (None: jedi's default, i.e. the active virtualenv
        or the server's own Python) and the workspace `root`."""
        if interpreter == self._interpreter and root == self._root and self._env is not None:
            return
        self._interpreter, self._root = interpreter, root
        self._worker.submit(self._reset)

    def _reset(self) -> None:
        self._env = None
        self._project = None
        self.available = None

    def _environment(self):
        if self._env is not None:
            return self._env
        import jedi  # noqa: PLC0415 - slow import, only on the jedi thread

        if self._interpreter:
            path = os.path.expanduser(self._interpreter)
            self._env = jedi.create_environment(path, safe=False)
        else:
            self._env = jedi.get_default_environment()
        if self._root:
            self._project = jedi.Project(self._root, environment_path=getattr(self._env, "executable", None))
        return self._env

    def _script(self, source: str, path: str | None):
        import jedi  # noqa: PLC0415

        env = self._environment()
        kwargs = {"environment": env}
        if self._project is not None:
            kwargs["project"] = self._project
        return jedi.Script(source, path=path, **kwargs)

    # -------------------------------------------------------------- work (jedi thread)

    def preparse(self, source: str, path: str | None) -> None:
        """Let jedi parse an opened file in the background, so the first API
        hover in it does not pay for the parse (parso caches it by path)."""
        if self.available is not False and path:
            self._worker.submit(self._preparse, source, path)

    def _preparse(self, source: str, path: str) -> None:
        try:
            self._script(source, path).get_context()
        except Exception:
            pass

    def _lookup(self, source: str, path: str | None, line: int, col: int) -> ApiDoc | None:
        """`line` 0-based, `col` in code points (jedi counts code points too)."""
        try:
            script = self._script(source, path)
            names = script.infer(line + 1, col) or script.help(line + 1, col)
        except Exception as exc:
            log.debug("jedi failed at %s:%s:%s: %s", path, line, col, exc)
            return None
        self.available = True  # jedi works: opened files may be pre-parsed from now on
        gc.freeze()  # its caches live as long as the server: keep them out of GC scans
        for n in names:
            full = n.full_name or ""
            if not full:
                continue
            try:
                sigs = tuple(s.to_string() for s in n.get_signatures())
            except Exception:
                sigs = ()
            try:
                doc = n.docstring(raw=True)
            except Exception:
                doc = ""
            module_path = str(n.module_path) if n.module_path else None
            return ApiDoc(name=n.name, full_name=full, kind=n.type or "", signatures=sigs,
                          docstring=doc or "", module_path=module_path, line=n.line)
        return None

    # -------------------------------------------------------------- async API

    async def lookup(self, source: str, path: str | None, line: int, col: int,
                     timeout_s: float) -> ApiDoc | None:
        if self.available is False or timeout_s <= 0:
            return None
        fut = asyncio.wrap_future(self._worker.submit(self._lookup, source, path, line, col))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except asyncio.TimeoutError:
            log.info("jedi took longer than %.1fs; hover without it", timeout_s)
            return None
