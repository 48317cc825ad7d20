"""`pallas-lsp vmem PATH...`: the scoped VMEM each TPU pallas_call needs, as
the compiler counts it (engine/vmem.py), part by part, against the limit of
each chosen generation. Exit 0 (2 on a usage error); a launch over a limit is
reported, not an error: `check` gives PAL404 for that."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pallas_lsp.cli._common import EXIT_CLEAN, EXIT_USAGE, err


def add_arguments(v) -> None:
    from pallas_lsp.engine.tpu import DEFAULT_GENERATIONS, GENERATIONS

    v.add_argument("paths", nargs="*", default=["."], help="files or folders (default: .)")
    v.add_argument("--generation", action="append", choices=GENERATIONS, metavar="GEN",
                   help=f"TPU generation to compare with, repeatable: {', '.join(GENERATIONS)} "
                        f"(default: {', '.join(DEFAULT_GENERATIONS)})")
    v.add_argument("--output-format", choices=("text", "json"), default="text")


def main(args) -> int:
    from pallas_lsp.engine.tpu import DEFAULT_GENERATIONS

    gens = tuple(dict.fromkeys(args.generation or DEFAULT_GENERATIONS))
    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        err(f"{missing[0]}: no such file or folder")
        return EXIT_USAGE
    rows = collect(paths)
    if args.output_format == "json":
        print(json.dumps({"generations": list(gens),
                          "launches": [_json(path, lv, gens) for path, lv in rows]}, indent=2))
    else:
        print(_text(rows, gens))
    return EXIT_CLEAN


def collect(paths: list[Path]) -> list[tuple[str, object]]:
    """(file, LaunchVmem) for every TPU pallas_call written in the files under
    `paths`, analysed as one project (helpers in other files are followed)."""
    from pallas_lsp.check.checker import _project_root, discover
    from pallas_lsp.engine import backend
    from pallas_lsp.engine.interp import Interpreter
    from pallas_lsp.engine.project import Project
    from pallas_lsp.engine.rules._tpu import vmem_rows
    from pallas_lsp.engine.source import parse

    files, _ = discover(paths)
    root, _ = _project_root(paths)
    project = Project([str(root)])
    out, seen = [], set()
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        src = parse(text)
        interp = Interpreter(src, str(f), project=project)
        interp.run()
        events = backend.tpu_only(interp.events, interp.kernel_backend, interp.file_backend)
        for lv in vmem_rows(events):
            if getattr(lv.launch.node, "_pl_src", src) is not src:
                continue  # written in another file: reported with that one
            key = (str(f), lv.launch.node.lineno, lv.estimate)
            if key not in seen:
                seen.add(key)
                out.append((str(f), lv))
    out.sort(key=lambda r: (r[0], r[1].launch.node.lineno))
    return out


def _verdict(lv, gen: str) -> str:
    from pallas_lsp.engine.tpu import fmt_bytes

    limit = lv.limits.get(gen)
    if limit is None:
        return f"{gen}: limit unknown"
    est = lv.estimate
    if est.total > limit:
        word = "OVER" if est.floor > limit else \
            "over (unless XLA puts an operand in VMEM itself)" if est.ranged else \
            "over (if the scratch is kept)"
    else:
        word = "under" if est.exact and not lv.computes else "under (so far)"
    return f"{gen}: {word} {fmt_bytes(limit)} ({100 * est.total / limit:.0f} %)"


def _text(rows, gens) -> str:
    from pallas_lsp.engine.rules._tpu import SPILL_NOTE
    from pallas_lsp.engine.tpu import fmt_bytes

    if not rows:
        return "no TPU pallas_call with known specs"
    lines = []
    variants: dict[tuple, int] = {}
    for path, lv in rows:
        site = (path, lv.launch.node.lineno)
        variants[site] = variants.get(site, 0) + 1
        label = f" (variant {variants[site]})" if variants[site] > 1 else ""
        est = lv.estimate
        lines.append(f"{path}:{site[1]}: {lv.launch.kernel or '?'}{label}")
        if all(p.shape is None for p in est.parts):
            lines.append("  no block or scratch shape is known here (they come from values "
                         "the engine does not see)")
            continue
        for p in est.parts:
            shape = "?" if p.shape is None else f"{p.dtype or '?'}[{', '.join(map(str, p.shape))}]"
            count = "?" if p.count is None else str(p.count)
            size = fmt_bytes(p.bytes) if p.exact else f">= {fmt_bytes(p.bytes)}"
            lines.append(f"  {p.name:<20} {shape:<22} x{count:<2} {size:>12}"
                         + (f"  {p.why}" if p.why else ""))
        lines.append(f"  total {lv.total_text('>= ')}; " + "; ".join(_verdict(lv, g) for g in gens))
        if lv.computes:
            lines.append("  " + SPILL_NOTE)
    return "\n".join(lines)


def _json(path: str, lv, gens) -> dict:
    est = lv.estimate
    return {
        "path": path, "line": lv.launch.node.lineno, "kernel": lv.launch.kernel,
        "total": est.total, "floor": est.floor, "exact": est.exact, "range": est.ranged,
        "spills_not_counted": lv.computes,
        "parts": [{"name": p.name, "kind": p.kind, "shape": list(p.shape) if p.shape else None,
                   "dtype": p.dtype, "bytes_each": p.bytes_each, "buffers": p.count,
                   "bytes": p.bytes, "exact": p.exact, "why": p.why} for p in est.parts],
        "limits": {g: {"limit": lv.limits.get(g), "over": lv.limits.get(g) is not None
                       and est.total > lv.limits[g]} for g in gens},
        "vmem_limit_bytes": lv.set_limit,
    }
