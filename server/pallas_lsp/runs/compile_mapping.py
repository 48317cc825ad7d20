"""Compile records (from `_compile.py` in the child) -> diagnostics and
one-line summaries.

Where a failure goes, in this order:
  1. the BlockSpec the message names (`Block spec for args[1] ...`): that
     element of `in_specs` / `out_specs` in the `pallas_call` (found in the
     source with `ast`), or the whole keyword when it is not a literal list;
  2. the kernel statement: the innermost user-file position in the MLIR
     location the compiler printed, or JAX's "before transformation" frames
     of a lowering error;
  3. for a message with no location (a Mosaic verifier error), the engine's
     finding of the same catalog code inside the compiled kernel;
  4. the `pallas_call` itself (the call expression in the user's frame that
     bound it; for `f = pl.pallas_call(k, ...)` then `f(x)`, the pallas_call
     of kernel `k` nearest above `f(x)`).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pallas_lsp.engine.model import Severity, Span
from pallas_lsp.engine.tpu import fmt_bytes
from pallas_lsp.runs.mapping import (COMPILER_CODES, PathMap, _frame_span, _match, _user_frames,
                                     clean_message, cwd_relative)
from pallas_lsp.runs.model import RunDiagnostic, RunRelated
from pallas_lsp.runs.static_context import kernel_def

CODE_COMPILE = "PAL903"  # a TPU compile error that no PAL4xx catalog entry names
_MLIR_LOC = re.compile(r'"(?P<file>[^"]+\.py)":(?P<line>\d+):(?P<col>\d+)'
                       r'(?: to (?:(?P<eline>\d+):)?:?(?P<ecol>\d+))?')
_ORIGIN = re.compile(r"Block spec for (?P<side>args|outputs)(?:\[(?P<idx>\d+)\])?")
# Mosaic's name for a block (E2002): the index among in_specs / out_specs, without the
# scalar-prefetch operands (measured).
_WINDOW = re.compile(r"window params for (?P<side>input|output) (?P<idx>\d+)")
_BUFFERED = re.compile(r"buffering are supported\. Got (?P<n>\d+)")

# Compiler (libtpu) messages that are a catalog entry's error in other words: the
# entry's own message is the Pallas lowering's (PAL401) or another Mosaic check.
# Each reproduced by a deviceless compile (tests/compile/fixtures/compile_codes.py).
_COMPILER_CODES = (
    # an int8 / bf16 block that is not a whole number of the dtype's tiles
    (re.compile(r"E2002: CompileTimeMosaicMisalignedBlockAndTiling"), "PAL401"),
    # 8-bit integer arithmetic with no vector lowering (uint8 `//` is arith.divui)
    (re.compile(r"failed to legalize operation 'arith\.\w+'[^\n]*xi8>"), "PAL403"),
    # a store into a float16 VMEM Ref
    (re.compile(r"failed to legalize operation 'tpu\.store'[^\n]*xf16"), "PAL405"),
)

# What to change, by kind of failure (used when no catalog entry matches).
HINTS = {
    "block": "Make the last two block dimensions multiples of 8 and 128 (32- and 16-bit "
             "types; 32 and 128 for 8-bit), or equal to the array's.",
    "primitive": "This operation has no TPU lowering: compute it outside the kernel, or "
                 "write it with supported ops (e.g. a loop of comparisons instead of a sort).",
    "vector_type": "Cast the operands to a 32-bit type (e.g. `x.astype(jnp.int32)`) before "
                   "the operation, and back afterwards.",
    "vmem": "Use smaller blocks, fewer or smaller scratch buffers, or raise the limit with "
            "`compiler_params=pltpu.CompilerParams(vmem_limit_bytes=...)`.",
    "wait_sem": "Wait on one semaphore, `sems.at[i]`, as the copy was started with.",
    "partition": "Call the kernel inside `jax.shard_map` so that each device runs it on its "
                 "own shard.",
    "buffered": "Use `pl.Buffered(1)` or `pl.Buffered(2)` (the default): the TPU pipeline "
                "has one or two buffers per block.",
    "float16": "Use `jnp.bfloat16` for the buffer (same size), or convert outside the kernel.",
    "dma_shape": "Give the copy's source and destination windows the same shape (slice the "
                 "larger one with `.at[pl.ds(start, size)]` or `.at[slot]`).",
    "memory_space": "Copy the data into VMEM first (`pltpu.sync_copy`, or `make_async_copy` "
                    "with `.start()` / `.wait()`), or give the operand a VMEM BlockSpec.",
    "dma_add": "Copy into a VMEM scratch buffer with a plain DMA and add it with vector code "
               "(`acc[...] += buf[...]`).",
    "other": "The kernel runs in interpret mode but the TPU compiler rejects it; see the "
             "compiler's message.",
}

HINTS["float16_load"] = HINTS["float16"]  # the same advice, on the load's line


def kind_of(message: str) -> str:
    if "CompileTimeMosaicMisalignedBlockAndTiling" in message:
        return "block"
    if _BUFFERED.search(message):
        return "buffered"
    if "xf16" in message and "failed to legalize operation 'tpu.store'" in message:
        return "float16"
    if "Invalid vector type for load" in message:  # a float16 load (v5e chip, libtpu)
        return "float16_load"  # the same advice; it lands on the load, not on a scratch entry
    if "failed to legalize operation 'arith." in message and "xi8>" in message:
        return "vector_type"
    if "block shape" in message and ("divisible by 8 and 128" in message
                                     or "rank 1 block" in message
                                     or "in memory space ANY" in message):
        return "block"
    if "Unimplemented primitive in Pallas TPU lowering" in message:
        return "primitive"
    if "are supported, but got" in message or "Please cast your input" in message:
        return "vector_type"
    if ("vmem" in message.lower() and ("Ran out of memory" in message or "Oom" in message)) \
            or "would exceed memory" in message:
        return "vmem"
    if "cannot be automatically partitioned" in message:
        return "partition"
    if "DMA wait semaphore must be rank 0" in message:
        return "wait_sem"
    if "DMA source and target shape mismatch" in message:
        return "dma_shape"
    if "only allowed on VMEM and SMEM references" in message:
        return "memory_space"
    if "DMA with add=True is not supported" in message:
        return "dma_add"
    return "other"




# ---------------------------------------------------------------- source lookup


@dataclass
class _Call:
    node: ast.Call  # the pallas_call(...) call (or partial(pl.pallas_call, ...))
    kernel: str | None  # the kernel's name, when it is a plain name / partial of one
    keywords: dict  # pallas_call keywords (and those of a literal grid_spec=...(...))
    scope: ast.AST | None  # enclosing function


class _Source:
    def __init__(self, pm: PathMap):
        self.pm = pm
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        """The file's syntax tree (a notebook's: its program's, PathMap.source)."""
        if path not in self._trees:
            text = self.pm.source(path)
            try:
                self._trees[path] = None if text is None else ast.parse(text)
            except (SyntaxError, ValueError, RecursionError):
                self._trees[path] = None
        return self._trees[path]

    def calls(self, path: str) -> list[_Call]:
        tree = self.tree(path)
        if tree is None:
            return []
        out: list[_Call] = []

        def visit(node, scope):
            for child in ast.iter_child_nodes(node):
                s = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for dec in child.decorator_list:
                        c = _as_pallas_call(dec)
                        if c is not None:
                            out.append(_Call(c[0], child.name, c[1], scope))
                if isinstance(child, ast.Call):
                    c = _as_pallas_call(child)
                    if c is not None:
                        out.append(_Call(c[0], c[2], c[1], scope))
                visit(child, s)

        visit(tree, None)
        return out


