"""`pallas-lsp check` with its result cache: cold (an empty cache) against
warm (nothing changed) and after one edit. Prints numbers; not a test.

    python benchmarks/cli_cache.py [--repeat 3] [--tp /work/tp_cache] [--synthetic 2000] [TREE ...]

Trees (default): the installed jax's `jax/experimental/pallas/`; the third-party
folder given with --tp (skipped when absent); a synthetic project of about
2,000 files (copies of jax's Pallas tree under one pyproject.toml, so the
whole-project index and callers outside the checked paths are in play).

Each number is the wall time of a fresh process (start-up included), with
the bytecode written once beforehand (as pip installs it):
- no cache: `--no-cache` (the analysis alone);
- cold: an empty cache folder (the analysis, and every entry written);
- warm: the same command again (every entry valid: read, checked, reused);
- one edit (the synthetic tree only: the others are not ours to write): a
  comment appended to one module that others import (it and its importers
  are analysed again).
Cold is measured once on trees of more than 500 files (and no-cache not
at all: cold stands for it), else the minimum of --repeat; warm always the
minimum of --repeat. The machine is
shared: read the ratios.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECK = [sys.executable, "-m", "pallas_lsp", "check", "--exit-zero", "--verbose",
         "--output-format", "json"]
_REUSED = re.compile(r"(\d+) analyses reused")


def run(args: list[str], env: dict) -> tuple[float, str, int]:
    t = time.perf_counter()
    p = subprocess.run(CHECK + args, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if p.returncode not in (0, 1):
        raise SystemExit(f"check failed ({p.returncode}): {p.stderr[-2000:]}")
    m = _REUSED.search(p.stderr)
    return took, p.stdout, int(m.group(1)) if m else 0


def best(args: list[str], env: dict, repeat: int, before=None) -> tuple[float, str, int]:
    out = None
    for _ in range(repeat):
        if before is not None:
            before()
        took, stdout, reused = run(args, env)
        if out is None or took < out[0]:
            out = (took, stdout, reused)
    return out


# Besides jax's files (which import each other as `jax.*`, a library the
# engine does not follow), each copy has a package whose kernels call a DMA
# helper of theirs: what the cache must track across files.
HELPER = """\
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()
"""
KERNEL = """\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .helpers import copy_in


def kernel_{n}(x_hbm, o_hbm, sems):
    copy_in(x_hbm, o_hbm, sems.at[{n} % 2])


def run_{n}(x):
    return pl.pallas_call(kernel_{n}, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
"""
KERNELS_PER_COPY = 4


def synthetic(folder: Path, pallas: Path, files: int) -> Path:
    (folder / "pyproject.toml").write_text("[project]\nname = 'synthetic'\n")
    per_copy = sum(1 for _ in pallas.rglob("*.py")) + KERNELS_PER_COPY + 2
    for i in range(max(1, round(files / per_copy))):
        copy = folder / f"copy_{i:02d}"
        shutil.copytree(pallas, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / "mine").mkdir()
        (copy / "mine" / "__init__.py").write_text("")
        (copy / "mine" / "helpers.py").write_text(HELPER)
        for n in range(KERNELS_PER_COPY):
            (copy / "mine" / f"k{n}.py").write_text(KERNEL.format(n=n))
    return folder


def helper_of(tree: Path) -> Path:
    """A module that other files of the tree import."""
    return sorted(tree.rglob("mine/helpers.py"))[0]


def measure(name: str, tree: Path, env: dict, repeat: int, edit: bool = False) -> None:
    count = sum(1 for _ in tree.rglob("*.py"))
    big = count > 500
    cache = Path(tempfile.mkdtemp(prefix="pallas-cache-"))
    args = ["--cache-dir", str(cache), str(tree)]
    try:
        # (on a big tree the cold run stands for the analysis alone too)
        plain, plain_out, _ = best(["--no-cache", str(tree)], env, repeat) if not big \
            else (float("nan"), None, 0)
        cold, cold_out, _ = best(args, env, 1 if big else repeat,
                                 before=lambda: shutil.rmtree(cache, ignore_errors=True))
        warm, warm_out, reused = best(args, env, repeat)
        assert plain_out in (None, cold_out) and cold_out == warm_out, \
            f"{name}: results differ with the cache"
        edited = ""
        if edit:  # only in a tree of our own
            helper = helper_of(tree)
            original = helper.read_text(encoding="utf-8")
            try:
                helper.write_text(original + "\n# edited\n", encoding="utf-8")
                took, _, edit_reused = run(args, env)
            finally:
                helper.write_text(original, encoding="utf-8")
            edited = (f" | one edit {took:6.3f} s ({reused - edit_reused} analysed again: "
                      f"{helper.name} and its importers)")
        size = sum(f.stat().st_size for f in cache.rglob("*.json"))
        print(f"{name}: {count} files, load {os.getloadavg()[0]:.1f}")
        print(f"  no cache {plain:7.2f} s | cold {cold:7.2f} s | warm {warm:6.3f} s "
              f"({100 * warm / cold:4.1f} % of cold; {reused} analyses reused){edited} | "
              f"cache {size / 2**20:.2f} MiB", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tp", default="/work/tp_cache", help="a folder of third-party code")
    ap.add_argument("--synthetic", type=int, default=2000, help="files (0: none)")
    args = ap.parse_args()
    pallas = Path(importlib.util.find_spec("jax").origin).parent / "experimental" / "pallas"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PALLAS_LSP_JOBS", "PALLAS_LSP_CACHE_DIR")}
    subprocess.run([sys.executable, "-c", "import pallas_lsp.cli.check, pallas_lsp.check.cache, "
                    "pallas_lsp.engine.analyze, pallas_lsp.engine.coverage, "
                    "pallas_lsp.cli.output.machine"], env=env, check=False)  # bytecode, once
    print(f"{os.cpu_count()} cores; min of {args.repeat} unless said")
    trees = [(Path(t).name, Path(t)) for t in args.trees] or [("jax pallas", pallas)]
    if not args.trees and os.path.isdir(args.tp):
        trees.append((args.tp, Path(args.tp)))
    for name, tree in trees:
        measure(name, tree, env, args.repeat)
    if not args.trees and args.synthetic:
        with tempfile.TemporaryDirectory(prefix="pallas-synthetic-") as tmp:
            tree = synthetic(Path(tmp), pallas, args.synthetic)
            measure(f"synthetic ({args.synthetic})", tree, env, args.repeat, edit=True)


if __name__ == "__main__":
    main()
