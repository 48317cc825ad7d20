"""How `pallas-lsp check` scales on plain code: a kernel that calls h0, each
h{i} calling h{i+1}, the last one starting a DMA. Prints seconds and peak RSS
per chain length; the cost should grow linearly. Not a test.

    python benchmarks/analysis_cost.py [--sizes 500,1000,2000,4000]
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chain(n: int) -> str:
    lines = ["import jax", "import jax.numpy as jnp", "from jax.experimental import pallas as pl",
             "from jax.experimental.pallas import tpu as pltpu", ""]
    for i in range(n):
        body = f"    return h{i + 1}(x, o, sem)" if i < n - 1 else \
            "    pltpu.make_async_copy(x, o, sem).start()"
        lines += [f"def h{i}(x, o, sem):", body, ""]
    lines += ["def kernel(x_ref, o_ref, sem):", "    h0(x_ref, o_ref, sem)", "",
              "def run(x):",
              "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),",
              "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],",
              "        out_specs=pl.BlockSpec(memory_space=pl.ANY),",
              "        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,1000,2000,4000")
    args = ap.parse_args()
    exe = [sys.executable, "-m", "pallas_lsp", "check", "--no-config", "--exit-zero", "-q"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"chain{n}.py"
            path.write_text(chain(n), encoding="utf-8")
            t = time.perf_counter()
            subprocess.run([*exe, str(path)], check=True, capture_output=True)
            took = time.perf_counter() - t
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(f"{n:6d} helpers ({path.stat().st_size / 1024:.0f} KB): {took:6.2f} s, "
                  f"peak RSS so far {rss:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
