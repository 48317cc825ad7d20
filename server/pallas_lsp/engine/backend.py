"""Which compiler a kernel is written for: Mosaic TPU (and SparseCore),
Mosaic GPU or Triton. The rules know TPU semantics (what interpret mode and
the TPU compiler accept); a GPU kernel doing the same thing may be correct,
so only TPU kernels are judged.

A kernel's backend comes from its launch (compiler params, mesh, the
`backend=` argument, the launching API), else from the file's imports: a
file that imports Pallas' GPU modules and not its TPU ones is GPU code.
"""
from __future__ import annotations

import ast
import re
import sys

from pallas_lsp.engine.events import Events, code_events, without_kernels
from pallas_lsp.engine.model import Api, Const, Seq, Value
from pallas_lsp.engine.records import frozen

TPU, GPU, TRITON = "tpu", "gpu", "triton"
SPARSECORE = "sparsecore"  # a TPU's SparseCore (its own lowering rules), not its TensorCore


@frozen
class Hint(Value):
    """The result of an API call that names a backend (CompilerParams,
    a mesh constructor, ...); `core`: SPARSECORE for SparseCore meshes."""

    backend: str = TPU
    core: str = ""


def sparsecore_mesh(v: Value | None) -> bool:
    """A SparseCore mesh, or a list of meshes with one (`mesh=[scs, vec]`), or
    compiler params naming a SparseCore kernel type (`kernel_type=SC_...`)."""
    if isinstance(v, Hint):
        return v.core == SPARSECORE
    return isinstance(v, Seq) and any(sparsecore_mesh(x) for x in v.items)


def sparsecore_kernels(events: Events) -> set[int]:
    """The kernels launched on a SparseCore, whose lowering differs from the
    TensorCore's (gathers, `add=True` DMAs, its own tiling)."""
    return {la.kernel_id for la in events.launches if la.core == SPARSECORE and la.kernel_id}


def of_api(name: str) -> str | None:
    """The backend an API belongs to, from its canonical name."""
    if "mosaic_gpu" in name or name.startswith("plgpu."):
        return GPU
    if "triton" in name:
        return TRITON
    if name.startswith("pltpu.") or ".tpu_sc" in name or name.startswith("pl.tpu_sc"):
        return TPU
    return None


def of_value(v: Value | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, Hint):
        return v.backend
    if isinstance(v, Api):
        return of_api(v.name)
    if isinstance(v, Const) and isinstance(v.value, str):
        s = v.value.lower()
        if s in ("triton",):
            return TRITON
        if s in ("mosaic_gpu", "gpu"):
            return GPU
        if s in ("mosaic", "mosaic_tpu", "tpu"):
            return TPU
    if isinstance(v, Seq) and v.keys is not None:  # compiler_params={"mosaic": ...}
        for k in v.keys:
            found = of_value(Const(value=k)) if isinstance(k, str) else None
            if found:
                return found
    return None


def of_launch(*values: Value | None) -> str | None:
    for v in values:
        found = of_value(v)
        if found:
            return found
    return None


def of_file(tree: ast.Module) -> str:
    """GPU when the file imports Pallas' GPU modules and none of its TPU ones."""
    gpu = tpu = False
    for node in _top_level(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            if "pallas.mosaic_gpu" in n or "pallas.triton" in n or n.startswith("jax_triton") \
                    or "mosaic.gpu" in n:
                gpu = True
            elif "pallas.tpu" in n or "pallas.mosaic" in n or n.endswith("pallas.tpu_sc"):
                tpu = True
    return GPU if gpu and not tpu else TPU


# Anything that can make a kernel a TPU one: a TPU module or API, the
# `"mosaic"` compiler-params key or backend name ("output" is not "tpu").
_TPU_TEXT = re.compile(r"(?i)(?<![a-z])tpu|pltpu|[\"']mosaic[\"']")
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import|import[ \t]+([^#\n]+))",
                      re.M)


def names_tpu(text: str) -> bool:
    """Does this text's code say that it is for a TPU (a TPU module or API,
    the word, the "mosaic" compiler-params key)? Not in a comment: a
    commented-out `# from jax.experimental.pallas import tpu` says the
    opposite."""
    for m in _TPU_TEXT.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if "#" not in text[start:m.start()]:
            return True
    return False


def gpu_only(tree: ast.Module, text: str, libraries: set[str]) -> bool:
    """Can every kernel of this file only be a GPU one? It imports Pallas' GPU
    modules and none of its TPU ones, its text names nothing TPU, and it
    imports only libraries (so no helper of the user's can launch a TPU kernel
    from here). Then no rule has anything to judge in it."""
    if of_file(tree) != GPU or _TPU_TEXT.search(text):
        return False
    return imports_only_libraries(text, libraries)


def imports_only_libraries(text: str, libraries: set[str]) -> bool:
    """Does the file import only `libraries` and the standard library (no
    relative import, no module of the user's)? By its import lines."""
    known = libraries | set(sys.stdlib_module_names)
    for m in _import_lines(text):
        dots, module, names = m.groups()
        if dots:
            return False  # a relative import: the user's own code
        roots = [module] if names is None else [n.strip() for n in names.split(",")]
        for root in roots:
            if root.split(".")[0].split(" ")[0].strip("()\\") not in known:
                return False
    return True


def _import_lines(text: str):
    """`_IMPORTS.finditer(text)`, tried only at the start of lines that say
    `import`: a multi-line `^` pattern is tried at every position of the text."""
    i = text.find("import")
    while i >= 0:
        start = text.rfind("\n", 0, i) + 1
        m = _IMPORTS.match(text, start)
        if m is not None:
            yield m
        end = text.find("\n", i)
        if end < 0:
            return
        i = text.find("import", end)


def _top_level(tree: ast.Module):
    """Top-level statements, including those under a top-level if/try
    (imports live there; walking every node would cost as much as a parse)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for name in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(node, name, [])))
            for h in getattr(node, "handlers", []):
                stack.extend(reversed(h.body))


def tpu_only(events: Events, kernel_backend: dict[int, str], file_backend: str) -> Events:
    """The events of TPU kernels (and, outside any kernel, of TPU files): code
    seen inside a GPU kernel is GPU code, also where it ran on its own."""
    if file_backend == TPU and all(b == TPU for b in kernel_backend.values()):
        return events
    others = {e.kernel_id for group in code_events(events) for e in group
              if e.kernel_id and kernel_backend.get(e.kernel_id, file_backend) != TPU}
    return without_kernels(events, others, keep_free=file_backend == TPU)
