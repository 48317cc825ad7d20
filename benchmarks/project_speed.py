"""Whole-project analysis speed: the workspace index, a helper edit's
re-check of its open dependents through the real server, and one file on
its own. Prints numbers; not a test.

    python benchmarks/project_speed.py [--files 2000] [--edits 20] [--debounce-ms 150]

1. Index: a generated workspace of N modules in packages (each imports a few
   others, like a real library) is indexed the way the server does it in
   the background (`Project.index`, both cores for big trees); also on one
   core, for comparison.
2. Dependents: a helper module and a kernel file that uses it are open in
   the server; each edit of the helper flips whether the kernel's call is a
   bug. Measured: didChange of the helper -> publishDiagnostics of the kernel
   file with the new verdict, minus the debounce.
3. One 1,000-line file: the engine alone (median of repeats).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server"))
sys.path.insert(0, str(HERE))

from pallas_lsp.engine import analyze  # noqa: E402
from pallas_lsp.engine.project import Project  # noqa: E402
from lsp_latency import Client  # noqa: E402

MODULE = '''
"""Generated module {i}."""
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
{imports}


def helper_{i}(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    return c


class Thing{i}:
    def __init__(self, n):
        self.n = n

    def total(self, xs):
        return sum(x * self.n for x in xs)
''' + "\n".join(f"\n\ndef filler_{{i}}_{k}(a, b):\n    return a + b * {k}\n" for k in range(20))

HELPER = '''
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()
'''

MAIN = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from helpers import copy_in


def kernel(x_hbm, o_hbm, sems):
    copy_in(x_hbm, o_hbm, sems.at[0])


def launch(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
'''


def make_workspace(root: Path, n: int) -> None:
    per_pkg = 50
    for i in range(n):
        pkg = root / "lib" / f"pkg{i // per_pkg}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").touch()
        deps = [j for j in (i - 1, i - 7, i - 50) if j >= 0]
        imports = "\n".join(f"from lib.pkg{j // per_pkg}.mod{j} import helper_{j}" for j in deps)
        (pkg / f"mod{i}.py").write_text(MODULE.format(i=i, imports=imports))
    (root / "lib" / "__init__.py").touch()


def bench_index(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_workspace(root, n)
        for label, parallel in (("both cores", True), ("one core", False)):
            project = Project([str(root)])
            if not parallel:
                import pallas_lsp.engine.project as P
                saved, P.PARALLEL_INDEX_FILES = P.PARALLEL_INDEX_FILES, 10 ** 9
            t0 = time.perf_counter()
            count = project.index()
            dt = time.perf_counter() - t0
            if not parallel:
                P.PARALLEL_INDEX_FILES = saved
            edges = sum(len(v) for v in project.imports.values())
            print(f"index, {label}: {count} files, {edges} import edges, {dt:.2f} s")
        t0 = time.perf_counter()
        importers = project.importers(str(root / "lib" / "pkg0" / "mod0.py"), limit=32)
        print(f"importers of one module (32 nearest): {len(importers)} in "
              f"{(time.perf_counter() - t0) * 1000:.1f} ms")


def bench_dependents(edits: int, debounce_ms: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        helper, main = root / "helpers.py", root / "main.py"
        good = textwrap.dedent(HELPER)
        bad = good.replace("make_async_copy(src, dst, sem)", "make_async_copy(src, dst[...], sem)")
        helper.write_text(good)
        main.write_text(MAIN)
        c = Client([sys.executable, "-m", "pallas_lsp", "serve"], env=dict(os.environ))
        caps = {"textDocument": {"publishDiagnostics": {"versionSupport": True}},
                "general": {"positionEncodings": ["utf-16"]}}
        c.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                 "workspaceFolders": [{"uri": root.as_uri(), "name": "w"}],
                                 "capabilities": caps,
                                 "initializationOptions": {"diagnostics": {
                                     "debounceMs": debounce_ms}, "hover": {"jedi": False}}})
        c.notify("initialized", {})
        for path, text in ((helper, good), (main, MAIN)):
            c.notify("textDocument/didOpen", {"textDocument": {
                "uri": path.as_uri(), "languageId": "python", "version": 1, "text": text}})
        time.sleep(2.0)  # first analyses, background parse of the helper
        while not c.notifications.empty():
            c.notifications.get()
        latencies = []
        version = 1
        for k in range(edits):
            version += 1
            text = bad if k % 2 == 0 else good
            want = k % 2 == 0  # the kernel file has PAL101 after a bad edit
            t0 = c.notify("textDocument/didChange", {
                "textDocument": {"uri": helper.as_uri(), "version": version},
                "contentChanges": [{"text": text}]})
            deadline = time.perf_counter() + 10
            while time.perf_counter() < deadline:
                try:
                    t, msg = c.notifications.get(timeout=deadline - time.perf_counter())
                except Exception:
                    break
                p = msg.get("params", {})
                if msg.get("method") == "textDocument/publishDiagnostics" \
                        and p.get("uri") == main.as_uri():
                    has = any(d.get("code") == "PAL101" for d in p.get("diagnostics", []))
                    if has == want:
                        latencies.append((t - t0) * 1000 - debounce_ms)
                        break
        c.close()
    if latencies:
        lat = sorted(latencies)
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        print(f"helper edit -> dependent's diagnostics, beyond the {debounce_ms} ms debounce: "
              f"p50 {statistics.median(lat):.1f} ms, p95 {p95:.1f} ms ({len(lat)}/{edits} edits)")
    else:
        print("helper edit -> dependent's diagnostics: no result")


def bench_one_file() -> None:
    import importlib.util
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.origin:
        return
    path = (Path(spec.origin).parent / "experimental" / "pallas" / "ops" / "tpu"
            / "ragged_paged_attention" / "kernel.py")
    text = path.read_text()
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        analyze(text, str(path))
        times.append((time.perf_counter() - t0) * 1000)
    print(f"one file ({len(text.splitlines())} lines, ragged paged attention): "
          f"median {statistics.median(times):.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--debounce-ms", type=int, default=150)
    args = ap.parse_args()
    bench_one_file()
    bench_index(args.files)
    bench_dependents(args.edits, args.debounce_ms)


if __name__ == "__main__":
    main()
