"""Child reports and output -> diagnostics on the user's own lines.

A failure's location is the innermost frame in the user's files (under the
workspace root, not in site-packages, not pallas-lsp's own runtime), taken
from, in this order:
  1. the exception logged by `jax._src.callback` (a failing read inside the
     simulated TPU: its JaxStackTraceBeforeTransformation has the kernel line),
  2. the JaxStackTraceBeforeTransformation in the exception's own chain
     (errors raised while JAX lowered / interpreted the kernel),
  3. the exception's own traceback (errors raised while tracing: the
     `.start()` / `.wait()` line),
  4. any other exception in the chain (a SyntaxError's own position first),
  5. the test function (or the script's first line).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.engine.model import Severity, Span
from pallas_lsp.runs.model import (CODE_FAILURE, CODE_HANG, CODE_RACE, RunDiagnostic,
                                   RunRelated)

_JAX_TB_NOTE = "\n--------------------\nFor simplicity, JAX has removed"
_RACE_ACCESS = re.compile(
    r"^\s*(?P<kind>read|write) of (?P<buf>.*?) from (?P<dev>\d+), (?P<core>\d+),?\s?(?P<loc>.*)$")
_LOC = re.compile(r"^(?P<path>.+):(?P<line>\d+):(?P<col>\d+) \((?P<fn>[^()]*)\)\s*$")
_BUF = re.compile(r"^\('(?P<space>\w+)', (?P<id>\d+), (?P<dev>\d+), (?P<core>\d+)\)(?P<rest>.*)$")
_SITE = ("site-packages", "dist-packages")


@dataclass
class PathMap:
    """Which files are the user's, and how child-side paths become local ones."""

    root: Path  # local workspace root, as the user named it
    prefixes: list[tuple[str, Path]] = field(default_factory=list)  # (child prefix, local dir)
    excluded: list[str] = field(default_factory=list)  # real paths of pallas-lsp's runtime dirs
    extra_files: list[str] = field(default_factory=list)  # the target itself, if outside root
    # Notebooks (real path -> engine/cells.Program): a run's lines there are the program's
    programs: dict = field(default_factory=dict)
    # A notebook's cells as the kernel compiled them (`_report.renamed`): name -> (the
    # notebook, the program line of the cell's first line). Only text names them so (races).
    renamed: dict = field(default_factory=dict)

    def __post_init__(self):
        self._root_real = os.path.realpath(self.root)
        self._lines: dict[str, list[str] | None] = {}

    def add_prefix(self, child_prefix: str | None, local: Path | None = None) -> None:
        if child_prefix:
            p = child_prefix.rstrip("/") or "/"
            if all(p != q for q, _ in self.prefixes):
                self.prefixes.append((p, local or self.root))

    def local(self, path: str) -> str | None:
        """The local file a child-side path refers to, if it is a user file."""
        if not path or path.startswith("<"):
            return None
        cand = path
        for prefix, local_dir in sorted(self.prefixes, key=lambda x: -len(x[0])):
            if path == prefix or path.startswith(prefix + "/"):
                rel = path[len(prefix):].lstrip("/")
                cand = str(local_dir / rel) if rel else str(local_dir)
                break
        return cand if self.is_user(cand) else None

    def moved(self, path: str, line: int) -> tuple[str, int]:
        """A position printed under a cell's compiled name, in its notebook."""
        where = self.renamed.get(path)
        return (where[0], line + where[1]) if where else (path, line)

    def label(self, path: str, line: int) -> str:
        """`file.py:LINE`, or `notebook.ipynb:cell N:LINE` (1-based `line` of its program)."""
        program = self.programs.get(os.path.realpath(path))
        pos = program.position(line - 1, 0) if program is not None else None
        if pos is not None:
            return f"{os.path.basename(path)}:cell {pos.cell.number}:{pos.line + 1}"
        return f"{os.path.basename(path)}:{line}"

    def is_user(self, path: str) -> bool:
        real = os.path.realpath(path)
        parts = Path(real).parts
        if any(p in _SITE for p in parts) or ".pallas-lsp" in parts:
            return False
        if any(real == e or real.startswith(e + os.sep) for e in self.excluded):
            return False
        if real in self.extra_files:
            return os.path.isfile(real)
        if not (real == self._root_real or real.startswith(self._root_real.rstrip(os.sep) + os.sep)):
            return False
        return os.path.isfile(real)

    def display(self, path: str) -> str:
        """`path` under the root as the user spelled it."""
        real = os.path.realpath(path)
        if real.startswith(self._root_real.rstrip(os.sep) + os.sep):
            return str(self.root / os.path.relpath(real, self._root_real))
        return path

    def source(self, path: str) -> str | None:
        """The text to parse: a notebook's program (magics neutralised), else the file's."""
        program = self.programs.get(os.path.realpath(path))
        if program is not None:
            return program.text
        lines = self.lines(path)
        return None if lines is None else "\n".join(lines)

    def lines(self, path: str) -> list[str] | None:
        """The lines as the user sees them (a notebook's: its code cells' own, in order,
        one per line of its program)."""
        if path not in self._lines:
            program = self.programs.get(os.path.realpath(path))
            if program is not None:
                self._lines[path] = [line for cell in program.cells for line in cell.lines]
                return self._lines[path]
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    self._lines[path] = fh.read().splitlines()
            except OSError:
                self._lines[path] = None
        return self._lines[path]

    def span(self, path: str, line: int, col: int | None = None, end_line: int | None = None,
             end_col: int | None = None) -> Span:
        """1-based `line`, 0-based UTF-8 byte `col` (Python / JAX positions) ->
        a Span (0-based, code points). Without a column: the line's text."""
        ln = max(line - 1, 0)
        text = None
        lines = self.lines(path)
        if lines is not None and ln < len(lines):
            text = lines[ln]
        if text is None:
            return Span(ln, 0, ln, 0)
        if col is None:
            start = len(text) - len(text.lstrip())
            return Span(ln, start, ln, max(len(text.rstrip()), start))
        c = _cp(text, col)
        if end_line is not None and end_col is not None and end_line == line:
            e = max(_cp(text, end_col), c)
        else:
            e = max(len(text.rstrip()), c)
        return Span(ln, c, ln, e)


