"""Time parse + analysis per file over jax's own Pallas TPU kernels.

    python benchmarks/engine_speed.py [--repeat 5] [PATH ...]

Prints one row per file (lines, median and fastest ms) and the totals. Not a
test: the numbers depend on the machine; the closing notes record what we
measured. On a shared host the median of a few runs still carries other
processes' interference (runs of the same code differ by up to 20 %); the
fastest run is the better estimate of what the code costs (as `timeit` advises),
so the summary gives both.

Each time includes collecting the garbage the analysis leaves (`gc.collect()`
after it; what existed before the first timing is frozen out of collections): an
analysis that leaves reference cycles behind makes the collector pay later,
somewhere else. Automatic collections are off while timing, as in the language
server (it collects when the editor is quiet): otherwise the timing would
include the young-generation scan the interpreter starts, when the analysis
returns, over the hover data the result keeps (2 ms of flash attention's 40).
The machine's speed varies (shared hosts); the calibration line times a fixed
pure-Python loop, to compare runs made at different times.
"""
from __future__ import annotations

import argparse
import ast
import gc
import importlib.util
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from pallas_lsp.engine import analyze


def default_paths() -> list[Path]:
    spec = importlib.util.find_spec("jax")
    if spec is None or spec.origin is None:
        sys.exit("jax is not installed; pass paths explicitly")
    return sorted((Path(spec.origin).parent / "experimental/pallas/ops/tpu").rglob("*.py"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    files = args.paths or default_paths()
    texts = [(p, p.read_text(encoding="utf-8")) for p in files]
    analyze(texts[0][1], str(texts[0][0]))  # imports done
    gc.collect()
    gc.freeze()  # what is here now is not the analyses' garbage: collections skip it
    gc.disable()  # as the server runs (see the docstring)
    rows = []
    for path, text in texts:
        times, parses = [], []
        for _ in range(args.repeat):
            gc.collect()
            t = time.perf_counter()
            analyze(text, str(path))
            gc.collect()  # what it left behind
            times.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            ast.parse(text)  # the floor under every analysis
            parses.append((time.perf_counter() - t) * 1000)
        rows.append((path, text.count("\n") + 1, statistics.median(times),
                     statistics.median(parses), min(times)))
    t = time.perf_counter()
    for path, text in texts:
        analyze(text, str(path))
    whole = time.perf_counter() - t
    tracemalloc.start()
    for path, text in texts:
        analyze(text, str(path))
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()

    width = max(len(p.name) for p, *_ in rows) + 28
    print(f"{'file':<{width}} {'lines':>6} {'median ms':>10} {'fastest':>8} {'parse ms':>9}")
    for path, lines, ms, parse_ms, best in rows:
        name = "/".join(path.parts[-2:])
        print(f"{name:<{width}} {lines:>6} {ms:>10.1f} {best:>8.1f} {parse_ms:>9.1f}")
    print(f"\nfiles: {len(rows)}  lines: {sum(r[1] for r in rows)}")
    print(f"median per file: {statistics.median(r[2] for r in rows):.1f} ms")
    for label, col in (("median run", 2), ("fastest run", 4)):
        big = [r[col] for r in rows if r[1] >= 500]
        per_k = [r[col] * 1000 / r[1] for r in rows if r[1] >= 500]
        nan = float("nan")
        print(f"files >= 500 lines, {label} of each: median {statistics.median(big) if big else nan:.1f}"
              f" ms ({statistics.median(per_k) if per_k else nan:.1f} ms per 1,000 lines)")
    print(f"whole folder, one pass: {whole * 1000:.0f} ms; peak traced memory: {peak:.1f} MiB")
    print(f"calibration: a 3,000,000-step Python loop takes {calibrate():.0f} ms here now")


def calibrate() -> float:
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        x = 0
        for i in range(3_000_000):
            x += i
        best = min(best, (time.perf_counter() - t) * 1000)
    return best


if __name__ == "__main__":
    main()
