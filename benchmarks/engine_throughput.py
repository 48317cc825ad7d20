"""Analyses per second over jax's big Pallas TPU kernel files, garbage
collection included. Prints ms per pass over the files; not a test.

    python benchmarks/engine_throughput.py [--rounds 6] [--cli]

Each analysis stays alive until the next one replaces it, as in the server;
`--cli` asks for findings only, as `pallas-lsp check` does. Unlike
`engine_speed.py` this times no single call: what an analysis leaves to the
cyclic collector is paid wherever the collector runs, and counts here too.
To compare two builds, run it alternately with `PYTHONPATH=<other>/server`
(the machine's speed drifts; several rounds each).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path

from pallas_lsp.engine import analyze


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--cli", action="store_true", help="findings only, as `check` asks")
    args = ap.parse_args()
    spec = importlib.util.find_spec("jax")
    if spec is None or spec.origin is None:
        sys.exit("jax is not installed")
    root = Path(spec.origin).parent / "experimental/pallas/ops/tpu"
    texts = [(p, p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))]
    texts = [(p, t) for p, t in texts if t.count("\n") >= 500]
    kw = {"findings_only": True} if args.cli else {}
    try:
        analyze(texts[0][1], str(texts[0][0]), **kw)
    except TypeError:  # an older engine without findings_only
        kw = {}
    keep = None
    start = time.perf_counter()
    for _ in range(args.rounds):
        for path, text in texts:
            keep = analyze(text, str(path), **kw)
    del keep
    gc.collect()
    per_pass = (time.perf_counter() - start) / args.rounds * 1000
    lines = sum(t.count("\n") + 1 for _, t in texts)
    print(f"{len(texts)} files, {lines} lines: {per_pass:.0f} ms per pass "
          f"({per_pass * 1000 / lines:.1f} ms per 1,000 lines)")


if __name__ == "__main__":
    main()
