"""Child side of `pallas-lsp run`: which `pallas_call` the process bound last
(and which ones the current test bound), written to the report *before* JAX
goes on, so that a run killed while a kernel hangs (on a chip, where nothing
in Python knows which kernel runs) still names it. The parent turns the
record into the kernel's wait lines (`static_context.py`).

`pallas_call_p.bind` is hooked: every launcher (`pl.pallas_call`, `pl.kernel`,
`core_map`) binds it when its caller is traced, i.e. right before the first
run of that kernel. When jax is not imported yet, a finder on `sys.meta_path`
hooks it as soon as Pallas is imported. Standard library only; imports only
its child-side siblings.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import re
import sys
import time

from pallas_lsp.runs import _report

_MODULE = "jax._src.pallas.pallas_call"
_SRC = re.compile(r"^(?P<name>\S+) at (?P<file>.+):(?P<line>\d+)$")
MAX_PER_TEST = 16  # kernels kept per test (the failure shows their static findings)

_installed = False


def kernel_src(params) -> dict:
    """The kernel function of a pallas_call's bind: name, file, def line."""
    info = getattr(params.get("jaxpr"), "debug_info", None)
    src = getattr(info, "func_src_info", None) or ""
    m = _SRC.match(src)
    out = {"name": params.get("name") or (m.group("name") if m else src.split(" ")[0] or None),
           "file": None, "line": None}
    if m:
        out["file"], out["line"] = _report.where(m.group("file"), int(m.group("line")))
    return out


def record(params, frame) -> None:
    try:
        kernel = kernel_src(params)
        site = _report.stack_frames(frame)
    except Exception:  # noqa: BLE001 - never break the user's run
        return
    with _report.lock:
        cur = _report.REPORT.get("current") or {}
        rec = {"kernel": kernel, "site": site, "nodeid": cur.get("nodeid"), "time": time.time()}
        _report.REPORT["dispatched"] = rec
        mine = _report.kernels_this_test
        if kernel not in mine and len(mine) < MAX_PER_TEST:
            mine.append(kernel)
    _report.write_report()


def _hook(module) -> None:
    prim = getattr(module, "pallas_call_p", None)
    if prim is None or getattr(prim.bind, "_pallas_lsp_dispatch", False):
        return
    orig = prim.bind

    def bind(*args, **params):
        record(params, sys._getframe(1))
        return orig(*args, **params)

    bind._pallas_lsp_dispatch = True
    prim.bind = bind


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands Pallas's module to the real loader, then
    hooks it once it has run."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            try:
                _hook(module)
            except Exception:  # noqa: BLE001
                pass

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Hook now if Pallas is imported already, else when it is (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    module = sys.modules.get(_MODULE)
    if module is not None:
        _hook(module)
    else:
        sys.meta_path.insert(0, _AfterImport())
