"""Child side of `pallas-lsp run --compile`: while the user's code runs (in
interpret mode, as usual), every `pallas_call` that is bound is also compiled
ahead of time for each requested TPU generation, on its own, with the avals
it was bound with. No TPU is needed: `jax[tpu]` brings libtpu, and
`jax.experimental.topologies` gives devices to compile for.

Standard library only at import time (this file is shipped to remote
machines with the rest of `pallas_lsp/runs/*.py`); jax is imported by
`install()`.

Environment:
  PALLAS_LSP_COMPILE   comma-separated generations (`v5e,v6e`) or topology
                       names (`v5e:2x2`)

Each compile is a record in `_report.REPORT["compiles"]`; the parent
(`compile_mapping.py`) turns failures into diagnostics and successes into
summary lines.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
import time

from pallas_lsp.runs import _dispatch, _report

# generation -> a deviceless topology name that libtpu 0.0.42 accepts (measured)
TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
MAX_CALLS = 200  # distinct pallas_calls compiled per process (a runaway parametrize guard)

_guard = threading.local()
_lock = threading.RLock()
_seen: set = set()
_topologies: dict = {}
_orig_bind = None
_USED = re.compile(r'"used_scoped_memory_configs":\[\{"memory_space":"1","offset":"\d+","size":"(\d+)"')
_LIMIT = re.compile(r'"scoped_memory_configs":\[\{"memory_space":"1","offset":"\d+","size":"(\d+)"')
_UNIMPLEMENTED = re.compile(r"Unimplemented primitive in Pallas TPU lowering for \w+: (\S+?)\.")


def generations() -> list[str]:
    text = os.environ.get("PALLAS_LSP_COMPILE") or ""
    return [g.strip() for g in text.split(",") if g.strip()]


def topology_name(gen: str) -> str:
    return gen if ":" in gen else TOPOLOGIES.get(gen, gen)


def install() -> None:
    """Hook `pallas_call_p.bind` (idempotent). Errors are reported, not raised:
    the interpret run goes on either way."""
    global _orig_bind
    gens = generations()
    if not gens or _orig_bind is not None:
        return
    _report.REPORT["compile"] = {"generations": gens, "error": None}
    _report.REPORT.setdefault("compiles", [])
    if os.environ.get("PALLAS_LSP_INTERPRET") == "1":
        # Deviceless: keep libtpu from looking for TPU workers (a screenful of warnings).
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
        # and let it load beside other libtpu users (another compile run, a test
        # suite): without this it takes /tmp/libtpu_lockfile and every other
        # process fails. Safe here: no chip is opened, only compilers. Not on a
        # real TPU run, where the lock keeps two processes off one chip.
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    _report.REPORT["compile"]["libtpu"] = importlib.util.find_spec("libtpu") is not None
    if os.environ.get("PALLAS_LSP_COMPILE_AUTO") == "1" and not _report.REPORT["compile"]["libtpu"]:
        _report.REPORT["compile"]["skipped"] = "libtpu is not installed in this Python"
        return
    try:
        from jax._src.pallas import pallas_call as pc
    except Exception as e:  # noqa: BLE001
        _report.REPORT["compile"]["error"] = f"jax is not importable: {e}"
        return
    prim = pc.pallas_call_p
    _orig_bind = prim.bind

    def bind(*args, **params):
        if not getattr(_guard, "busy", False):
            _guard.busy = True
            try:
                _compile_all(args, params, sys._getframe(1))
            except Exception as e:  # noqa: BLE001 - never break the user's run
                with _lock:
                    if not _report.REPORT["compile"]["error"]:
                        _report.REPORT["compile"]["error"] = f"internal error: {e!r}"
            finally:
                _guard.busy = False
        return _orig_bind(*args, **params)

    prim.bind = bind


def _topology(gen: str):
    if gen not in _topologies:
        from jax.experimental import topologies
        try:
            _topologies[gen] = topologies.get_topology_desc(platform="tpu",
                                                            topology_name=topology_name(gen))
        except Exception as e:  # noqa: BLE001
            _topologies[gen] = e
    return _topologies[gen]


def _key(avals, params) -> str:
    parts = [str(a) for a in avals]
    for k in sorted(params):
        if k == "interpret":
            continue
        try:
            parts.append(f"{k}={params[k]}")
        except Exception:  # noqa: BLE001
            parts.append(f"{k}=<{id(params[k])}>")
    return "\n".join(parts)


def _compile_all(args, params, frame) -> None:
    import jax
    from jax._src import core as jax_core

    avals = [jax_core.typeof(a) for a in args]
    key = _key(avals, params)
    with _lock:
        if key in _seen or len(_seen) >= MAX_CALLS:
            return
        _seen.add(key)
    kernel = _dispatch.kernel_src(params)
    site = _report.stack_frames(frame)
    cur = _report.REPORT.get("current") or {}
    lo_params = dict(params, interpret=False)
    num_prefetch = getattr(params.get("grid_mapping"), "num_index_operands", 0) or 0

    def call(*xs):
        return _orig_bind(*xs, **lo_params)

    for gen in generations():
        rec = {"gen": gen, "kernel": kernel, "site": site, "nodeid": cur.get("nodeid"),
               "avals": [str(a) for a in avals], "num_prefetch": num_prefetch,
               "out_avals": [str(a) for a in params.get("out_avals", ())],
               "ok": False, "seconds": None, "vmem_used": None, "vmem_limit": None,
               "device_kind": None, "error": None}
        topo = _topology(gen)
        if isinstance(topo, Exception):
            rec["setup_error"] = f"{gen}: {_report.type_name(topo)}: {topo}"
            _record(rec)
            continue
        dev = topo.devices[0]
        rec["device_kind"] = getattr(dev, "device_kind", None)
        sharding = jax.sharding.SingleDeviceSharding(dev)
        # Layouts left to the compiler: a call on a v5e chip with real arrays reported the
        # same figures as this (benchmarks/vmem_vs_compiler.py --gen chip), pinned
        # row-major layouts did not.
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding,
                                        weak_type=getattr(a, "weak_type", False)) for a in avals]
        # Said before compiling: if libtpu aborts the process, the report names the call.
        with _lock:
            _report.REPORT["compiling"] = {k: rec[k] for k in ("gen", "kernel", "site", "nodeid")}
        _report.write_report()
        t0 = time.monotonic()
        try:
            # Some lowering paths ask the default device for its kind: make it the TPU's.
            with jax.default_device(dev):
                compiled = jax.jit(call).lower(*structs).compile()
        except Exception as e:  # noqa: BLE001 - this is what we are after
            rec["seconds"] = time.monotonic() - t0
            rec["error"] = _report.describe_exception(e)
            m = _UNIMPLEMENTED.search(str(e))
            if m:
                rec["eqn_frames"] = _eqn_frames(params.get("jaxpr"), m.group(1))
            _record(rec)
            continue
        rec["seconds"] = time.monotonic() - t0
        rec["ok"] = True
        try:
            text = compiled.as_text() or ""
        except Exception:  # noqa: BLE001
            text = ""
        rec["vmem_used"], rec["vmem_limit"] = kernel_vmem(text)
        _record(rec)


def kernel_vmem(text: str) -> tuple[int | None, int | None]:
    """Scoped VMEM (used, limit) of the kernel in a compiled executable's text:
    from its own `tpu_custom_call` line, not the copies XLA puts around it,
    which report figures of their own (measured: larger than the kernel's)."""
    lines = [ln for ln in text.splitlines() if 'custom_call_target="tpu_custom_call"' in ln]
    used = [int(x) for ln in lines for x in _USED.findall(ln)]
    limit = [int(x) for ln in lines for x in _LIMIT.findall(ln)]
    return (max(used) if used else None), (max(limit) if limit else None)


def _contains(eqn, name: str) -> bool:
    if eqn.primitive.name == name:
        return True
    for v in eqn.params.values():
        for sub in (v if isinstance(v, (list, tuple)) else [v]):
            inner = getattr(sub, "jaxpr", sub)
            if hasattr(inner, "eqns") and any(_contains(e, name) for e in inner.eqns):
                return True
    return False


def _eqn_frames(jaxpr, name: str) -> list:
    """Frames of the kernel-level equation that binds primitive `name` (itself,
    or a `jit` around it, as `jnp.sort` is): the inner equation's traceback
    stops at jax's own function."""
    for eqn in getattr(jaxpr, "eqns", ()):
        if _contains(eqn, name):
            return _report.source_info_frames(eqn.source_info)
    return []


def _record(rec: dict) -> None:
    with _lock:
        _report.REPORT["compiling"] = None
        _report.REPORT.setdefault("compiles", []).append(rec)
    status = "ok" if rec["ok"] else "FAILED"
    name = (rec.get("kernel") or {}).get("name") or "pallas_call"
    secs = f" in {rec['seconds']:.2f} s" if rec.get("seconds") is not None else ""
    try:
        print(f"pallas-lsp: compiled {name} for TPU {rec['gen']}: {status}{secs}",
              file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    _report.write_report()
