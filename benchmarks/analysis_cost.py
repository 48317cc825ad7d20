"""What plain but unusual code costs the engine: chains of helpers (a kernel
calls h0, each h{i} calls h{i+1}, the last starts a DMA), a kernel calling
thousands of distinct helpers, recursion, a call tree past the work budget,
and files of megabytes of constant data. For each: seconds and peak RSS of
`pallas-lsp check` and of the engine alone (`analyze`), each in a fresh
process. The chain's cost should grow linearly. Not a test.

    python benchmarks/analysis_cost.py [--cases chain,fanout,recursion,tree,literal]
                                       [--sizes 500,1000,2000,4000,10000]
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = ["import jax", "import jax.numpy as jnp", "from jax.experimental import pallas as pl",
          "from jax.experimental.pallas import tpu as pltpu", ""]
LAUNCH = ["def run(x):",
          "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),",
          "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],",
          "        out_specs=pl.BlockSpec(memory_space=pl.ANY),",
          "        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)", ""]
COPY = "    pltpu.make_async_copy(x, o, sem).start()"


def chain(n: int) -> str:
    lines = list(HEADER)
    for i in range(n):
        body = f"    return h{i + 1}(x, o, sem)" if i < n - 1 else COPY
        lines += [f"def h{i}(x, o, sem):", body, ""]
    lines += ["def kernel(x_ref, o_ref, sem):", "    h0(x_ref, o_ref, sem)", ""] + LAUNCH
    return "\n".join(lines)


def fan_out(n: int) -> str:
    lines = list(HEADER)
    for i in range(n):
        lines += [f"def h{i}(x, o, sem):", COPY, ""]
    lines += ["def kernel(x_ref, o_ref, sem):"] + [f"    h{i}(x_ref, o_ref, sem)" for i in range(n)]
    return "\n".join(lines + [""] + LAUNCH)


def recursion(_: int) -> str:
    return "\n".join(HEADER + [
        "def copy_n(x, o, sem, n):", "    if n == 0:", "        return", COPY,
        "    copy_n(x, o, sem, n - 1)", "",
        "def ping(x, o, sem, n):", COPY, "    if n:", "        pong(x, o, sem, n)", "",
        "def pong(x, o, sem, n):", "    ping(x, o, sem, n - 1)", "",
        "def kernel(x_ref, o_ref, sem):", "    copy_n(x_ref, o_ref, sem, 100_000)",
        "    ping(x_ref, o_ref, sem, 100_000)", ""] + LAUNCH)


def tree(_: int) -> str:
    """A binary tree of calls, each with its own arguments: 2**17 activations."""
    return "\n".join(HEADER + [
        "def tree(x, o, sem, n, depth):", "    if depth == 0:", COPY.replace("    ", "        ", 1),
        "        return", "    tree(x, o, sem, 2 * n, depth - 1)",
        "    tree(x, o, sem, 2 * n + 1, depth - 1)", "",
        "def kernel(x_ref, o_ref, sem):", "    tree(x_ref, o_ref, sem, 1, 17)", ""] + LAUNCH)


def literal(kind: str) -> str:
    """About 4.8 MB of constants (under the 5 MB cap) and a kernel after them."""
    rng = random.Random(0)
    if kind == "flat":
        data = "DATA = [" + ", ".join(str(rng.randint(0, 9999)) for _ in range(800_000)) + "]"
    elif kind == "rows":
        data = "DATA = [\n" + ",\n".join("    [" + ", ".join(str(rng.randint(0, 999))
                                                           for _ in range(16)) + "]"
                                         for _ in range(57_000)) + "]"
    else:
        data = "TABLE = {\n" + ",\n".join(
            f"    'k{i}': ({rng.randint(0, 999)}, {rng.randint(0, 999)}, 'v{i}')"
            for i in range(132_000)) + "}"
    return "\n".join(HEADER + [data, "", "def kernel(x_ref, o_ref, sem):",
                               "    pltpu.make_async_copy(x_ref[...], o_ref, sem).start()", ""]
                     + LAUNCH)


CASES = {
    "chain": [(f"chain {n}", lambda n=n: chain(n)) for n in (500, 1000, 2000, 4000, 10_000)],
    "fanout": [("fan-out 2000", lambda: fan_out(2000))],
    "recursion": [("recursion", lambda: recursion(0))],
    "tree": [("call tree 2^17", lambda: tree(0))],
    "literal": [(f"literal {k}", lambda k=k: literal(k)) for k in ("flat", "rows", "dict")],
}


def child(mode: str, path: str) -> None:
    """Run in a fresh process: the CLI or the engine on `path`; print seconds,
    peak RSS (MiB) and the findings' codes as JSON."""
    t = time.perf_counter()
    codes: list[str] = []
    if mode == "cli":
        sys.argv = ["pallas-lsp", "check", "--no-config", "--no-cache", "--exit-zero", "-q", path]
        try:
            runpy.run_module("pallas_lsp", run_name="__main__")
        except SystemExit:
            pass
    else:
        from pallas_lsp.engine import analyze
        analysis = analyze(Path(path).read_text(encoding="utf-8"), path, findings_only=True)
        codes = sorted({f.code for f in analysis.findings})
    took = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"s": took, "rss": rss, "codes": codes}), file=sys.__stderr__)


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--sizes", default="", help="chain lengths (default 500..10000)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    cases = {name: CASES[name] for name in args.cases.split(",")}
    if args.sizes and "chain" in cases:
        cases["chain"] = [(f"chain {n}", lambda n=n: chain(n))
                          for n in (int(s) for s in args.sizes.split(","))]
    print(f"{'case':18s} {'KB':>6s} {'check s':>8s} {'MiB':>6s} {'engine s':>9s} {'MiB':>6s}  codes")
    with tempfile.TemporaryDirectory() as tmp:
        for runs in cases.values():
            for label, make in runs:
                path = Path(tmp) / (label.replace(" ", "_").replace("^", "") + ".py")
                path.write_text(make(), encoding="utf-8")
                cli, eng = measure("cli", path), measure("engine", path)
                print(f"{label:18s} {path.stat().st_size / 1024:6.0f} {cli['s']:8.2f} "
                      f"{cli['rss']:6.0f} {eng['s']:9.2f} {eng['rss']:6.0f}  "
                      f"{','.join(eng['codes'])}", flush=True)


if __name__ == "__main__":
    main()