def _is_pallas_call(node) -> bool:
    return (isinstance(node, ast.Name) and node.id == "pallas_call") or \
        (isinstance(node, ast.Attribute) and node.attr == "pallas_call")


def _is_partial(node) -> bool:
    return (isinstance(node, ast.Name) and node.id == "partial") or \
        (isinstance(node, ast.Attribute) and node.attr == "partial")


def _name_of(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and _is_partial(node.func) and node.args:
        return _name_of(node.args[0])
    return None


def _as_pallas_call(node):
    """(call, keywords, kernel name) for `pallas_call(k, ...)` or
    `partial(pallas_call, ...)`; None otherwise."""
    if not isinstance(node, ast.Call):
        return None
    kernel = None
    if _is_pallas_call(node.func):
        if node.args:
            kernel = _name_of(node.args[0])
    elif _is_partial(node.func) and node.args and _is_pallas_call(node.args[0]):
        pass
    else:
        return None
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    if kernel is None and "kernel" in kw:
        kernel = _name_of(kw["kernel"])
    gs = kw.get("grid_spec")
    if isinstance(gs, ast.Call):
        for k in gs.keywords:
            if k.arg and k.arg not in kw:
                kw[k.arg] = k.value
    return node, kw, kernel


def _assigned(scope: ast.AST | None, tree: ast.Module, name: str, before: int):
    """The value of the last simple `name = ...` above line `before` in `scope`
    (or the module)."""
    best = None
    for node in ast.walk(scope or tree):
        if isinstance(node, ast.Assign) and node.lineno < before and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
            if best is None or node.lineno > best.lineno:
                best = node
    return best.value if best is not None else None


def _span_of(pm: PathMap, path: str, node: ast.AST) -> Span:
    lines = pm.lines(path) or []
    line = node.lineno
    text = lines[line - 1] if 0 < line <= len(lines) else ""

    def cp(t: str, b: int) -> int:
        return len(t.encode("utf-8")[:b].decode("utf-8", errors="ignore"))

    col = cp(text, node.col_offset)
    if node.end_lineno == node.lineno and node.end_col_offset is not None:
        end = cp(text, node.end_col_offset)
    else:
        end = len(text.rstrip())
    return Span(line - 1, col, line - 1, max(end, col))


class Locator:
    """Finds the pallas_call of a compile record, and its specs, in the source."""

    def __init__(self, pm: PathMap):
        self.pm = pm
        self.src = _Source(pm)
        self._analyses: dict[str, list] = {}  # path -> the engine's findings (static_site)

    def site(self, rec: dict) -> tuple[str, dict] | None:
        frames = _user_frames(rec.get("site") or [], self.pm)
        return frames[-1] if frames else None

    def call(self, rec: dict) -> tuple[str, _Call | None, Span | None]:
        """(path, the pallas_call, span of the user frame that bound it)."""
        kernel = rec.get("kernel") or {}
        name = kernel.get("name")
        site = self.site(rec)
        if site is not None:
            path, fr = site
            span = _frame_span(self.pm, path, fr)
            line, end = fr["line"], fr.get("end_line") or fr["line"]
            calls = self.src.calls(path)
            inside = [c for c in calls if c.node.lineno >= line and
                      (c.node.end_lineno or c.node.lineno) <= end]
            if inside:
                named = [c for c in inside if c.kernel == name] or inside
                return path, named[0], span
            above = [c for c in calls if c.kernel == name and c.node.lineno <= line]
            if above:
                return path, max(above, key=lambda c: c.node.lineno), span
            return path, None, span
        kfile = kernel.get("file")
        local = self.pm.local(kfile) if kfile else None
        if local is not None:
            calls = [c for c in self.src.calls(local) if c.kernel == name]
            if calls:
                return local, calls[0], None
            return local, None, self.pm.span(local, kernel.get("line") or 1)
        return "", None, None

    def static_site(self, rec: dict, code: str) -> tuple[str, Span] | None:
        """Where the engine reports `code` inside the compiled kernel, for
        compiler messages that carry no location. Only a finding of the very
        code the message maps to, inside the kernel's own def, is used."""
        kernel = rec.get("kernel") or {}
        local = self.pm.local(kernel["file"]) if kernel.get("file") else None
        line = kernel.get("line")
        tree = self.src.tree(local) if local else None
        if tree is None or not line:
            return None
        kdef = kernel_def(tree, line)
        if kdef is None:
            return None
        if local not in self._analyses:
            from pallas_lsp.engine.analyze import analyze  # noqa: PLC0415 - only on this path
            self._analyses[local] = analyze(self.pm.source(local) or "", local).findings
        for f in self._analyses[local]:
            if f.code == code and kdef.lineno - 1 <= f.span.line <= (kdef.end_lineno or 0) - 1:
                return local, f.span
        return None

    def spec(self, path: str, call: _Call, side: str, idx: int | None,
             num_prefetch: int) -> ast.AST | None:
        """The BlockSpec node for `args[idx]` / `outputs[idx]`."""
        key = "in_specs" if side == "args" else "out_specs"
        node = call.keywords.get(key)
        if node is None:
            return None
        tree = self.src.tree(path)
        if isinstance(node, ast.Name) and tree is not None:
            node = _assigned(call.scope, tree, node.id, call.node.lineno) or node
        if side == "args" and idx is not None:
            idx -= num_prefetch
        if isinstance(node, (ast.List, ast.Tuple)):
            if idx is None:
                idx = 0
            if 0 <= idx < len(node.elts) and not any(isinstance(e, ast.Starred)
                                                     for e in node.elts):
                return node.elts[idx]
            return node
        return node


# ---------------------------------------------------------------- diagnostics


def _kernel_position(rec: dict, pm: PathMap) -> tuple[str, Span, list] | None:
    """The kernel statement: an MLIR location in a user file, else JAX's
    before-transformation frames of the lowering error."""
    err = rec.get("error") or {}
    texts = [err.get("message") or ""] + [c.get("message") or "" for c in err.get("chain") or []]
    for text in texts:
        for m in _MLIR_LOC.finditer(text):
            local = pm.local(m.group("file"))
            if local is None:
                continue
            # jax writes Python's own positions: 0-based byte columns, exclusive end
            line, col = int(m.group("line")), int(m.group("col"))
            eline = int(m.group("eline") or line)
            ecol = int(m.group("ecol")) if m.group("ecol") else None
            span = pm.span(local, line, col, eline if ecol is not None else None, ecol)
            return local, span, []
    stacks = [rec.get("eqn_frames") or []] + [
        ex.get("frames") for ex in reversed(err.get("chain") or [])
        if ex.get("type", "").endswith("JaxStackTraceBeforeTransformation")]
    for stack in stacks:
        if stack:
            frames = _user_frames(stack, pm)
            if frames:
                path, fr = frames[-1]
                related = [RunRelated(pm.display(p), _frame_span(pm, p, f),
                                      f"called from `{f.get('name')}`")
                           for p, f in reversed(frames[:-1])]
                return path, _frame_span(pm, path, fr), related
    return None


def _call_position(pm: PathMap, path: str, call: _Call | None, call_span: Span | None,
                   fallback) -> tuple[str, Span] | None:
    """The pallas_call, else the user frame that bound it, else the test."""
    if call is not None:
        return path, _span_of(pm, path, call.node)
    if call_span is not None:
        return path, call_span
    if fallback is not None:
        return fallback[0], pm.span(fallback[0], fallback[1] + 1)
    return None


@dataclass
class _Failure:
    path: str
    span: Span
    code: str
    text: str  # the compiler's text, cleaned
    hint: str
    related: tuple
    nodeid: str | None


def _failure(rec: dict, pm: PathMap, loc: Locator, fallback) -> _Failure | None:
    err = rec.get("error") or {}
    raw = err.get("message") or ""
    text = clean_message(raw)
    if " " not in text.strip():  # a bare KeyError('bool') from the lowering: say what it is
        text = f"{(err.get('type') or 'Exception').rsplit('.', 1)[-1]}: {text}".rstrip(": ")
    kind = kind_of(raw)
    path, call, call_span = loc.call(rec)
    related: list[RunRelated] = []
    span = None
    if kind == "block" and call is not None:
        m = _ORIGIN.search(raw)
        w = _WINDOW.search(raw)
        node = None
        if m:
            idx = int(m.group("idx")) if m.group("idx") is not None else None
            node = loc.spec(path, call, m.group("side"), idx, rec.get("num_prefetch") or 0)
        elif w:
            side = "args" if w.group("side") == "input" else "outputs"
            node = loc.spec(path, call, side, int(w.group("idx")), 0)
        if node is not None:
            span = _span_of(pm, path, node)
    elif kind == "buffered" and call is not None:
        node = _buffered_spec(call, int(_BUFFERED.search(raw).group("n")), loc.src.tree(path))
        if node is not None:
            span = _span_of(pm, path, node)
    elif kind == "float16" and call is not None:
        node = _float16_scratch(call)
        if node is not None:
            span = _span_of(pm, path, node)
    if span is None and kind not in ("vmem", "partition"):
        kp = _kernel_position(rec, pm)
        if kp is not None:
            kpath, span, related = kp
            if call is not None and (kpath, span.line) != (path, call.node.lineno - 1):
                related.insert(0, RunRelated(pm.display(path), _span_of(pm, path, call.node),
                                             "the pallas_call compiled here"))
            path = kpath
    code = _code_of(raw)
    if span is None and call is not None and code != CODE_COMPILE and kind not in ("vmem", "partition"):
        found = loc.static_site(rec, code)
        if found is not None:  # `path` is still the pallas_call's file here
            related.insert(0, RunRelated(pm.display(path), _span_of(pm, path, call.node),
                                         "the pallas_call compiled here"))
            path, span = found
    if span is None:
        at = _call_position(pm, path, call, call_span, fallback)
        if at is None:
            return None
        path, span = at
    elif call_span is not None and call is not None and call_span.line != call.node.lineno - 1:
        related.append(RunRelated(pm.display(path), call_span, "called here"))
    return _Failure(pm.display(path), span, code, text, HINTS[kind], tuple(related[:6]),
                    rec.get("nodeid"))


def _code_of(raw: str) -> str:
    """The catalog code of a compiler message: the compiler's own wording
    first (_COMPILER_CODES), then the catalog's messages; PAL903 when no
    PAL4xx entry names it."""
    for pattern, code in _COMPILER_CODES:
        if pattern.search(raw):
            return code
    entry = _match(raw)
    return entry.code if entry is not None and (entry.code.startswith("PAL4")
                                                 or entry.code in COMPILER_CODES) else CODE_COMPILE


def _spec_nodes(call: _Call):
    for key in ("in_specs", "out_specs"):
        node = call.keywords.get(key)
        if isinstance(node, (ast.List, ast.Tuple)):
            yield from node.elts
        elif node is not None:
            yield node


def _buffered_spec(call: _Call, n: int, tree: ast.Module | None) -> ast.AST | None:
    """The BlockSpec written with `pipeline_mode=pl.Buffered(n)` (also one kept
    in a name above the call); with n not a literal there (a launcher's
    parameter), the only BlockSpec with a `Buffered(...)` at all."""
    def specs():
        for spec in _spec_nodes(call):
            if isinstance(spec, ast.Name) and tree is not None:
                spec = _assigned(call.scope, tree, spec.id, call.node.lineno) or spec
            yield spec

    def count(sub: ast.Call):
        arg = sub.args[0] if sub.args else next(
            (k.value for k in sub.keywords if k.arg == "buffer_count"), None)
        return arg.value if isinstance(arg, ast.Constant) else None

    found = [(spec, count(sub)) for spec in specs() for sub in ast.walk(spec)
             if isinstance(sub, ast.Call) and _name_of(sub.func) == "Buffered"]
    exact = [spec for spec, c in found if c == n]
    if exact:
        return exact[0]
    unknown = [spec for spec, c in found if c is None]
    return unknown[0] if len(unknown) == 1 and len(found) == 1 else None


def _float16_scratch(call: _Call) -> ast.AST | None:
    """The `scratch_shapes` entry that allocates float16 VMEM."""
    node = call.keywords.get("scratch_shapes")
    entries = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node] if node else []
    for entry in entries:
        if any(isinstance(sub, ast.Attribute) and sub.attr == "float16"
               for sub in ast.walk(entry)):
            return entry
    return None


