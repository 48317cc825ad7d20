"""The abstract interpreter over Python ASTs that knows Pallas, composed.

It runs a module's functions on abstract values (model.Ref, Array, Descriptor,
...) instead of data: kernels found at `pallas_call` / `pl.kernel` /
`core_map` sites get their parameters bound as JAX binds them (binding/);
helpers are entered with the caller's values; loops, `pl.when`,
`run_scoped`, `fori_loop` and `emit_pipeline` bodies are walked. API calls
that matter to rules are recorded as events (events.py). Whatever it cannot
model becomes Unknown, and Unknown never yields a diagnostic.

This module only composes the `Interpreter` from one mixin per job (the
driver, imports, definitions, statements, expressions, containers, calls,
recorded names), holds its state (`__init__`) and dispatches each node to
its `stmt_<Node>` / `expr_<Node>` method through a per-type table."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import backend, standalone, syntax
from pallas_lsp.engine.events import Events
from pallas_lsp.engine.frames import MAX_STEPS, Budget, Frame, Module, Scope, Work, real_path
from pallas_lsp.engine.interp.calls import CallsMixin
from pallas_lsp.engine.interp.classes import DefinitionsMixin
from pallas_lsp.engine.interp.driver import DriverMixin
from pallas_lsp.engine.interp.expressions import ExpressionsMixin
from pallas_lsp.engine.interp.imports import ImportsMixin
from pallas_lsp.engine.interp.names import NamesMixin
from pallas_lsp.engine.interp.sequences import SequencesMixin
from pallas_lsp.engine.interp.statements import StatementsMixin
from pallas_lsp.engine.model import Api, Const, Func, Value
from pallas_lsp.engine.source import Source
from pallas_lsp.engine.values import UNKNOWN, ClassVal


class Interpreter(DriverMixin, ImportsMixin, DefinitionsMixin, StatementsMixin, ExpressionsMixin,
                  SequencesMixin, CallsMixin, NamesMixin):
    """Runs one file (and what it imports) on abstract values: `run()` (the
    driver), then the results are read from `events`, `names`, `kernels`,
    `deps`... (analyze.py). Behaviour lives in the mixins, one job each;
    here: the state they share, and node dispatch (`exec_stmt`, `eval`)."""

    def __init__(self, src: Source, path: str | None = None, *, project=None,
                 parse_missing: bool = True, names: bool = True):
        self.src = src
        self.want_names = names  # False: nobody will hover (the command line)
        self.path = path
        self.project = project  # project.Project: the user's other files
        self.parse_missing = parse_missing  # False: only files already parsed (edit path)
        self.root = Module(path or "", src)
        self.modules: dict[str, Module] = {}
        if path:
            # (the project remembers real paths: a realpath is a stat per folder)
            self.modules[project.realpath(path) if project is not None else real_path(path)] = \
                self.root
        self.missing: set[str] = set()  # files wanted but not parsed (parse_missing=False)
        self.sites: dict[int, ast.AST] = {}  # id(node in another file) -> call here
        self.file_backend = backend.of_file(src.tree)
        self.kernel_backend: dict[int, str] = {}
        self.events = Events(module=src.tree)
        # Name node -> [node, values, is_param, is_assign, [(site, value) of provisional runs]]
        self.names: dict[ast.AST, list] = {}
        self.provisional_site: int | None = None  # see names.py
        self.operand_run_sites: set[int] = set()
        self._consts: dict[ast.Constant, Const] = {}
        self._api_attrs: dict[tuple, Api] = {}  # (attribute node, base name) -> Api
        self._param_names: dict[int, ast.Name] = {}  # id(ast.arg) -> a Name node at its place
        self.kernels: list[str] = []
        self.module_scope = self.root.scope
        self._scopes: list[Scope] = [self.module_scope]  # every scope made (see release)
        self._memo: dict[tuple, Value] = {}
        self._active: set[tuple] = set()
        self._entered: set[int] = set()  # function nodes already run at least once
        self._closures: dict[int, Func] = {}  # nested def node -> Func in its first closure
        self._func_defaults: dict[int, Func] = {}  # id(default expr) -> the def it named
        self._buffered_methods: dict[int, ClassVal] = {}  # BufferedRef override -> its class
        self._method_class: dict[int, ClassVal] = {}  # other methods -> their class
        self._unknown_run: set[int] = set()  # ... and those run with unknown arguments
        # Defs run on their own that returned a function or launched a kernel
        # through a callee: their flag variants are run too.
        self._builders: set[int] = set()
        self._straight: dict[int, bool] = {}  # For node -> no break/continue/return in it
        self._steps = 0
        self.work = Work()  # calls entered, variants run, what was not followed (frames.py)
        self._bool_truth: dict[int, bool] = {}  # BoolOp node -> its truth on every path
        self.pending: list = []  # pallas_call results whose kernel waits for call args
        self.pending_pipelines: list = []  # emit_pipeline results (run when called)
        self.pending_kernels: list = []  # pl.kernel results with inputs (run when called)
        self.kernels_done: set = set()  # (launch site, kernel) already run
        self._kernel_runs_by_args: dict[tuple, tuple] = {}  # see same_kernel_run
        self._free: dict[int, tuple] = {}  # id(def node) -> names it reads from outside
        self.branch_free: dict[int, tuple] = {}  # ... those of them its branch tests read
        self._first_nested: dict[int, tuple] = {}  # nested kernel run once: its closure then
        self._loop_reads: dict[int, frozenset] = {}  # id(loop node) -> names it reads
        self.kernel_runs: dict[int, int] = {}  # launch site -> kernels run there
        self.operand_nodes: dict[int, list] = {}  # id(pallas_call node) -> its call's argument nodes
        self.api_calls: list = []  # (node, api, args, kwargs) of Pallas calls in this file
        self.active_kernel = 0  # kernel of the frame being executed (for events)
        self.kernel_count = 0
        self._escaped_funcs: list[Func] = []  # functions handed to jax.jit, shard_map, ...
        self._escaped_runs: dict[int, set] = {}  # id(def) -> closure keys it ran escaped with
        self._idle_defs: set[int] = set()  # defs here that name nothing Pallas (relevance.py)
        self._kernel_only: standalone.KernelCode | None = None  # which defs here only kernels run
        self._module_defs: dict | None = None  # module-level defs by name (driver._defs_by_name)
        self._unbound: frozenset | None = None  # names the file never binds (standalone.py)
        self._escaping: set = set()  # instances already escaped (they may refer to themselves)
        self._root_stmt: ast.AST | None = None  # statement of the analysed file being run
        self.active_site: ast.AST | None = None  # Frame.site of the code being run (for events)
        self.deps: set[str] = set()  # other files read
        self.incomplete: str | None = None  # why the analysis stopped early, if it did
        self._property_frame: Frame | None = None  # where a property getter runs from
        self.variant: object = 0  # which launcher flag combination is running (0: none)
        # id(Assign node) -> the truth value a local flag takes in this variant
        # when the engine cannot compute it (see variants.local_flag_pins).
        self.pins: dict[int, Value] = {}

    def exec_body(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            if frame.left:
                return
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, node: ast.stmt, frame: Frame) -> None:
        self._steps += 1
        if self._steps > MAX_STEPS:
            raise Budget()
        if frame.site is None and (frame.mod is None or frame.mod is self.root):
            self._root_stmt = node
        method = _STMT.get(type(node))
        if method is not None:
            method(self, node, frame)
        else:
            # Unmodelled statement: still evaluate nested expressions so API
            # calls inside are seen.
            for child in syntax.children(node):
                if isinstance(child, ast.expr):
                    self.eval(child, frame)
                elif isinstance(child, ast.stmt):
                    self.exec_stmt(child, frame)

    def eval(self, node: ast.expr | None, frame: Frame) -> Value:
        if node is None:
            return UNKNOWN
        steps = self._steps = self._steps + 1
        if steps > MAX_STEPS:
            raise Budget()
        if frame.site is not None:
            self.sites.setdefault(id(node), frame.site)
        method = _EXPR.get(node.__class__)
        if method is None:
            for child in syntax.children(node):
                if isinstance(child, ast.expr):
                    self.eval(child, frame)
            return UNKNOWN
        return method(self, node, frame)


if TYPE_CHECKING:
    from pallas_lsp.engine.host import LaunchHost

    def _is_a_host(interp: Interpreter) -> LaunchHost:
        """For type checkers: the Interpreter is what apis/ and binding/ are given."""
        return interp


def _handlers(prefix: str) -> dict:
    """Node type -> handler (`stmt_If`, `expr_Call`...), from every mixin."""
    out = {}
    for klass in reversed(Interpreter.__mro__):
        for n, f in vars(klass).items():
            if n.startswith(prefix) and hasattr(ast, n[len(prefix):]):
                out[getattr(ast, n[len(prefix):])] = f
    return out


# One dict lookup per node.
_STMT = _handlers("stmt_")
_EXPR = _handlers("expr_")
