"""What the library models may ask of the interpreter: the narrow interface
(`typing.Protocol`s) that apis/ and binding/ are written against, so that
they never import the interpreter (the `Interpreter` satisfies both). `Host`
is what an API model needs: call a value it was given (a function, an API),
report an event for the running kernel (`events`, `active_kernel`,
`active_site`), escape what it cannot follow. `LaunchHost` adds what
binding a launch needs: the launch bookkeeping (kernels run per site,
launches waiting for their operands, operand nodes), the backend of the
file and of each kernel, and methods of the user's classes and of
modelled values (a kernel that is a callable instance, `pl.when(c)(copy.start)`).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pallas_lsp.engine.events import Arg, Events
    from pallas_lsp.engine.frames import Frame, Scope
    from pallas_lsp.engine.model import Func, Value
    from pallas_lsp.engine.values import Bound, ClassVal


class Host(Protocol):
    """The interpreter as an API model (apis/) sees it."""

    events: Events  # where facts about the kernel are reported (events.py)
    active_kernel: int  # the kernel the running code belongs to (0: none)
    active_site: ast.AST | None  # the call here through which other files' code runs

    def call(self, func: Value, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
             frame: Frame) -> Value:
        """Call any value (a function, a bound method, an API...) as Python would."""

    def call_func(self, func: Func, args: list[Value], kwargs: dict[str, Value], frame: Frame, *,
                  unknown_params: bool = False, kernel: bool | None = None,
                  param_origin: dict | None = None, call_node: ast.AST | None = None,
                  backend_name: str | None = None) -> Value:
        """Run a user function with these argument values."""

    def call_api(self, name: str, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
                 frame: Frame) -> Value:
        """Call a Pallas / JAX API by its canonical name (routed to apis/)."""

    def escape(self, value: Value) -> None:
        """`value` goes where the engine cannot follow (its fate is unknown)."""


class LaunchHost(Host, Protocol):
    """The interpreter as a launch binding (binding/) sees it."""

    file_backend: str  # the backend the file's imports suggest (backend.py)
    kernel_backend: dict[int, str]  # kernel id -> its backend
    variant: object  # the launcher flag combination running (0: none)
    module_scope: Scope
    kernels: list[str]  # names of the kernels bound
    kernels_done: set  # (launch site, kernel) already run
    kernel_runs: dict  # (launch site, kernel def) -> runs of that def there
    kernel_count: int  # kernel ids given so far (the next run is kernel_count + 1)
    pending: list  # pallas_call results whose kernel waits for call args
    pending_pipelines: list  # emit_pipeline results (run when called)
    pending_kernels: list  # pl.kernel results with inputs (run when called)
    operand_nodes: dict[int, list]  # id(pallas_call node) -> its call's argument nodes
    provisional_site: int | None  # a launch site's run before its operands (names.py)
    operand_run_sites: set[int]  # launch sites that ran again with their operands
    branch_free: dict[int, tuple]  # id(def) -> closure names its branch tests read (flow.py)

    def same_kernel_run(self, kernel: Func, args: list, kwargs: dict, backend_name: str,
                        frame: Frame) -> int | None:
        """The id of an earlier run of this kernel with equal arguments, or None."""

    def call_method(self, bound: Bound, args: list[Arg], kwargs: dict[str, Arg],
                    node: ast.Call, frame: Frame) -> Value:
        """Call a method of a modelled value (`copy.start`, `ref.reshape`)."""

    def method_value(self, cls: ClassVal, name: str, obj: Value | None) -> Value | None:
        """`obj.name` for a method of one of the user's classes."""
