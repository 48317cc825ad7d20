"""Snapshot what the CLI says about every library root, and compare two
snapshots: the regression check to run after each engine change.

    python benchmarks/third_party/snapshot.py take OUT.json ROOT... [--exe pallas-lsp]
    python benchmarks/third_party/snapshot.py diff OLD.json NEW.json

Each subfolder of a ROOT (except those starting with ``_`` or ``.``) is one
project. For each, ``pallas-lsp check`` and ``pallas-lsp coverage --verbose``
run once on the whole project, as a user runs them, so that cross-file
analysis and crashes (E001) show up; a per-file engine dump hid such a
crash for a whole session. ``diff`` prints every finding that appeared or
disappeared and every coverage total that moved, and exits 1 if a finding
changed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import shutil
import subprocess
import sys
from pathlib import Path


def _cli_json(exe: str, args: list[str]) -> dict | list:
    proc = subprocess.run([exe, *args], capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stdout[-500:] + proc.stderr[-2000:]).strip()}


def _one(exe: str, project: Path) -> tuple[str, dict]:
    where = str(project)
    return where, {
        "findings": _cli_json(exe, ["check", "--no-config", "--exit-zero",
                                    "--output-format", "json", where]),
        "coverage": _cli_json(exe, ["coverage", "--no-config", "--output-format", "json",
                                    "--verbose", where]),
    }


def take(out: Path, roots: list[Path], exe: str, jobs: int) -> None:
    projects = [p for r in roots for p in sorted(r.iterdir())
                if p.is_dir() and not p.name.startswith(("_", "."))]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        result = dict(pool.map(lambda p: _one(exe, p), projects))
    out.write_text(json.dumps(result, indent=0, sort_keys=True), encoding="utf-8")
    errors = sum(1 for v in result.values() if "error" in v["findings"] or "error" in v["coverage"])
    findings = sum(len(v["findings"]) for v in result.values() if isinstance(v["findings"], list))
    print(f"{len(result)} projects, {findings} findings, {errors} CLI errors -> {out}")


def _findings(entry: dict) -> set[tuple]:
    f = entry["findings"]
    if not isinstance(f, list):
        return {("<cli error>", 0, str(f.get("error", ""))[:200])}
    return {(x["path"], x["line"], x["code"]) for x in f}


def diff(old_path: Path, new_path: Path) -> int:
    old = json.loads(old_path.read_text(encoding="utf-8"))
    new = json.loads(new_path.read_text(encoding="utf-8"))
    changed = False
    for project in sorted(new):
        if project not in old:
            print(f"new project (not compared): {project}")
            continue
        a, b = _findings(old[project]), _findings(new[project])
        for sign, items in (("-", a - b), ("+", b - a)):
            for path, line, code in sorted(items):
                changed = True
                print(f"{sign} {path}:{line} {code}")
        ta = old[project]["coverage"].get("totals", {}) if isinstance(old[project]["coverage"], dict) else {}
        tb = new[project]["coverage"].get("totals", {}) if isinstance(new[project]["coverage"], dict) else {}
        moved = {k: (ta.get(k), tb.get(k)) for k in sorted(set(ta) | set(tb)) if ta.get(k) != tb.get(k)}
        if moved:
            print(f"coverage {project}: {moved}")
    print("findings changed" if changed else "findings unchanged")
    return 1 if changed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("take", help="run check and coverage on every project of the roots")
    t.add_argument("out", type=Path)
    t.add_argument("roots", type=Path, nargs="+")
    t.add_argument("--exe", default=shutil.which("pallas-lsp") or "pallas-lsp",
                   help="the pallas-lsp executable to measure")
    t.add_argument("--jobs", type=int, default=2)
    d = sub.add_parser("diff", help="compare two snapshots")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "take":
        take(args.out, args.roots, args.exe, args.jobs)
        return 0
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
