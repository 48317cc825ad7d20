"""What every launcher family shares: recording a launch (`new_launch`),
reading a kernel's positional parameters, laying the launch's parameter
segments (prefetch, inputs, outputs, scratch; some of unknown count) onto
them (`segments_to_args`), and running the kernel body as kernel code
(`bind_and_run`), unless the values reaching the launch are ones the
program's own `assert` refused (`refuted`)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine.events import Arg, Launch
from pallas_lsp.engine.frames import REFUTED
from pallas_lsp.engine.model import Const, Func, Value
from pallas_lsp.engine.values import STAR_UNKNOWN, UNKNOWN

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import LaunchHost


def arg_value(arg: Arg | None) -> Value | None:
    return arg.value if arg is not None else None


def segments_to_args(segments: list[list[Value] | None], params: list[str], required: int,
                      has_vararg: bool, tail: list[Value] = (),
                      star: Value = STAR_UNKNOWN) -> tuple[list[Value] | None, str]:
    """Lay the kernel's parameter segments (prefetch, inputs, outputs,
    scratch; None = count unknown) onto its positional parameters. Known
    segments bind from the front up to the first unknown one, and from the
    back after the last unknown one when the signature leaves no doubt (no
    `*args`, no defaults). Returns (args, reason when nothing binds)."""
    if all(seg is not None for seg in segments):
        args = [v for seg in segments for v in seg]
        if not has_vararg and not (required <= len(args) <= len(params)):
            return None, (f"the kernel takes {len(params)} positional parameters but the "
                          f"launch binds {len(args)}")
        return args, ""
    first = next(i for i, seg in enumerate(segments) if seg is None)
    last = max(i for i, seg in enumerate(segments) if seg is None)
    front = [v for seg in segments[:first] for v in seg]
    back = [v for seg in segments[last + 1:] for v in seg]
    if segments[-1] is None and tail:
        back = list(tail)  # the known last scratch entries
    if has_vararg and len(front) >= len(params):
        return front + [star] + back, ""  # `*refs` knows its first and last items
    if has_vararg or required != len(params) or (not back and len(front) < len(params)):
        if len(front) > len(params) and not has_vararg:
            return None, "the launch binds more parameters than the kernel takes"
        return front + [STAR_UNKNOWN], ""
    middle = len(params) - len(front) - len(back)
    if middle < 0:
        return None, "the launch binds more parameters than the kernel takes"
    return front + [UNKNOWN] * middle + back, ""


def count_required(func: Func, params: list[str]) -> int:
    """How many of `params` have no default value."""
    a = func.node.args
    positional = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    defaults = positional[len(positional) - len(a.defaults):] if a.defaults else []
    return sum(1 for p in params if p not in defaults)


def positional_params(func: Func):
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    a = node.args
    names = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    names = names[len(func.bound_args):]
    bound_kw = {k for k, _ in func.bound_kwargs}
    names = [n for n in names if n not in bound_kw]
    return names, a.vararg is not None


def new_launch(host: LaunchHost, api_name: str, node, func: Value, be: str, **values) -> Launch:
    knode = getattr(func, "node", None)
    launch = Launch(api=api_name, node=node, kernel=getattr(knode, "name", ""),
                    kernel_node=knode, bound=False, backend=be, **values)
    host.events.launches.append(launch)
    return launch


def refuted(launch: Launch, frame: Frame) -> bool:
    """The launch runs under a builder whose own `assert` the engine computed
    false (`frames.REFUTED`): its values are not the ones that run, so it is
    not bound, and coverage says why."""
    at = frame.scope.lookup(REFUTED)
    if not isinstance(at, Const):
        return False
    launch.reason = (f"the values reaching this launch fail the `assert` on line {at.value}: "
                     "they are not the ones that run")
    return True


def bind_and_run(host: LaunchHost, launch: Launch, func: Func, args: list[Value],
                  kw: dict[str, Value], frame: Frame, params: list[str] | None = None) -> None:
    if refuted(launch, frame):
        return
    launch.bound = True
    launch.kernel_id = host.kernel_count + 1 if not frame.kernel_id else frame.kernel_id
    host.kernels.append(getattr(func.node, "name", "<lambda>"))
    origins = {p: v.origin for p, v in zip(params or [], args) if isinstance(v, Value) and v.origin}
    host.call_func(func, args, kw, frame, kernel=True, param_origin=origins,
                     call_node=launch.node, backend_name=launch.backend)