def compile_diagnostics(records: list[dict], pm: PathMap,
                        fallback: tuple[str, int] | None) -> list[RunDiagnostic]:
    """One diagnostic per failure; the same failure on several generations
    (same place, same text) becomes one diagnostic naming them all."""
    loc = Locator(pm)
    groups: dict = {}
    for rec in records:
        if rec.get("ok") or not rec.get("error"):
            continue
        f = _failure(rec, pm, loc, fallback)
        if f is None:
            continue
        key = (f.path, f.span, f.code, f.text, f.nodeid)
        gens = groups.setdefault(key, (f, []))[1]
        if rec.get("gen") not in gens:
            gens.append(rec.get("gen"))
    out = []
    for f, gens in groups.values():
        label = f" [{f.nodeid}]" if f.nodeid else ""
        msg = f"{f.text} (compiling for TPU {', '.join(gens)}) {f.hint}{label}"
        out.append(RunDiagnostic(path=f.path, span=f.span, code=f.code, message=msg,
                                 severity=Severity.ERROR, related=f.related, test=f.nodeid))
    return out


def compile_summaries(records: list[dict], pm: PathMap) -> list[dict]:
    """One line per kernel and generation that compiled."""
    loc = Locator(pm)
    out = []
    seen = set()
    for rec in records:
        if not rec.get("ok"):
            continue
        path, call, call_span = loc.call(rec)
        if call is not None:
            line = call.node.lineno
        elif call_span is not None:
            line = call_span.line + 1
        else:
            line = 0
        name = (rec.get("kernel") or {}).get("name") or "pallas_call"
        shapes = ", ".join(rec.get("avals") or [])
        text = f"{name}({shapes}) compiled for TPU {rec.get('gen')} in {rec.get('seconds') or 0:.2f} s"
        if rec.get("vmem_used") is not None:
            limit = rec.get("vmem_limit")
            if limit is None:
                from pallas_lsp.engine.tpu import DEFAULT_SCOPED_VMEM
                limit = DEFAULT_SCOPED_VMEM.get(rec.get("gen"))
                shown = f"{fmt_bytes(limit)} (the default limit)" if limit else "?"
            else:
                shown = fmt_bytes(limit)
            text += f"; scoped VMEM {fmt_bytes(rec['vmem_used'])} of {shown}"
        where = f"{cwd_relative(pm.display(path))}:{line}: " if path else ""  # as the CLI shows it
        key = (where, text)
        if key in seen:
            continue
        seen.add(key)
        out.append({"path": pm.display(path) if path else None, "line": line, "kernel": name,
                    "gen": rec.get("gen"), "seconds": rec.get("seconds"),
                    "avals": list(rec.get("avals") or []),
                    "vmem_used": rec.get("vmem_used"), "vmem_limit": rec.get("vmem_limit"),
                    "text": where + text})
    return out



