"""Fetch the third-party kernel libraries that measure.py reads, outside the repo.

    python benchmarks/third_party/fetch.py [--cache /work/tp_cache] [--only tokamax,...]
    python benchmarks/third_party/fetch.py --set holdout --cache /work/tp_holdout

Downloads each pinned distribution from PyPI with pip (no dependencies), and
unpacks it into CACHE/<name>/ with its package layout, so that imports between
its files resolve. Also copies the installed jax's own TPU kernels
(jax/experimental/pallas/ops/tpu) into CACHE/jax/. Nothing is written inside
this repository: the libraries' code is theirs, never commit it.
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

# name==version: the ones measured (each has `from jax.experimental.pallas import tpu`).
# Several need Python >= 3.12 by their metadata; they are pure Python, so the wheel is
# fetched for 3.12 and only read here, never installed.
PACKAGES = [
    "tpu-inference==0.32.0",
    "tokamax==0.0.17",
    "maxtext==0.2.5",
    "ejkernel==0.0.80.3",
    "flywheel-tpu==0.3.0",
    "easydel==0.3.0",
    "marin-levanter==0.2.227.dev40316220070",
    "atomic-ops==0.2.0",
    "gdn2-pallas==0.1.1",
    "deltanet-tpu==0.3.0",
    "deciax==0.1.2",
    "pallas-forge==0.1.2",
    "qwix==0.1.8",
]

# A second set, kept apart (`--set holdout`, its own --cache): releases the
# engine was never tuned on, used to see whether what it follows carries over
# to other code. name==version -> the folders kept (None: all of it); each is
# unpacked under CACHE/<name>_<version digits>/.
HOLDOUT = {
    "sglang-jax==0.0.2": None,
    "torch-xla==2.9.0": ("torch_xla/experimental/pallas_kernels", "torch_xla/experimental/custom_kernel.py",
                         "torch_xla/_internal/custom_kernel.py"),
    "tpu-inference==0.11.1": None,
    "tpu-inference==0.20.0": None,
    "easydel==0.1.4.1": None,
    "ejkernel==0.0.40": None,
    "fjformer==0.0.91": None,
    "jax==0.4.35": ("jax/experimental/pallas/ops/tpu",),
    "jax==0.6.2": ("jax/experimental/pallas/ops/tpu",),
}


def folder_name(requirement: str) -> str:
    return requirement.split("==")[0].replace("-", "_")


def download(requirement: str, dest: Path) -> Path:
    before = set(dest.iterdir())
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest),
           "--only-binary=:all:", "--python-version", "3.12", requirement]
    if subprocess.run(cmd).returncode != 0:  # an sdist-only release
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest),
               "--no-binary", ":none:", requirement]
        subprocess.run(cmd, check=True)
    new = set(dest.iterdir()) - before
    if new:
        return new.pop()
    # already downloaded earlier: find it by name
    stem = folder_name(requirement).lower()
    for p in dest.iterdir():
        if p.name.lower().replace("-", "_").startswith(stem + "-"):
            return p
    raise SystemExit(f"pip downloaded nothing for {requirement}")


def unpack(archive: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            z.extractall(target)
    else:
        with tarfile.open(archive) as t:
            t.extractall(target, filter="data")


def keep_only(target: Path, keep: tuple[str, ...]) -> None:
    """Delete everything under `target` but the given files and folders (and
    add the `__init__.py` files their packages need to import each other)."""
    kept = target.with_name(target.name + ".keep")
    shutil.rmtree(kept, ignore_errors=True)
    for rel in keep:
        src = target / rel
        if src.is_dir():
            shutil.copytree(src, kept / rel)
        elif src.is_file():
            (kept / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, kept / rel)
    shutil.rmtree(target)
    kept.rename(target)
    for folder in [p for p in target.rglob("*") if p.is_dir()]:
        if not (folder / "__init__.py").exists():
            (folder / "__init__.py").touch()


def fetch_holdout(cache: Path, downloads: Path) -> None:
    for req, keep in HOLDOUT.items():
        name, version = req.split("==")
        archive = download(req, downloads)
        target = cache / f"{name.replace('-', '_')}_{version.replace('.', '')}"
        unpack(archive, target)
        if keep:
            keep_only(target, keep)
        print(f"{req}: {archive.name} -> {target}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=Path("/work/tp_cache"))
    ap.add_argument("--only", default="", help="comma-separated distribution names")
    ap.add_argument("--set", choices=("main", "holdout"), default="main",
                    help="holdout: the releases kept apart for checking generalisation")
    args = ap.parse_args()
    here = Path(__file__).resolve()
    repo = here.parents[2]
    cache = args.cache.resolve()
    if cache == repo or repo in cache.parents:
        sys.exit("--cache must be outside the repository")
    downloads = cache / "_downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    if args.set == "holdout":
        fetch_holdout(cache, downloads)
        return 0
    only = {x for x in args.only.split(",") if x}
    for req in PACKAGES:
        name = req.split("==")[0]
        if only and name not in only:
            continue
        archive = download(req, downloads)
        unpack(archive, cache / folder_name(req))
        print(f"{req}: {archive.name} -> {cache / folder_name(req)}")
    if not only or "jax" in only:
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.origin is None:
            print("jax is not installed: its kernels are not copied", file=sys.stderr)
        else:
            src = Path(spec.origin).parent / "experimental/pallas/ops/tpu"
            dst = cache / "jax/jax/experimental/pallas/ops/tpu"
            shutil.rmtree(cache / "jax", ignore_errors=True)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
            print(f"jax: {src} -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
