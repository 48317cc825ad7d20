"""`pallas-lsp coverage PATH...`: how much of the kernels' code the engine
sees. For every DMA, semaphore and load/store call in the source (found
syntactically, so calls the engine never reached count too): reached or not,
and whether the kind of every argument was known; for every kernel launch:
whether its parameters were bound. A site counts as known when it is known
from any kernel that reaches it, in its own file or from another. In a
notebook a site is `path:cell N:line:col`; in a Markdown / rst page, on the
page's lines."""
from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.check.checker import Options, check_project


@dataclass
class Totals:
    sites: int = 0
    reached: int = 0
    known: int = 0
    dma_sites: int = 0
    dma_known: int = 0
    launches: int = 0
    bound: int = 0
    by_kind: Counter = field(default_factory=Counter)

    def add(self, other: "Totals") -> None:
        for name in ("sites", "reached", "known", "dma_sites", "dma_known", "launches", "bound"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.by_kind.update(other.by_kind)

    def to_json(self) -> dict:
        return {"sites": self.sites, "reached": self.reached, "known": self.known,
                "dma_sites": self.dma_sites, "dma_known": self.dma_known,
                "known_pct": _pct(self.known, self.sites),
                "dma_known_pct": _pct(self.dma_known, self.dma_sites),
                "launches": self.launches, "bound": self.bound,
                "bound_pct": _pct(self.bound, self.launches)}


def _pct(a: int, b: int) -> float | None:
    return round(100.0 * a / b, 1) if b else None


def _totals(cov) -> Totals:
    t = Totals()
    if cov is None or cov.backend != "tpu":
        return t  # GPU kernels are not what the TPU rules judge
    for s in cov.sites:
        if s.backend != "tpu":
            continue  # written in a GPU kernel of this file
        t.sites += 1
        t.reached += s.reached
        t.known += s.known
        t.by_kind[s.kind] += 1
        if s.kind == "dma":
            t.dma_sites += 1
            t.dma_known += s.known
    tpu = [launch for launch in cov.launches if launch.backend == "tpu"]
    t.launches = len(tpu)
    t.bound = sum(1 for launch in tpu if launch.bound)
    return t


def run(paths: list[Path], output_format: str = "text", verbose: bool = False,
        use_config: bool = True, cache_dir: Path | None = None) -> tuple[str, int]:
    """The report, and the exit code (0; 2 when no path exists)."""
    options = Options(use_config=use_config, coverage=True, cache_dir=cache_dir)
    checked, problems = check_project(paths, options=options)
    for warning in options.warnings:
        print(f"pallas-lsp: {warning}", file=sys.stderr)
    if not checked and problems and all(p.kind == "missing" for p in problems):
        return "\n".join(f"pallas-lsp: {p.path}: {p.message}" for p in problems), 2
    overall = Totals()
    files = []
    stops: Counter = Counter()
    for item in checked:
        cov = item.analysis.coverage if item.analysis is not None else None
        t = _totals(cov)
        if not t.sites and not t.launches and not (verbose and cov is not None and cov.launches):
            continue  # (verbose: a file of GPU kernels says they were not counted)
        overall.add(t)
        for s in cov.sites:
            if not s.known and s.backend == "tpu":
                stops[_reason_class(s.reason)] += 1
        files.append((item.path, cov, t, item.document))
    if output_format == "json":
        return json.dumps({
            "files": [{"path": str(p), "backend": cov.backend, "totals": t.to_json(),
                       "budget": cov.budget,
                       "sites": [_placed(s.to_json(), doc) for s in cov.sites],
                       "launches": [_placed(launch.to_json(), doc) for launch in cov.launches]}
                      for p, cov, t, doc in files],
            "totals": overall.to_json(),
            "unknown_because": dict(stops.most_common()),
        }, indent=2), 0
    lines = []
    for path, cov, t, doc in files:
        lines.append(f"{path}: {t.known}/{t.sites} sites known ({_fmt(t.known, t.sites)}), "
                     f"DMA {t.dma_known}/{t.dma_sites}, kernels bound {t.bound}/{t.launches}")
        if cov.budget:
            lines.append(f"  {path}: work budget: {cov.budget}")
        for s in cov.sites:
            if s.backend != "tpu":
                if verbose:
                    lines.append(f"  {_at(path, doc, s.line, s.col)}: {s.kind} {s.api} in a "
                                 f"{s.backend} kernel (not judged, not counted)")
                continue
            if verbose or not s.known:
                state = "known" if s.known else ("reached" if s.reached else "not reached")
                why = f": {s.reason}" if s.reason and not s.known else ""
                lines.append(f"  {_at(path, doc, s.line, s.col)}: {s.kind} {s.api} {state}{why}")
        for launch in cov.launches:
            if launch.backend != "tpu":
                if verbose:
                    lines.append(f"  {_at(path, doc, launch.line)}: {launch.api} "
                                 f"{launch.kernel or '?'} {launch.backend} kernel (not counted)")
                continue
            if verbose or not launch.bound:
                what = launch.kernel or "?"
                state = "bound" if launch.bound else "not bound"
                why = f": {launch.reason}" if launch.reason and not launch.bound else ""
                lines.append(f"  {_at(path, doc, launch.line)}: {launch.api} {what} {state}{why}")
    lines.append("")
    lines.append(f"Total: {overall.known}/{overall.sites} sites known ({_fmt(overall.known, overall.sites)}); "
                 f"DMA sites {overall.dma_known}/{overall.dma_sites} ({_fmt(overall.dma_known, overall.dma_sites)}); "
                 f"kernels bound {overall.bound}/{overall.launches} ({_fmt(overall.bound, overall.launches)})")
    if stops:
        lines.append("What stops the rest:")
        for reason, n in stops.most_common(8):
            lines.append(f"  {n:5d}  {reason}")
    return "\n".join(lines), 0


def _at(path, document, line: int, col: int | None = None) -> str:
    """`path:line[:col]`, with the cell in a notebook, on the page's lines in a page."""
    cell = ""
    if document is not None:
        pos = document.position(line, col or 0)
        if pos is not None:
            line, col = pos.line, (pos.col if col is not None else None)
            cell = f"cell {pos.cell.number}:" if pos.cell.doc_lines is None else ""
    return f"{path}:{cell}{line + 1}" + (f":{col + 1}" if col is not None else "")


def _placed(entry: dict, document) -> dict:
    """A site's or launch's JSON with its line (and column) where the user sees it."""
    if document is None:
        return entry
    pos = document.position(entry["line"] - 1, entry.get("col", 1) - 1)
    if pos is not None:
        entry["line"] = pos.line + 1
        if "col" in entry:
            entry["col"] = pos.col + 1
        if pos.cell.doc_lines is None:
            entry["cell"] = pos.cell.number
    return entry


def _fmt(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def _reason_class(reason: str) -> str:
    """Group reasons: the function names differ, the causes repeat."""
    if "no kernel launch" in reason:
        return "in a function no kernel launch reaches (as far as the engine can follow)"
    if "was not reached" in reason:
        return "in a branch or loop of an analysed function that was not entered"
    if "could not tell" in reason:
        return "reached, but an argument's value was lost on the way (Unknown)"
    if "work budget" in reason or "steps" in reason:
        return "the analysis' work budget (see the file's line)"
    if "module-level" in reason:
        return "module-level code not reached"
    return reason or "unknown"