# ---------------------------------------------------------------- the run


DEFAULT_GENERATIONS = ("v5e", "v6e")  # the default compile of a run (CLI and editor)
GENERATIONS = ("v4", "v5e", "v5p", "v6e")  # = _compile.TOPOLOGIES (measured with libtpu 0.0.42)


def check_generations(gens) -> None:
    """Raises RunSpecError for anything but known generations or explicit
    topology names (`v5e:2x2`)."""
    from pallas_lsp.runs.target import RunSpecError

    if isinstance(gens, str) or not all(isinstance(g, str) for g in gens):
        raise RunSpecError("compile: a list of TPU generations, e.g. [\"v5e\", \"v6e\"]")
    for g in gens:
        if g in GENERATIONS:
            continue
        if re.fullmatch(r"v\d+[a-z]*:\d+(x\d+)*", g):
            continue
        raise RunSpecError(f"unknown TPU generation {g!r} (known: {', '.join(GENERATIONS)}; "
                           "or a topology such as v5e:2x2)")


def parse_generations(text: str) -> tuple[str, ...]:
    return tuple(g.strip() for g in (text or "").split(",") if g.strip())


def _crash(rec: dict, pm: PathMap, fallback, tail: list[str]) -> RunDiagnostic | None:
    """The child ended (libtpu aborted it) while compiling `rec`'s call."""
    at = _call_position(pm, *Locator(pm).call(rec), fallback)
    if at is None:
        return None
    path, span = at
    why = next((ln.split("] ", 1)[-1].strip() for ln in reversed(tail)
                if "Check failed" in ln or "SIGABRT" in ln or "Fatal" in ln), "")
    name = (rec.get("kernel") or {}).get("name") or "this pallas_call"
    nodeid = rec.get("nodeid")
    msg = (f"The TPU compiler crashed the process while compiling `{name}` for TPU "
           f"{rec.get('gen')}" + (f": {why[:400]}" if why else "") + ". The run stopped there; "
           "run without --compile to finish it, and try another generation or operand dtype."
           + (f" [{nodeid}]" if nodeid else ""))
    return RunDiagnostic(path=pm.display(path), span=span, code=CODE_COMPILE, message=msg,
                         test=nodeid)


