"""Kernels no launch in the analysed code reaches (their launcher lives in
a file not opened, or nowhere yet).

A function that calls a DMA or semaphore API can only run inside a kernel,
and a parameter it uses as a Ref (`p.at[...]`, `p[...] = v`, handed to a
DMA or semaphore call as a Ref) or names as one (`x_ref`, `x_hbm`) is a Ref
whatever launch binds it. Run as kernel code with those Refs, such a
function still gets the checks that do not depend on the launch: Ref-ness
of DMA arguments, descriptor methods, priorities, device ids. What the
launch decides (shapes, memory spaces, semaphore kinds) stays unknown, and
so does the kernel around the function: no claims about its start/wait
protocol are made."""
from __future__ import annotations

import ast

from pallas_lsp.engine import syntax
from pallas_lsp.engine.variants import LAUNCH_NAMES

_LAUNCHES = LAUNCH_NAMES | {"emit_pipeline", "run_scoped"}
# Positions of the Ref arguments of each kernel-only call.
_REF_POSITIONS = {"make_async_copy": (0, 1, 2), "async_copy": (0, 1, 2), "sync_copy": (0, 1),
                  "make_async_remote_copy": (0, 1, 2, 3), "async_remote_copy": (0, 1, 2, 3),
                  "semaphore_signal": (0,), "semaphore_wait": (0,), "semaphore_read": (0,)}
_REF_KEYWORDS = {"src_ref", "dst_ref", "sem", "send_sem", "recv_sem", "sem_or_view"}
# Pallas' naming convention for Refs (`x_ref`, `x_hbm`, `buf_vmem`), also
# evidence where the only use is the one a bug changed (`copy(x_ref[...])`).
_REF_SUFFIXES = ("_ref", "_hbm", "_vmem", "_smem")
# `x.at[i].set(v)`: a jax array's functional update, not a Ref.
_ARRAY_UPDATES = {"set", "add", "multiply", "mul", "divide", "min", "max", "get", "apply",
                  "power"}


def named_as_ref(name: str) -> bool:
    return name.endswith(_REF_SUFFIXES) or name == "ref"


def _tail(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else ""


def ref_params(func: ast.AST) -> list[str]:
    """The positional parameters of `func` used or named as Refs; [] when
    `func` is not kernel-only code (no DMA or semaphore call of its own) or
    launches a kernel itself (then it is a launcher, run as one)."""
    a = getattr(func, "args", None)
    if a is None:
        return []
    params = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    if not params or params[0] in ("self", "cls"):
        return []
    kernel_only = False
    refs: set[str] = set()
    arrays: set[str] = set()
    for node in syntax.walk(func):
        if isinstance(node, ast.Call):
            tail = _tail(node.func)
            if tail in _LAUNCHES:
                return []
            positions = _REF_POSITIONS.get(tail)
            if positions is None:
                continue
            kernel_only = True
            refs.update(node.args[i].id for i in positions
                        if i < len(node.args) and isinstance(node.args[i], ast.Name))
            refs.update(k.value.id for k in node.keywords
                        if k.arg in _REF_KEYWORDS and isinstance(k.value, ast.Name))
        elif isinstance(node, ast.Subscript):
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "at" and isinstance(v.value, ast.Name):
                refs.add(v.value.id)
            elif isinstance(node.ctx, ast.Store) and isinstance(v, ast.Name):
                refs.add(v.id)  # `p[...] = v`: arrays are immutable in kernel code
        elif isinstance(node, ast.Attribute) and node.attr in _ARRAY_UPDATES \
                and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Attribute) \
                and node.value.value.attr == "at" and isinstance(node.value.value.value, ast.Name):
            arrays.add(node.value.value.value.id)
    if not kernel_only:
        return []
    return [p for p in params if (p in refs or named_as_ref(p)) and p not in arrays]