def cwd_relative(path: str) -> str:
    """`path` as the command line shows it: relative to the current folder when
    it is under it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _cp(text: str, byte_col: int) -> int:
    raw = text.encode("utf-8")
    return len(raw[:max(byte_col, 0)].decode("utf-8", errors="ignore"))


# ---------------------------------------------------------------- failures


def _user_frames(frames: list[dict], pm: PathMap) -> list[tuple[str, dict]]:
    out = []
    for f in frames or []:
        local = pm.local(f.get("file") or "")
        if local is not None and f.get("line"):
            out.append((local, f))
    return out


def _short_type(name: str | None) -> str:
    return (name or "Exception").rsplit(".", 1)[-1]


# The TPU compiler's text: what to drop from it (also for run-time errors on a chip).
_HLO_CLAUSE = re.compile(r" while allocating on stack for %\S+ = .*?(?=\. Scoped allocation)", re.S)
_BOILERPLATE = re.compile(
    r"\s*(Please (file an issue|report a bug) at:? \S+|See https://openxla\.org\S* for more details\.|"
    r"It should not be possible to run out of scoped vmem - ?)", re.S)


# A Mosaic verifier error's preamble (the facts follow "Error details:").
_VERIFIER_HEAD = re.compile(r"Pallas encountered an internal verification error\.\s*Please file a "
                            r"bug at \S+\s*Error details:\s*")

# The TPU compiler's own words for mistakes a static rule names, where the
# words live in libtpu rather than in jax's Python (so no catalog template can
# hold them; the catalog test looks for templates in jax's source). Measured
# with libtpu 0.0.42 (deviceless compile) and on a TPU v5e.
COMPILER_MESSAGES = (
    (("'tpu.enqueue_dma' op DMA source and target shape mismatch",), "PAL305"),
    (("'tpu.enqueue_dma' op DMA source and target element type mismatch",), "PAL305"),
    # TPU interpret mode's copy of a smaller source into a bigger destination:
    # numpy's error, raised where the interpreter writes a DMA's data
    (("could not broadcast input array from shape", "_set_within_logical_shape"), "PAL305"),
)
# Catalog codes a TPU compile failure may carry besides the PAL4xx ones: the
# compiler refusing what a static rule reports (PAL204's and PAL111's texts
# are catalog templates, PAL305's is in COMPILER_MESSAGES).
COMPILER_CODES = ("PAL111", "PAL204", "PAL305")


def clean_message(message: str) -> str:
    """The compiler's text without the HLO dump, the bug-report boilerplate
    and the index_map jaxpr."""
    msg = message.split("\n--------------------\nFor simplicity, JAX")[0]
    msg = _HLO_CLAUSE.sub("", msg)
    msg = re.sub(r", and index_map \{.*?\}, in memory space", ", in memory space", msg, flags=re.S)
    msg = re.sub(r"\nSee details at \S+", "", msg)
    msg = re.sub(r"Blocked\(block_size=(\d+)\)", r"\1", msg)
    msg = re.sub(r", in memory space <MemorySpace\.DEFAULT: 'default'>", "", msg)
    msg = _BOILERPLATE.sub(" ", msg)
    msg = _VERIFIER_HEAD.sub("", msg)
    for marker in ("The MLIR operation involved:", "see current operation:"):
        if marker not in msg:
            continue
        head, _, op = msg.partition(marker)
        op_line = next((ln.strip() for ln in op.splitlines() if ln.strip()), "")
        m = re.search(r'"([\w.]+)"\(.*?:\s*\((.*?)\)\s*->', op_line)
        msg = head.strip() + (f" (in `{m.group(1)}` on {m.group(2)})" if m else "")
        break
    msg = re.sub(r"[ \t]+", " ", msg)
    msg = re.sub(r"\s*\n\s*", " ", msg).strip()
    return msg


def _clean_message(msg: str, max_lines: int = 12) -> str:
    msg = msg.split(_JAX_TB_NOTE)[0].strip()
    lines = msg.splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + ["…"]
    return "\n".join(lines) if lines else ""


def _match(text: str):
    try:
        from pallas_lsp.catalog import get, match_message
    except Exception:  # noqa: BLE001 - a broken catalog must not break runs
        return None
    try:
        code = next((c for words, c in COMPILER_MESSAGES if all(w in text for w in words)),
                    None)
        return get(code) if code else match_message(text)
    except Exception:  # noqa: BLE001
        return None


def _hang_code(kind: str | None) -> str:
    """PAL303 (a DMA wait nothing signals) when the catalog has it, else PAL902."""
    if kind == "DMA wait":
        try:
            from pallas_lsp.catalog import load
            entry = load().get("PAL303")
            if entry is not None and entry.name == "wait-without-start":
                return entry.code
        except Exception:  # noqa: BLE001
            pass
    return CODE_HANG


def _test_label(nodeid: str | None) -> str:
    return f" [{nodeid}]" if nodeid else ""


def failure_diagnostic(f: dict, pm: PathMap, fallback: tuple[str, int] | None) -> RunDiagnostic:
    """One recorded failure -> a diagnostic at the innermost user frame."""
    exc_type = f.get("type") or "Exception"
    message = f.get("message") or ""
    original = f.get("original")
    show_type, show_msg = exc_type, message
    if original and (original.get("message") or original.get("type")):
        show_type = original.get("type") or exc_type
        show_msg = original.get("message") or ""
    chain = f.get("chain") or []

    stacks: list[list[tuple[str, dict]]] = []
    # 1. callback log (reads in the simulated TPU)
    callbacks = f.get("callback") or []
    if original:
        same = [c for c in callbacks if original.get("message") and
                original["message"] in (c.get("message") or "")]
        callbacks = same or callbacks
        for c in callbacks:
            for ex in reversed(c.get("chain") or []):
                if ex.get("type", "").endswith("JaxStackTraceBeforeTransformation"):
                    stacks.append(_user_frames(ex.get("frames"), pm))
    # 2. JaxStackTraceBeforeTransformation in the exception's own chain
    for ex in reversed(chain):
        if ex.get("type", "").endswith("JaxStackTraceBeforeTransformation"):
            stacks.append(_user_frames(ex.get("frames"), pm))
    # 3. own traceback
    own = _user_frames(f.get("frames"), pm)
    stacks.append(own)
    # 4. a SyntaxError's position, then the rest of the chain
    for ex in [f, *chain]:
        syn = ex.get("syntax")
        if syn and syn.get("file") and syn.get("line"):
            local = pm.local(syn["file"])
            if local is not None:
                stacks.append([(local, {"line": syn["line"], "col": syn.get("col"),
                                        "name": "<module>"})])
    for ex in reversed(chain):
        stacks.append(_user_frames(ex.get("frames"), pm))
    chosen = next((s for s in stacks if s), None)

    entry = _match(show_msg) or _match(message)
    label = _test_label(f.get("nodeid"))
    if not original and exc_type.endswith(("JaxRuntimeError", "VerificationError", "MosaicError")):
        show_msg = clean_message(show_msg)  # the TPU compiler's own text, on a chip: keep its facts
    body = _clean_message(show_msg)
    if entry is not None:
        code = entry.code
        text = f"{body} ({_short_type(show_type)} at run time{label})"
    else:
        code = CODE_FAILURE
        head = _short_type(show_type)
        text = f"{head}: {body}{label}" if body else f"{head}{label}"
    if f.get("when") == "collect":
        text = "collecting the tests failed: " + text

    related: list[RunRelated] = []
    if chosen:
        path, fr = chosen[-1]
        span = _frame_span(pm, path, fr)
        for p2, fr2 in reversed(chosen[:-1]):
            related.append(RunRelated(pm.display(p2), _frame_span(pm, p2, fr2),
                                      f"called from `{fr2.get('name')}`"))
        if own and own is not chosen and (own[-1][0], own[-1][1]["line"]) != (path, fr["line"]):
            p3, fr3 = own[-1]
            related.insert(0, RunRelated(pm.display(p3), _frame_span(pm, p3, fr3),
                                         f"{_short_type(exc_type)} raised here"))
    else:
        path, line = _fallback(f, pm, fallback)
        span = pm.span(path, line + 1) if line is not None else Span(0, 0, 0, 0)
    return RunDiagnostic(path=pm.display(path), span=span, code=code, message=text,
                         related=tuple(related[:6]), test=f.get("nodeid"))


def _frame_span(pm: PathMap, path: str, fr: dict) -> Span:
    return pm.span(path, fr["line"], fr.get("col"), fr.get("end_line"), fr.get("end_col"))


def _fallback(f: dict, pm: PathMap, fallback: tuple[str, int] | None) -> tuple[str, int | None]:
    tp, tl = f.get("test_path"), f.get("test_line")
    if tp:
        local = pm.local(tp)
        if local is not None:
            return local, (tl - 1 if tl else 0)
    if fallback is not None:
        return fallback
    return str(pm.root), None


# ---------------------------------------------------------------- hangs


def hang_diagnostics(hang: dict, pm: PathMap, fallback: tuple[str, int] | None,
                     timeout: float) -> list[RunDiagnostic]:
    cur = hang.get("current") or {}
    nodeid = cur.get("nodeid")
    label = _test_label(nodeid)
    secs = hang.get("timeout") or timeout
    main = next((s for s in hang.get("stacks") or [] if s.get("main")), None)
    main_frames = _user_frames(main.get("frames"), pm) if main else []
    out: list[RunDiagnostic] = []
    seen = set()
    kinds = []
    for w in hang.get("waits") or []:
        kinds.append(w.get("kind") or "wait")
        fr = _user_frames(w.get("frames"), pm)
        if not fr:
            continue
        path, f = fr[-1]
        key = (path, f["line"])
        if key in seen:
            continue
        seen.add(key)
        related = tuple(RunRelated(pm.display(p), pm.span(p, x["line"], x.get("col")),
                                   f"called from `{x.get('name')}`")
                        for p, x in reversed(main_frames[-3:]))
        out.append(RunDiagnostic(
            path=pm.display(path), span=pm.span(path, f["line"], f.get("col")),
            code=_hang_code(w.get("kind")),
            message=(f"The kernel hung: this {w.get('kind', 'wait')} never completed (no result "
                     f"after {secs:g} s). Nothing signals its semaphore: every `.wait()` needs a "
                     f"matching `.start()` on the same semaphore with the same size, and every "
                     f"`pl.semaphore_wait` enough signals.{label}"),
            related=related, test=nodeid))
    if out:
        return out
    if kinds:
        what = (f"a {kinds[0]} inside this kernel never completed (JAX does not say which "
                "line waits)")
    else:
        what = "it did not finish"
    if main_frames:
        path, f = main_frames[-1]
        span = pm.span(path, f["line"], f.get("col"), f.get("end_line"), f.get("end_col"))
    else:
        tp = cur.get("path")
        local = pm.local(tp) if tp else None
        if local is not None:
            path, span = local, pm.span(local, cur.get("line") or 1)
        elif fallback is not None:
            path, span = fallback[0], pm.span(fallback[0], fallback[1] + 1)
        else:
            path, span = str(pm.root), Span(0, 0, 0, 0)
    return [RunDiagnostic(
        path=pm.display(path), span=span, code=CODE_HANG,
        message=(f"The run hung: {what}; stopped after {secs:g} s. Look for a DMA `.wait()` "
                 f"without a `.start()` or a `pl.semaphore_wait` without enough signals.{label}"),
        test=nodeid)]


# ---------------------------------------------------------------- races


class RaceParser:
    """Feeds on stdout lines; collects `RACE DETECTED` blocks."""

    def __init__(self):
        self.blocks: list[list[dict]] = []
        self._open: list[dict] | None = None

    def feed(self, line: str) -> None:
        if line.strip() == "RACE DETECTED" or line.rstrip().endswith("RACE DETECTED"):
            self._open = []
            self.blocks.append(self._open)
            return
        if self._open is None:
            return
        m = _RACE_ACCESS.match(line)
        if m:
            acc = m.groupdict()
            loc = _LOC.match(acc.pop("loc").strip())
            acc.update(loc.groupdict() if loc else {"path": None})
            self._open.append(acc)
            if len(self._open) >= 2:
                self._open = None
        elif not line.strip().startswith("clock:"):
            self._open = None


def _buf_text(buf: str) -> str:
    m = _BUF.match(buf.strip())
    if not m:
        return buf.strip()
    rest = m.group("rest") if m.group("rest") not in ("[()]", "") else ""
    return f"{m.group('space').upper()} buffer #{m.group('id')}{rest}"


def _actor(acc: dict) -> str:
    return "a DMA" if int(acc.get("dev") or 0) >= 100 else "the kernel"


def race_diagnostics(blocks: list[list[dict]], pm: PathMap) -> list[RunDiagnostic]:
    out: list[RunDiagnostic] = []
    seen = set()
    for block in blocks:
        if len(block) != 2:
            continue
        for i, acc in enumerate(block):
            other = block[1 - i]
            if not acc.get("path"):
                continue
            path, line = pm.moved(acc["path"], int(acc["line"]))
            local = pm.local(path)
            if local is None:
                continue
            col = int(acc["col"])
            key = (local, line, col, acc["kind"])
            if key in seen:
                continue
            seen.add(key)
            if other.get("path"):
                opath, oline = pm.moved(other["path"], int(other["line"]))
                olocal = pm.local(opath) or opath
                where = pm.label(olocal, oline)
            else:
                olocal, where = None, "a line JAX does not report (e.g. `pltpu.sync_copy`)"
            if _actor(acc) == "a DMA":
                this = f"the {acc['kind']} of the DMA started here"
            else:
                this = f"this {acc['kind']}"
            if _actor(other) == "a DMA":
                that = f"the {other['kind']} of the DMA started at {where}"
            else:
                that = f"the {other['kind']} at {where}"
            hint = ""
            if _actor(acc) == "a DMA" or _actor(other) == "a DMA":
                hint = (" Do not touch a DMA's source or destination between its `.start()` and "
                        "its `.wait()`.")
            msg = (f"Data race on {_buf_text(acc['buf'])}: {this} and {that} are not ordered "
                   f"(interpreter race detector).{hint}")
            related = ()
            if olocal is not None and other.get("path") and pm.is_user(olocal):
                related = (RunRelated(pm.display(olocal), pm.span(olocal, oline, int(other["col"])),
                                      f"the other {other['kind']} ({other.get('fn')})"),)
            span = pm.span(local, line, col)
            out.append(RunDiagnostic(path=pm.display(local), span=span, code=CODE_RACE,
                                     message=msg, severity=Severity.ERROR, related=related))
    return out


def dedupe(diags: list[RunDiagnostic]) -> list[RunDiagnostic]:
    seen, out = set(), []
    for d in diags:
        key = (d.path, d.span, d.code, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