def setup_hint(problem: str, reports: list[dict]) -> str:
    """What to do about a compile set-up error, named by its real cause: only
    a missing libtpu gets the install hint (the child says whether libtpu is
    importable); a lock held by another libtpu user is not a missing libtpu."""
    low = problem.lower()
    if "lockfile" in low or "lock file" in low:
        return (" (another process holds libtpu's lock: a program on a real TPU, or one started"
                " with ALLOW_MULTIPLE_LIBTPU_LOAD=0; compile runs without a TPU share libtpu with"
                " each other. Let that process finish; deleting the lock file under it breaks it)")
    installed = [(r.get("compile") or {}).get("libtpu") for r in reports]
    if False in installed or "no module named 'libtpu'" in low:
        return " (compiling for a TPU needs libtpu: pip install 'jax[tpu]')"
    return ""


def apply_compiles(res, reports: list[dict], pm: PathMap, fallback,
                   tail: list[str] | None = None, *, auto: bool = False) -> None:
    """Adds the compile failures to `res.diagnostics`, the successes to
    `res.compiles`, and fixes the status (a failure to compile fails the run;
    a compile set-up error, e.g. libtpu missing, is an `error`)."""
    from pallas_lsp.runs.mapping import dedupe
    from pallas_lsp.runs.model import Status

    records = [rec for r in reports for rec in (r.get("compiles") or [])]
    setup = next((rec.get("setup_error") for rec in records if rec.get("setup_error")), None)
    error = next(((r.get("compile") or {}).get("error") for r in reports
                  if (r.get("compile") or {}).get("error")), None)
    diags = compile_diagnostics(records, pm, fallback)
    for r in reports:
        if r.get("compiling") and not r.get("finished"):
            crash = _crash(r["compiling"], pm, fallback, tail or [])
            if crash is not None:
                diags.append(crash)
                # it replaces the bare "failed without a Python exception"
                res.diagnostics = [d for d in res.diagnostics
                                   if not d.message.startswith("The run failed (")]
    res.compiles = compile_summaries(records, pm)
    res.diagnostics = dedupe(res.diagnostics + diags)
    if res.status in (Status.CANCELLED, Status.TIMEOUT):
        return
    problem = error or setup
    skipped = next(((r.get("compile") or {}).get("skipped") for r in reports
                    if (r.get("compile") or {}).get("skipped")), None)
    if auto and (skipped or problem) and not records:
        # the default compile, not asked for: the run keeps its own verdict, and its
        # summary says what was not checked and how to check it
        why = skipped or problem
        res.compile_skipped = (why + " (pip install 'jax[tpu]' to check them; --no-compile "
                               "to stop this note)") if skipped else why + setup_hint(why, reports)
        return
    if problem:
        problem += setup_hint(problem, reports)
        res.status = Status.ERROR
        res.error = res.error or f"could not compile for TPU: {problem}"
    elif diags and res.status is Status.PASSED:
        res.status = Status.FAILED
