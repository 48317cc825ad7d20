"""An abstract interpreter over Python ASTs that knows Pallas.

It runs a module's functions on abstract values (model.Ref, Array, Descriptor,
...) instead of data: kernels found at `pallas_call` / `pl.kernel` /
`core_map` sites get their parameters bound as JAX binds them; helpers are
entered with the caller's values; loops, `pl.when`, `run_scoped`,
`fori_loop` and `emit_pipeline` bodies are walked. API calls that matter to
rules are recorded as events (events.py). Whatever it cannot model becomes
Unknown, and Unknown never yields a diagnostic.
"""
from __future__ import annotations

import ast
import sys
import threading
from dataclasses import field

from pallas_lsp.engine import (api, apis, backend, binding, buffered, flow, pyops, relevance,
                               standalone, syntax, variants)
from pallas_lsp.engine.apis import kernels, pytrees
from pallas_lsp.engine.events import Arg, DescOp, Events, KernelOp, RefAccess
from pallas_lsp.engine.model import (Api, Array, Const, Descriptor, Func, NameInfo, Ref, Seq, Space,
                                     Value)
from pallas_lsp.engine.records import record, replace
from pallas_lsp.engine.source import Source
from pallas_lsp.engine.values import declared, instance_writes
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, VARARGS, Alloc, AtProxy, Bound,
                                      Choice, ClassVal, GridSpec, Imported, Instance, Iter, ModuleRef,
                                      Partial, SeqOf, ShapeDtype, SliceVal, Spec, StarUnknown, TextPrefix,
                                      as_view, iter_of, join, join_all)

MAX_DEPTH = 24  # nested helper calls followed from one kernel
MAX_LOOP_UNROLL_DEPTH = 2  # loops nested deeper than this run their body once
MAX_STEPS = 400_000  # statements+expressions per file: bounds time on huge inputs

_LAUNCH_TAILS = tuple("." + name for name in variants.LAUNCH_NAMES)
_COST = ("cost_estimate",)

# Statements (and parts of them) that hold other statements.
_HAS_BODY = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor,
             ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match, ast.excepthandler,
             ast.match_case) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())

MAX_MODULES = 64  # other files one analysis may read (imports of imports included)
# Imports from these never lead to user helpers worth summarising.
LIBRARY_ROOTS = {"jax", "jaxlib", "numpy", "np", "functools", "math", "typing", "dataclasses",
                  "collections", "itertools", "os", "sys", "enum", "abc", "re", "logging",
                  "contextlib", "operator", "absl", "flax", "optax", "torch", "scipy"}


class Budget(Exception):
    """Raised when the step budget is spent; the analysis keeps what it has."""


class Module:
    """One file as the interpreter runs it: its source and global scope."""

    __slots__ = ("path", "src", "scope")

    def __init__(self, path: str, src: Source):
        self.path = path
        self.src = src
        self.scope = Scope(module=self)


# The scopes made by the analysis running on this thread (see Interpreter.release).
_made = threading.local()


class Scope:
    """Variables of one function activation, chained to the enclosing scope."""

    __slots__ = ("vars", "parent", "module")

    def __init__(self, parent: Scope | None = None, vars: dict | None = None,
                 module: Module | None = None):
        self.vars: dict[str, Value] = vars if vars is not None else {}
        self.parent = parent
        self.module = module if module is not None else (parent.module if parent else None)
        made = getattr(_made, "scopes", None)
        if made is not None:
            made.append(self)

    def lookup(self, name: str) -> Value | None:
        s: Scope | None = self
        while s is not None:
            v = s.vars.get(name)
            if v is not None:
                return v
            s = s.parent
        return None

    def rebind(self, name: str, value: Value) -> None:
        """Assign where the name lives: `next(it)` in a comprehension or a
        nested function advances the enclosing scope's iterator."""
        s: Scope | None = self
        while s is not None:
            if name in s.vars:
                s.vars[name] = value
                return
            s = s.parent
        self.vars[name] = value

    def fork(self) -> Scope:
        return Scope(self.parent, dict(self.vars), self.module)

    def merge(self, a: Scope, b: Scope, lost=None) -> None:
        av, bv, out = a.vars, b.vars, self.vars
        for name, va in av.items():
            vb = bv.get(name)
            if vb is va or vb is None:
                out[name] = va  # the common case: a name neither side changed
                continue
            out[name] = joined = join(va, vb)
            if joined is UNKNOWN and lost is not None:
                lost(va, vb)
        for name, vb in bv.items():
            if name not in av:
                out[name] = vb


@record
class Frame:
    scope: Scope
    kernel: bool  # inside a kernel (names are recorded for hover)
    depth: int = 0
    kernel_id: int = 0
    loop_depth: int = 0
    returns: list[Value] = field(default_factory=list)
    yields: list[Value] | None = None  # a generator's yielded values
    # Set by `return` (and `raise`, see stmt_Raise): the rest of the block is
    # not run, and a branch that left does not flow into the code after its `if`.
    left: bool = False
    undecided: int = 0  # how many undecided branches enclose the running code
    mod: Module | None = None  # the file whose code runs (None: the analysed file)
    # The call in the analysed file through which this frame was reached,
    # when its code is in another file (findings there are also shown here).
    site: ast.AST | None = None


class Interpreter:
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
            self.modules[_real(path)] = self.root
        self.missing: set[str] = set()  # files wanted but not parsed (parse_missing=False)
        self.sites: dict[int, ast.AST] = {}  # id(node in another file) -> call here
        self.file_backend = backend.of_file(src.tree)
        self.kernel_backend: dict[int, str] = {}
        self.events = Events()
        self.names: dict[ast.AST, list] = {}  # Name node -> [node, value, is_param, is_assign]
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
        self._buffered_methods: dict[int, ClassVal] = {}  # BufferedRef override -> its class
        self._method_class: dict[int, ClassVal] = {}  # other methods -> their class
        self._unknown_run: set[int] = set()  # ... and those run with unknown arguments
        # Defs run on their own that returned a function or launched a kernel
        # through a callee: their flag variants are run too.
        self._builders: set[int] = set()
        self._straight: dict[int, bool] = {}  # For node -> no break/continue/return in it
        self._steps = 0
        self._bool_truth: dict[int, bool] = {}  # BoolOp node -> its truth on every path
        self.pending: list = []  # pallas_call results whose kernel waits for call args
        self.pending_pipelines: list = []  # emit_pipeline results (run when called)
        self.pending_kernels: list = []  # pl.kernel results with inputs (run when called)
        self.kernels_done: set = set()  # (launch site, kernel) already run
        self._kernel_runs_by_args: dict[tuple, tuple] = {}  # see same_kernel_run
        self._free: dict[int, tuple] = {}  # id(def node) -> names it reads from outside
        self._first_nested: dict[int, tuple] = {}  # nested kernel run once: its closure then
        self._loop_reads: dict[int, frozenset] = {}  # id(loop node) -> names it reads
        self.kernel_runs: dict[int, int] = {}  # launch site -> kernels run there
        self.operand_nodes: dict[int, list] = {}  # id(pallas_call node) -> its call's argument nodes
        self.api_calls: list = []  # (node, api, args, kwargs) of Pallas calls in this file
        self._kernel_id = 0  # kernel of the frame being executed (for events)
        self._kernel_count = 0
        self._escaped_funcs: list[Func] = []  # functions handed to jax.jit, shard_map, ...
        self._idle_defs: set[int] = set()  # defs here that name nothing Pallas (relevance.py)
        self._kernel_only: standalone.KernelCode | None = None  # which defs here only kernels run
        self._escaping: set = set()  # instances already escaped (they may refer to themselves)
        self._root_stmt: ast.AST | None = None  # statement of the analysed file being run
        self._site: ast.AST | None = None  # Frame.site of the code being run (for events)
        self.deps: set[str] = set()  # other files read
        self.incomplete: str | None = None  # why the analysis stopped early, if it did
        self._property_frame: Frame | None = None  # where a property getter runs from
        self.variant: object = 0  # which launcher flag combination is running (0: none)
        # id(Assign node) -> the truth value a local flag takes in this variant
        # when the engine cannot compute it (see variants.local_flag_pins).
        self.pins: dict[int, Value] = {}

    # ------------------------------------------------------------ driver

    def release(self) -> None:
        """Empty every scope the analysis made. A def is a Func that points
        at the scope that holds it, so the interpreter's whole world (and the
        AST) is one big cycle that only the cyclic collector frees, at a
        quarter of the analysis' cost; once the results are out nothing reads
        a scope, and emptying them lets reference counting free it all."""
        for scope in self._scopes:
            scope.vars.clear()
            scope.parent = scope.module = None  # a module and its scope point at each other
        self._scopes.clear()
        self._memo.clear()
        self._closures.clear()
        self._kernel_runs_by_args.clear()
        self._first_nested.clear()

    def run(self) -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 6000))
        outer, _made.scopes = getattr(_made, "scopes", None), self._scopes
        try:
            frame = Frame(self.module_scope, kernel=False, mod=self.root)
            self.exec_body(self.src.tree.body, frame)
            self._flush_pending()
            functions, classes = self._all_defs(self.src.tree)
            self._kernel_only = standalone.KernelCode(self.src.lines, functions)
            relevant = relevance.relevant_defs(self.src, functions, classes,
                                               self.module_scope.vars)
            # Defs of this file that cannot reach Pallas are not run on their
            # own: reference implementations handed to jax.custom_vjp or jit
            # are most of the escaped functions of some kernel files.
            self._idle_defs = {id(node) for node in functions if id(node) not in relevant
                               and id(node) not in self._buffered_methods}
            self._run_escaped(frame)
            # Functions nobody called in this file (wrappers, tests, methods):
            # run them with unknown arguments so their pallas_call sites and
            # run_scoped bodies are seen.
            for node in functions:
                if id(node) not in self._entered and (id(node) in relevant
                                                      or id(node) in self._buffered_methods):
                    # A nested def runs in the closure it was defined in (a
                    # builder's `make_call` sees the builder's `kernel`).
                    func = self._closures.get(id(node)) or Func(node=node, scope=self.module_scope)
                    hooked = buffered.buffered_self(self._buffered_methods.get(id(node)), node)
                    if hooked:
                        # Kernel code (emit_pipeline calls it), but the
                        # pipeline around it is not seen: no protocol checks.
                        self.events.truncated.add(self._kernel_count + 1)
                        self.call_func(func, [], hooked, frame, unknown_params=True, kernel=True)
                    elif not self._run_unlaunched(func, frame):
                        # (kernel code with no launch seen ran as such, above)
                        launched = len(self.events.launches)
                        self._drive(func, self._method_self(node), frame)
                        if len(self.events.launches) > launched:
                            self._builders.add(id(node))  # launches through its callees
                    self._flush_pending()
                    self._run_escaped(frame)
            # A launcher called here only with its defaults may launch other
            # kernels for other flags (its other callers are elsewhere): run
            # it once more with unknown arguments, so every branch is seen.
            reached = {id(launch.node) for launch in self.events.launches}
            lines = variants.launch_lines(self.src.lines)
            for node in functions:
                if id(node) not in self._unknown_run and variants.mentions(node, lines) \
                        and variants.unreached_launch(node, reached, lines):
                    func = Func(node=node, scope=self.module_scope)
                    self._drive(func, {}, frame)
                    self._flush_pending()
                    self._run_escaped(frame)
            # Launchers with boolean flags: each combination is real code, and
            # running them one by one keeps the flags that shape a ref list
            # and the kernel that unpacks it in step.
            for node in functions:
                if not (variants.mentions(node, lines) or id(node) in self._builders):
                    continue
                runs = [(v, {}) for v in variants.flag_variants(node)]
                optional = variants.optional_variants(node, self.src.lines)
                if optional and not runs:
                    runs.append(({}, {}))  # the defaults: every optional argument None
                runs += [(v, {}) for v in optional]
                runs += [({}, pins) for pins in variants.local_flag_pins(node)]
                defaults = self._default_values(node, frame) if runs else {}
                for n, (fixed, pins) in enumerate(runs, start=1):
                    fixed = {**defaults, **fixed}
                    self.variant = (id(node), n)
                    self.pins = pins
                    func = Func(node=node, scope=self.module_scope)
                    self._drive(func, fixed, frame)
                    self._flush_pending()
                    self._run_escaped(frame)
                self.variant = 0
                self.pins = {}
        except Budget:
            self.events.truncated.add(-1)  # every kernel
            self.incomplete = (f"the analysis stopped after {MAX_STEPS:,} steps (the file is very "
                               f"large or its code very repetitive); what follows was not checked")
        except RecursionError:
            self.incomplete = "the analysis stopped: code nested too deeply to follow"
        finally:
            sys.setrecursionlimit(old)
            _made.scopes = outer

    def same_kernel_run(self, kernel: Func, args: list, kwargs: dict, backend_name: str,
                        frame: Frame) -> int | None:
        """The id of an earlier run of this kernel with equal arguments (then
        running it again would only repeat its events); else None, and this
        run is remembered as the next kernel id."""
        args = list(kernel.bound_args) + list(args)  # as call_func will bind them
        kwargs = {**dict(kernel.bound_kwargs), **kwargs}
        values = args + list(kwargs.values())
        site = id(frame.site) if frame.site is not None else 0
        if not (isinstance(kernel.scope, Scope) and kernel.scope is not self.module_scope):
            return self._same_run((id(kernel.node), id(kernel.scope), pyops.args_key(args, kwargs),
                                   backend_name, frame.depth, site), values)
        # A kernel defined inside a launcher gets a new closure per launcher
        # run (per flag variant): equal closure values make an equal run. The
        # names it reads are only worked out when it runs a second time.
        scope = (kernel.scope.parent, dict(kernel.scope.vars))  # as it is now
        rest = (pyops.args_key(args, kwargs), backend_name, frame.depth, site)
        free = self._free.get(id(kernel.node))
        if free is None:
            first = self._first_nested.pop(id(kernel.node), None)
            if first is None:
                self._first_nested[id(kernel.node)] = (scope, rest, self._kernel_count + 1,
                                                       values)
                return None
            free = self._free[id(kernel.node)] = flow.free_names(kernel.node)
            f_scope, f_rest, f_id, f_values = first
            closure = flow.closure_values(f_scope, free)
            self._kernel_runs_by_args[(id(kernel.node), pyops.args_key(closure, {})) + f_rest] = \
                (f_id, f_values + closure)
        closure = flow.closure_values(scope, free)
        return self._same_run((id(kernel.node), pyops.args_key(closure, {})) + rest, values + closure)

    def _same_run(self, key: tuple, values: list) -> int | None:
        earlier = self._kernel_runs_by_args.get(key)
        if earlier is None:
            # The values are kept so that the ids in the key stay theirs.
            self._kernel_runs_by_args[key] = (self._kernel_count + 1, values)
            return None
        return earlier[0]

    def _method_self(self, node) -> dict:
        """`self` for a method run on its own: an instance of its class whose
        attributes are unknown, so that `self._kernel` is the method."""
        cls = self._method_class.get(id(node))
        params = node.args.posonlyargs + node.args.args
        if cls is None or not params:
            return {}
        if cls.kinds.get(node.name) == "class":
            return {params[0].arg: cls}  # a classmethod's `cls`
        return {params[0].arg: Instance(cls)}

    def _drive(self, func: Func, fixed: dict, frame: Frame) -> None:
        """Run a function nobody here called, with unknown arguments (but
        `fixed`); a builder's result is run too: the closure it returns
        (`return fn`, where `fn` makes the pallas_call) is the launcher.
        In a flag variant the launcher is called the way its docstring's
        user would call it: required arguments only, the rest defaults (and
        what the builder bound), so its own flags are known too."""
        results = [self.call_func(func, [], fixed, frame, unknown_params=True)]
        for _ in range(2):
            # `return fn`, `return a if c else b`, `return mesh, fn`
            launchers = [o for r in results for o in (r.options if isinstance(r, Choice) else
                                                      r.items if isinstance(r, Seq) else (r,))
                         if isinstance(o, Func)]
            if not launchers:
                return
            if not fixed:
                self._builders.add(id(func.node))
            results = []
            for launcher in launchers:
                if not fixed:
                    results.append(self.call_func(launcher, [], {}, frame, unknown_params=True))
                else:
                    args, kwargs = variants.required_args(launcher)
                    results.append(self.call_func(launcher, args, kwargs, frame))

    def _run_escaped(self, frame: Frame) -> None:
        """Functions handed to code we do not model (jax.jit, shard_map,
        vmap...) run later with unknown arguments, but in their own closure:
        that is where their pallas_call finds its specs."""
        while self._escaped_funcs:
            func = self._escaped_funcs.pop()
            if id(func.node) not in self._entered and id(func.node) not in self._idle_defs:
                if not self._run_unlaunched(func, frame):
                    self.call_func(func, [], {}, frame, unknown_params=True)
                self._flush_pending()

    def _run_unlaunched(self, func: Func, frame: Frame) -> bool:
        """Kernel code no launch here reaches (standalone.py): run it as kernel
        code, its parameters used as Refs bound to Refs (a method's `self` an
        instance of its class), the kernel around it unseen (no protocol
        checks). False when `func` is not kernel code."""
        node = func.node
        src = getattr(node, "_pl_src", None)
        if src is not None and src is not self.src:  # a function of another file, escaped here
            # No defs of its file to call by name: only its own DMA calls count
            # (`node` may be a lambda, which has no name).
            if not standalone.KernelCode(src.lines, []).is_kernel(node):
                return False
        elif self._kernel_only is None or not self._kernel_only.is_kernel(node):
            return False
        self.events.truncated.add(self._kernel_count + 1)
        self.events.standalone.add(self._kernel_count + 1)
        refs = {p: Ref(origin=f"{p} (a Ref by its use; no launch seen)", space=Space.UNKNOWN)
                for p in standalone.ref_params(node)}
        self.call_func(func, [], {**self._method_self(node), **refs},
                       frame, unknown_params=True, kernel=True)
        return True

    def _flush_pending(self) -> None:
        """Kernels of pallas_calls that were never called with operands."""
        while self.pending or self.pending_pipelines or self.pending_kernels:
            while self.pending_kernels:
                kc, frame = self.pending_kernels.pop()
                binding.run_pl_kernel(self, kc, None, frame)
            while self.pending:
                pc, frame = self.pending.pop()
                binding.run_kernel(self, pc, None, frame)
            while self.pending_pipelines:
                pipe, frame = self.pending_pipelines.pop()
                binding.run_pipeline(self, pipe, None, frame)

    def _all_defs(self, tree: ast.AST) -> tuple[list[ast.AST], list[ast.ClassDef]]:
        """Every def, in source order, and every class. Both are statements,
        so only statement bodies are searched (much cheaper than ast.walk
        over expressions)."""
        out: list[ast.AST] = []
        classes: list[ast.ClassDef] = []
        stack = [tree]
        while stack:
            node = stack.pop()
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in reversed(getattr(node, name, None) or ()):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append(child)
                    elif isinstance(child, ast.ClassDef):
                        classes.append(child)
                    if isinstance(child, _HAS_BODY):
                        stack.append(child)
        return out, classes

    # ------------------------------------------------------------ statements

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

    def stmt_Import(self, node: ast.Import, frame: Frame) -> None:
        for alias in node.names:
            user = self._user_module(frame, alias.name, 0)
            if alias.asname:
                frame.scope.vars[alias.asname] = ModuleRef(path=user) if user else Api(
                    name=api.canonical(alias.name))
            else:
                top = alias.name.split(".")[0]
                user_top = self._user_module(frame, top, 0) if user else None
                frame.scope.vars[top] = ModuleRef(path=user_top) if user_top else Api(
                    name=api.canonical(top))

    def _user_module(self, frame: Frame, module: str, level: int) -> str | None:
        """The file of one of the user's modules, or None (a library, or no project)."""
        if self.project is None or (not level and module.split(".")[0] in LIBRARY_ROOTS):
            return None
        importing = frame.mod.path if frame.mod is not None else self.path
        try:
            return self.project.resolve(importing or None, module, level)
        except (OSError, ValueError):
            return None

    def stmt_ImportFrom(self, node: ast.ImportFrom, frame: Frame) -> None:
        target = self._user_module(frame, node.module or "", node.level)
        if target is not None:
            for alias in node.names:
                if alias.name == "*":
                    self._import_star(target, frame)
                else:
                    frame.scope.vars[alias.asname or alias.name] = Imported(path=target,
                                                                             name=alias.name)
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            # `from pkg import mod` where pkg is a namespace package (a folder
            # without __init__.py): each name is a module of the user's.
            sub = self._user_module(frame, f"{node.module}.{alias.name}" if node.module
                                    else alias.name, node.level) \
                if node.level or node.module else None
            if sub is not None:
                frame.scope.vars[alias.asname or alias.name] = ModuleRef(path=sub)
            elif node.level or not node.module:
                frame.scope.vars[alias.asname or alias.name] = UNKNOWN
            else:
                frame.scope.vars[alias.asname or alias.name] = Api(
                    name=api.canonical(f"{node.module}.{alias.name}"))

    def _import_star(self, target: str, frame: Frame) -> None:
        mod = self.load_module(target)
        if mod is not None:
            for k, v in mod.scope.vars.items():
                if not k.startswith("_"):
                    frame.scope.vars[k] = v

    def load_module(self, path: str) -> Module | None:
        """Run one of the user's other files (its top level only: defs,
        constants, classes), once per analysis."""
        key = _real(path)
        mod = self.modules.get(key)
        if mod is not None:
            return mod
        if self.project is None or len(self.modules) > MAX_MODULES:
            return None
        src = self.project.source(key, parse_missing=self.parse_missing)
        if src is None:
            if not self.parse_missing:
                self.missing.add(key)
            return None
        mod = self.modules[key] = Module(key, src)
        self.deps.add(key)
        self.exec_body(src.tree.body, Frame(mod.scope, kernel=False, mod=mod))
        return mod

    def segment(self, node: ast.AST) -> str:
        """Source text of a node, in whichever file it is."""
        return (getattr(node, "_pl_src", None) or self.src).segment(node)

    def deref(self, value: Value) -> Value:
        """What an imported name is, reading its module if needed (following
        re-exports, at most a few hops; import cycles end as Unknown)."""
        seen: set = set()
        while isinstance(value, Imported):
            if value in seen or len(seen) > 16:
                return UNKNOWN
            seen.add(value)
            mod = self.load_module(value.path)
            if mod is None:
                return UNKNOWN
            found = mod.scope.vars.get(value.name)
            if found is None or found == value:
                # `from pkg import mod` (a submodule), or a module that
                # imports the name from itself while still loading.
                sub = self.project.submodule(mod.path, value.name)
                return ModuleRef(path=_real(sub)) if sub else UNKNOWN
            value = found
        return value

    def module_attr(self, ref: ModuleRef, attr: str) -> Value:
        mod = self.load_module(ref.path)
        if mod is None:
            return UNKNOWN
        found = mod.scope.vars.get(attr)
        if found is None:
            sub = self.project.submodule(mod.path, attr)
            return ModuleRef(path=_real(sub)) if sub else UNKNOWN
        return self.deref(found)

    def stmt_FunctionDef(self, node: ast.FunctionDef, frame: Frame) -> None:
        func: Value = Func(node=node, scope=frame.scope)
        if frame.scope is not self.module_scope:
            self._closures.setdefault(id(node), func)
        for dec in reversed(node.decorator_list):
            func = self.apply_decorator(dec, func, frame)
        frame.scope.vars[node.name] = func

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, node: ast.ClassDef, frame: Frame) -> None:
        """Plain classes, dataclasses and NamedTuples become ClassVals (kernels
        keep descriptors and Refs in them); anything fancier stays Unknown."""
        bases = [self.eval(b, frame) for b in node.bases]
        if any(isinstance(b, Api) and b.name.split(".")[-1] in _ENUM_BASES for b in bases):
            self._enum_class(node, frame)
            return
        decorators = [self.eval(d.func if isinstance(d, ast.Call) else d, frame)
                      for d in node.decorator_list]
        record = any(isinstance(d, Api) and d.name in ("dataclasses.dataclass", "dataclass")
                     for d in decorators)
        namedtuple = any(isinstance(b, Api) and b.name.endswith("NamedTuple") for b in bases)
        parents = [b for b in bases if isinstance(b, ClassVal)]
        if any(isinstance(b, Api) and b.name == "pl.BlockSpec" for b in bases) \
                and all(_harmless_base(b, n) or (isinstance(b, Api) and b.name == "pl.BlockSpec")
                        for b, n in zip(bases, node.bases)) and not decorators:
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef)
                         and s.name == "__init__"), None)
            frame.scope.vars[node.name] = binding.SpecClass(init=init, scope=frame.scope)
            return
        # A pltpu.BufferedRef subclass: its copy/wait overrides are what
        # emit_pipeline calls, on buffers and semaphores jax allocates.
        is_buffered = any(buffered.is_buffered_ref(b) for b in bases) \
            or any(getattr(p, "buffered", False) for p in parents)
        plain = all(isinstance(b, ClassVal) or _harmless_base(b, n) or buffered.is_buffered_ref(b)
                    for b, n in zip(bases, node.bases))
        decorators = [d for d in decorators if not pytrees.pytree_registration(d)]
        if node.keywords or not (plain or namedtuple) or (decorators and not record):
            frame.scope.vars[node.name] = UNKNOWN
            return
        methods, fields, kinds, defaults, static, leaves = {}, [], {}, {}, set(), set()
        for parent in parents:  # single inheritance from classes of this file
            methods.update(parent.methods)
            kinds.update(parent.kinds)
            defaults.update(parent.defaults)
            static |= parent.static
            leaves |= parent.leaves
            fields.extend(f for f in parent.fields if f not in fields)
            record = record or parent.record
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                kind = self._method_kind(stmt, frame)
                if kind is not None:
                    methods[stmt.name] = stmt
                    kinds[stmt.name] = kind
                else:
                    methods.pop(stmt.name, None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id not in fields:
                fields.append(stmt.target.id)
                if pytrees.array_annotation(stmt.annotation):
                    leaves.add(stmt.target.id)
                # `q_token: Callable | None = None`: a field the call may
                # leave out (then `schedule.q_token is None` decides branches).
                if stmt.value is not None and (record or namedtuple):
                    if pytrees.static_field(stmt.value):
                        static.add(stmt.target.id)
                        continue
                    v = self.eval(stmt.value, frame)
                    if isinstance(v, Const):
                        defaults[stmt.target.id] = v
        cls = ClassVal(node, frame.scope, methods, tuple(fields), record or namedtuple)
        object.__setattr__(cls, "kinds", kinds)
        object.__setattr__(cls, "defaults", defaults)
        object.__setattr__(cls, "static", frozenset(static))
        object.__setattr__(cls, "leaves", frozenset(leaves - static))
        if is_buffered:
            object.__setattr__(cls, "buffered", True)
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name in buffered.HOOKS \
                        and kinds.get(stmt.name) == "method":
                    self._buffered_methods[id(stmt)] = cls
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and kinds.get(stmt.name) in ("method", "class") \
                    and id(stmt) not in self._buffered_methods:
                self._method_class[id(stmt)] = cls
        frame.scope.vars[node.name] = cls

    def _default_values(self, func: ast.AST, frame: Frame) -> dict:
        """The other parameters' defaults, evaluated as Python does at def
        time (module constants, enum members): a flag variant is the default
        configuration with those flags set."""
        out = {}
        for p, d in variants.params_with_defaults(func):
            v = self.eval(d, frame)
            if isinstance(v, Const) or (isinstance(v, Seq) and not v.items):
                out[p.arg] = v
        return out

    def _enum_class(self, node: ast.ClassDef, frame: Frame) -> None:
        """An Enum: its members are constants (flags like `weight_format ==
        Format.FP4` then decide branches); the rest of the class is opaque."""
        members = {}
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    members[t.id] = Const(value=f"{node.name}.{t.id}")
        frame.scope.vars[node.name] = Seq(items=tuple(members.values()),
                                          keys=tuple(members), origin=f"enum {node.name}")

    def _method_kind(self, stmt: ast.FunctionDef, frame: Frame) -> str | None:
        """method | static | class | property; None for decorators that run
        or replace the function (Pallas decorators, property setters)."""
        kind = "method"
        for dec in stmt.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "staticmethod":
                kind = "static"
            elif name == "classmethod":
                kind = "class"
            elif name in ("property", "cached_property"):
                kind = "property"
            elif name in ("setter", "deleter", "overload", "abstractmethod"):
                return None
            elif isinstance(self.eval(dec, frame), binding.Decorator):
                return None
            # Anything else (jax.named_scope, functools.cache, jax.jit, ...)
            # leaves a function that behaves like the method when called.
        return kind

    def method_value(self, cls: ClassVal, name: str, obj: Value | None) -> Value | None:
        """`obj.name` / `Class.name` for a method of one of the file's classes."""
        node = cls.methods.get(name)
        if node is None:
            return None
        kind = getattr(cls, "kinds", {}).get(name, "method")
        if kind == "static":
            return Func(node=node, scope=cls.scope)
        if kind == "class":
            return Func(node=node, scope=cls.scope, bound_args=(cls,))
        if obj is None:
            return Func(node=node, scope=cls.scope)
        if kind == "property":
            return self.call_func(Func(node=node, scope=cls.scope, bound_args=(obj,)), [], {},
                                  self._property_frame)
        return Func(node=node, scope=cls.scope, bound_args=(obj,))

    def stmt_Return(self, node: ast.Return, frame: Frame) -> None:
        frame.returns.append(self.eval(node.value, frame) if node.value else Const(value=None))
        frame.left = True

    def stmt_Expr(self, node: ast.Expr, frame: Frame) -> None:
        self.eval(node.value, frame)

    def stmt_Assign(self, node: ast.Assign, frame: Frame) -> None:
        value = self.eval(node.value, frame)
        if self.pins and id(node) in self.pins and not isinstance(value, Const):
            value = self.pins[id(node)]
        for target in node.targets:
            self.assign(target, value, frame, node.value)

    def stmt_AnnAssign(self, node: ast.AnnAssign, frame: Frame) -> None:
        if node.value is not None:
            self.assign(node.target, self.eval(node.value, frame), frame, node.value)

    def stmt_AugAssign(self, node: ast.AugAssign, frame: Frame) -> None:
        value = self.eval(node.value, frame)
        if isinstance(node.target, ast.Subscript):
            base = self.eval(node.target.value, frame)
            self.eval_subscript_load(node.target, base, frame)  # `x[...] += v` reads too
            self.store_subscript(node.target, base, Array(origin="arithmetic"), node.value, frame)
        elif isinstance(node.target, (ast.Name, ast.Attribute)):
            # `self.copies += [...]` too: the attribute is read, then stored.
            old = self.eval(node.target, frame)
            self.assign(node.target, self.binop(old, value, node.op), frame, node.value)
        else:
            self.escape(value)

    def stmt_If(self, node: ast.If, frame: Frame) -> None:
        test = self.eval(node.test, frame)
        truth = self.test_truth(node.test, test)
        if truth is True:
            self.exec_body(node.body, frame)
            return
        if truth is False:
            self.exec_body(node.orelse, frame)
            return
        self.branch(frame, node.body, node.orelse)

    def branch(self, frame: Frame, body_a, body_b) -> None:
        self.either(frame, lambda: self.exec_body(body_a, frame),
                    lambda: self.exec_body(body_b, frame))

    def either(self, frame: Frame, run_a, run_b) -> None:
        """Two alternative paths from the same state, joined. A path that
        leaves the function (`raise`, `return`) does not reach the code after
        them (`if ok: specs += [...] else: raise ...`): only the other one
        carries on; when both leave, so does this point."""
        saved = frame.scope
        a, b = saved.fork(), saved.fork()
        frame.undecided += 1
        try:
            frame.scope = a
            run_a()
            left_a, frame.left = frame.left, False
            frame.scope = b
            run_b()
            left_b, frame.left = frame.left, False
        finally:
            frame.undecided -= 1
        frame.scope = saved
        if left_a and not left_b:
            saved.vars.update(b.vars)
        elif left_b and not left_a:
            saved.vars.update(a.vars)
        else:
            saved.merge(a, b, self._lost)
            frame.left = left_a and left_b

    def stmt_Match(self, node: ast.Match, frame: Frame) -> None:
        """`match` as a chain of if / elif: a case that a known subject decides
        runs alone; an undecided one is a branch next to the later cases."""
        self._cases(node, self.eval(node.subject, frame), 0, frame)

    def _cases(self, node: ast.Match, subject: Value, i: int, frame: Frame) -> None:
        # A method, not a closure calling itself: that would be a reference
        # cycle holding the interpreter until the next collection.
        if i == len(node.cases):
            return
        case = node.cases[i]
        truth = pyops.pattern_matches(case.pattern, subject)
        if truth is not False and case.guard is not None:
            guard = pyops.truthiness(self.eval(case.guard, frame))
            truth = False if guard is False else truth if guard is True else None
        if truth is False:
            self._cases(node, subject, i + 1, frame)
            return

        def body():
            for target in pyops.pattern_names(case.pattern):
                frame.scope.vars[target] = subject if isinstance(
                    case.pattern, ast.MatchAs) and case.pattern.pattern is None else UNKNOWN
            self.exec_body(case.body, frame)

        if truth is True:
            body()
            return
        self.either(frame, body, lambda: self._cases(node, subject, i + 1, frame))

    def stmt_For(self, node: ast.For, frame: Frame) -> None:
        it = self.eval(node.iter, frame)
        # Launcher code that builds its specs in a loop over a few known
        # values (`for extra in (replay, shadow): in_specs += ...`) runs each
        # iteration, as Python does, so the list keeps its length. Kernel
        # code keeps the two-pass model its start/wait checks are built on.
        if not frame.kernel and isinstance(node, ast.For):
            items = self.expand(it, limit=MAX_UNROLL)
            if items and flow.straight_loop(node, self._straight):
                for item in items:
                    self.assign(node.target, item, frame, None)
                    self.exec_body(node.body, frame)
                self.exec_body(node.orelse, frame)
                return
        item = self.iter_item(it)
        self.loop(frame, node.body, lambda: self.assign(node.target, item, frame, None), node)
        self.exec_body(node.orelse, frame)

    stmt_AsyncFor = stmt_For

    def stmt_While(self, node: ast.While, frame: Frame) -> None:
        self.loop(frame, node.body, lambda: self.eval(node.test, frame), node)
        self.exec_body(node.orelse, frame)

    def loop(self, frame: Frame, body, before_each, node: ast.AST) -> None:
        """Run a loop body once or twice (the second pass sees values carried
        from the first, e.g. the descriptor started for the next step), then
        merge with the zero-iteration path."""
        passes = 2 if frame.loop_depth < MAX_LOOP_UNROLL_DEPTH else 1
        saved = frame.scope
        frame.loop_depth += 1
        try:
            cur = saved
            for n in range(passes):
                writes = instance_writes()
                nxt = cur.fork()
                frame.scope = nxt
                before_each()
                self.exec_body(body, frame)
                frame.left = False  # the loop may not run at all: what follows is reached
                merged = saved.fork()
                merged.merge(cur, nxt, self._lost)
                if n == 0 and passes > 1 and writes == instance_writes() \
                        and self._reads_unchanged(node, cur, merged):
                    cur = merged  # the second pass would run on the same values
                    break
                cur = merged
        finally:
            frame.loop_depth -= 1
            frame.scope = saved
        saved.vars.update(cur.vars)

    def _reads_unchanged(self, node: ast.AST, before: Scope, after: Scope) -> bool:
        """Does every name the loop reads hold the same value in both scopes?"""
        names = self._loop_reads.get(id(node))
        if names is None:
            names = self._loop_reads[id(node)] = flow.exposed_reads(node)
        bv, av = before.vars, after.vars
        for name in names:
            a, b = bv.get(name), av.get(name)
            if a is not b and a != b:
                return False
        return True

    def stmt_Raise(self, node: ast.Raise, frame: Frame) -> None:
        """Nothing in an exception's message matters to a kernel (and
        validation code raises a lot). In a branch the engine could not
        decide, what follows is not reached (`if ok: ... else: raise`). On a
        path it did decide, the run goes on: the decision may rest on a
        default no caller passes (`block=None`, then `if block is None:
        raise`), and the code after it is still real."""
        if frame.undecided:
            frame.left = True

    def stmt_Assert(self, node: ast.Assert, frame: Frame) -> None:
        """`assert False` (a dead branch, marked) is a `raise`. A test the
        engine computed to be false is not: like `if x is None: raise`, it
        may rest on a default no caller passes."""
        self.eval(node.test, frame)  # names in it are kernel names too (hover)
        if isinstance(node.test, ast.Constant) and not node.test.value:
            self.stmt_Raise(node, frame)

    def stmt_With(self, node: ast.With, frame: Frame) -> None:
        for item in node.items:
            v = self.eval(item.context_expr, frame)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, UNKNOWN if not isinstance(v, Ref) else v,
                            frame, None)
        self.exec_body(node.body, frame)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, node: ast.Try, frame: Frame) -> None:
        # Run in a row; a `raise` or `return` in one part does not skip the
        # others (a handler may catch it), nor the code after the `try`.
        self.exec_body(node.body, frame)
        for handler in node.handlers:
            frame.left = False
            if handler.name:
                frame.scope.vars[handler.name] = UNKNOWN
            self.exec_body(handler.body, frame)
        for block in (node.orelse, node.finalbody):
            frame.left = False
            self.exec_body(block, frame)
        frame.left = False

    stmt_TryStar = stmt_Try

    def stmt_Delete(self, node: ast.Delete, frame: Frame) -> None:
        pass

    def stmt_Global(self, node, frame):
        pass

    stmt_Nonlocal = stmt_Global

    # ------------------------------------------------------------ assignment

    def assign(self, target: ast.expr, value: Value, frame: Frame, value_node) -> None:
        if isinstance(target, ast.Name):
            frame.scope.vars[target.id] = value
            self.record_name(target, value, frame, is_assign=True)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
            if isinstance(value, Partial):
                self.assign_partial(elts, star, value, frame)
                return
            items = value.items if isinstance(value, Seq) else None
            for i, elt in enumerate(elts):
                if isinstance(elt, ast.Starred):
                    if items is not None and len(items) >= len(elts) - 1:
                        rest = items[i:len(items) - (len(elts) - i - 1)]
                        self.assign(elt.value, Seq(items=tuple(rest)), frame, None)
                    else:
                        self.assign(elt.value, UNKNOWN, frame, None)
                    continue
                v = UNKNOWN
                if isinstance(value, SeqOf):
                    v = value.elem
                elif items is not None:
                    if star is None and len(items) == len(elts):
                        v = items[i]
                    elif star is not None and len(items) >= len(elts) - 1:
                        v = items[i] if i < star else items[len(items) - (len(elts) - i)]
                sub_node = None
                if isinstance(value_node, (ast.Tuple, ast.List)) and star is None \
                        and len(value_node.elts) == len(elts):
                    sub_node = value_node.elts[i]
                self.assign(elt, v, frame, sub_node)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, frame)
            self.store_subscript(target, base, value, value_node, frame)
        elif isinstance(target, ast.Attribute):
            base = self.eval(target.value, frame)
            if isinstance(base, Instance):
                base.attrs[target.attr] = value
            else:
                self.escape(value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, UNKNOWN, frame, None)

    def assign_partial(self, elts, star, value: Partial, frame: Frame) -> None:
        """`a, b, c = xs` where only some of xs's items are known: Python
        insists the length matches, so position i is head[i] from the front
        and, counted from the back, tail[-k]."""
        n = len(elts)
        after = n - star - 1 if star is not None else None
        for i, elt in enumerate(elts):
            if isinstance(elt, ast.Starred):
                rest_tail = value.tail[:len(value.tail) - after] if after else value.tail
                self.assign(elt.value, Partial(head=value.head[i:], tail=rest_tail,
                                               elem=value.elem), frame, None)
                continue
            v: Value = UNKNOWN
            if star is None or i < star:
                if i < len(value.head):
                    v = value.head[i]
                elif star is None and n - i <= len(value.tail):
                    v = value.tail[len(value.tail) - (n - i)]
            else:
                k = n - i  # position from the back
                if k <= len(value.tail):
                    v = value.tail[len(value.tail) - k]
            self.assign(elt, v, frame, None)

    def store_subscript(self, target: ast.Subscript, base: Value, value: Value, value_node,
                        frame: Frame) -> None:
        index = self.eval_index(target.slice, frame)
        if isinstance(base, Ref) and (frame.kernel or self._kernel_id):
            self.events.accesses.append(RefAccess(kernel_id=self._kernel_id, site=self._site,
                kind="swap", node=target, ref=Arg(target.value, base),
                value=Arg(value_node, value)))
        elif isinstance(target.value, ast.Name) and isinstance(base, (Seq, SeqOf)) \
                and (isinstance(value, (Descriptor, Ref, Array, Seq, Alloc, Spec))
                     or binding.to_alloc(value) is not None):
            # `copies[k] = make_async_copy(...)`, `scratch["buf"] = pltpu.VMEM(...)`,
            # `scratch["sem"] = pltpu.SemaphoreType.DMA` (a bare kind is one semaphore):
            # the list or dict is a value here, so rebind the name to the updated one.
            frame.scope.rebind(target.value.id, pyops.stored(
                base, index[0] if len(index) == 1 else UNKNOWN, value))
        else:
            self.escape(value)

    # ------------------------------------------------------------ names

    def record_name(self, node: ast.Name, value: Value, frame: Frame, *,
                    is_param: bool = False, is_assign: bool = False) -> None:
        if not frame.kernel or not self.want_names \
                or (frame.mod is not None and frame.mod is not self.root):
            return
        # Spans, joined values and NameInfo are made on demand (`name_infos`):
        # most names recorded are never looked at, and this runs for every
        # name read (each loop pass and launcher variant reads it again).
        old = self.names.get(node)
        if old is None:
            self.names[node] = [node, [value], is_param, is_assign]
            return
        seen = old[1]
        if seen[-1] is not value:
            seen.append(value)
            if len(seen) > 32:
                old[1] = [join_all(seen)]
        if is_param:
            old[2] = True
        if is_assign:
            old[3] = True

    def name_infos(self) -> list[NameInfo]:
        """Every name recorded in a kernel of this file, in source order."""
        span = self.src.span
        out = [NameInfo(span=span(node), name=node.id, value=join_all(values), is_param=is_param,
                        is_assign=is_assign)
               for node, values, is_param, is_assign in self.names.values()]
        out.sort(key=lambda n: (n.span.line, n.span.col))
        return out

    # ------------------------------------------------------------ expressions

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

    def expr_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Value:
        parts: list = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            value = self.eval(v.value, frame)
            spec = self.eval(v.format_spec, frame) if v.format_spec is not None else Const(value="")
            if not (isinstance(spec, Const) and isinstance(spec.value, str)):
                return UNKNOWN
            parts.append((value, v.conversion, spec.value))
        return pyops.format_string(parts)

    def expr_Constant(self, node: ast.Constant, frame: Frame) -> Value:
        # Values are immutable: one Const per literal node, made once.
        value = self._consts.get(node)
        if value is None:
            value = self._consts[node] = Const(value=node.value)
        return value

    def expr_Name(self, node: ast.Name, frame: Frame) -> Value:
        value = frame.scope.lookup(node.id)
        if value is None:
            mod = frame.scope.module or self.root
            value = mod.scope.vars.get(node.id, UNKNOWN)
        if isinstance(value, Imported):
            value = self.deref(value)
        if frame.kernel:  # the only names recorded (checked here: this runs for every read)
            self.record_name(node, value, frame)
        return value

    def expr_Tuple(self, node, frame: Frame) -> Value:
        items: list[Value] = []
        # `[a, *weights, *biases, b]` with lists of unknown length inside:
        # the items before the first and after the last are still known.
        parts: list[Value] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = self.eval(elt.value, frame)
                if isinstance(inner, Seq):
                    items.extend(inner.items)
                    continue
                if not isinstance(inner, (Partial, SeqOf)):
                    return UNKNOWN
                parts += [Seq(items=tuple(items)), inner]
                items = []
            else:
                items.append(self.eval(elt, frame))
        if not parts:
            return Seq(items=tuple(items))
        out = parts[0]
        for part in parts[1:] + [Seq(items=tuple(items))]:
            out = self.concat(out, part)
        return out

    def concat(self, a: Value, b: Value) -> Value:
        """`pyops.concat_partial`, and what a list of unknown length held escapes
        when its items' kind is lost in the join."""
        out = pyops.concat_partial(a, b)
        if out is UNKNOWN or out.elem is UNKNOWN:
            for v in (a, b):
                if isinstance(v, SeqOf):
                    self.escape(v.elem)
        return out

    expr_List = expr_Tuple

    def expr_Dict(self, node: ast.Dict, frame: Frame) -> Value:
        entries: dict = {}  # a later key replaces an earlier one, as in Python
        for k, v in zip(node.keys, node.values):
            kv = self.eval(k, frame) if k is not None else None
            vv = self.eval(v, frame)
            if k is None and isinstance(vv, Seq) and vv.keys is not None:
                entries.update(zip(vv.keys, vv.items))  # `{**other, ...}`
                continue
            if not isinstance(kv, Const):
                return UNKNOWN
            try:
                entries[kv.value] = vv
            except TypeError:  # not hashable: Python would fail here too
                return UNKNOWN
        return Seq(items=tuple(entries.values()), keys=tuple(entries))

    def expr_Attribute(self, node: ast.Attribute, frame: Frame) -> Value:
        return self.attribute(self.eval(node.value, frame), node.attr, node, frame)

    def attribute(self, base: Value, attr: str, node: ast.expr, frame: Frame) -> Value:
        """`base.attr` (also `getattr(base, "attr")`)."""
        if isinstance(base, binding.SpecHolder) and attr == "__init__":
            return binding.SpecInit(holder=base)
        if isinstance(base, Api):
            key = (node, base.name)
            out = self._api_attrs.get(key)
            if out is None:
                out = self._api_attrs[key] = Api(name=api.join(base.name, attr), decl=node)
            return out
        if isinstance(base, ModuleRef):
            return self.module_attr(base, attr)
        if isinstance(base, Seq) and base.keys is not None and base.origin.startswith("enum "):
            return base.items[base.keys.index(attr)] if attr in base.keys else UNKNOWN
        if isinstance(base, Instance):
            if attr in base.attrs:
                return base.attrs[attr]
            self._property_frame = frame
            method = self.method_value(base.cls, attr, base)
            return method if method is not None else UNKNOWN
        if isinstance(base, ClassVal):
            method = self.method_value(base, attr, None)
            return method if method is not None else UNKNOWN
        if isinstance(base, Ref):
            if attr == "at":
                return AtProxy(ref=base)
            if attr == "shape" and base.shape is not None and None not in base.shape:
                return Const(value=tuple(base.shape))
            if attr == "T":
                shape = tuple(reversed(base.shape)) if base.shape is not None else None
                return as_view(base, shape, f"{self.segment(node)}")
            if attr in ("bitcast", "reshape", "transpose"):
                return Bound(obj=base, name=attr)
            return UNKNOWN
        if isinstance(base, Descriptor):
            if attr in ("start", "wait", "wait_recv", "wait_send"):
                return Bound(obj=base, name=attr)
            return UNKNOWN
        if isinstance(base, Array) and attr in ("shape", "dtype", "ndim", "size"):
            if attr == "shape" and base.shape is not None and None not in base.shape:
                return Const(value=tuple(base.shape))
            return UNKNOWN
        if isinstance(base, Array):
            return Bound(obj=base, name=attr)  # x.astype(...), x.sum() → Array
        return UNKNOWN

    def expr_Subscript(self, node: ast.Subscript, frame: Frame) -> Value:
        base = self.eval(node.value, frame)
        return self.eval_subscript_load(node, base, frame)

    def eval_subscript_load(self, node: ast.Subscript, base: Value, frame: Frame) -> Value:
        if isinstance(base, AtProxy):
            shape = binding.index_shape(base.ref.shape, self.eval_index(node.slice, frame),
                                        node.slice)
            return as_view(base.ref, shape, self.segment(node))
        if isinstance(base, Ref):
            shape = binding.index_shape(base.shape, self.eval_index(node.slice, frame),
                                        node.slice)
            if frame.kernel or self._kernel_id:
                # (outside a kernel, `r[...]` reads a jax.new_ref array: legal)
                self.events.accesses.append(RefAccess(kernel_id=self._kernel_id, site=self._site,
                                                      kind="get", node=node,
                                                      ref=Arg(node.value, base)))
            return Array(origin=f"read of {self.segment(node.value)}", shape=shape, decl=base.decl,
                         dtype=base.dtype, sem=base.sem)
        if isinstance(base, Partial) and isinstance(node.slice, ast.Slice) \
                and node.slice.step is None:
            # `refs[-8:]` / `refs[:2]` within the known last / first items
            lo = self.eval(node.slice.lower, frame) if node.slice.lower else None
            hi = self.eval(node.slice.upper, frame) if node.slice.upper else None
            k_lo = lo.value if isinstance(lo, Const) and type(lo.value) is int else None
            k_hi = hi.value if isinstance(hi, Const) and type(hi.value) is int else None
            if hi is None and k_lo is not None and -len(base.tail) <= k_lo < 0:
                return Seq(items=base.tail[k_lo:])
            if lo is None and k_hi is not None and 0 <= k_hi <= len(base.head):
                return Seq(items=base.head[:k_hi])
            return UNKNOWN
        index = self.eval(node.slice, frame)
        if isinstance(base, Partial):
            if isinstance(index, Const) and isinstance(index.value, int) \
                    and not isinstance(index.value, bool):
                i = index.value
                if 0 <= i < len(base.head):
                    return base.head[i]
                if -len(base.tail) <= i < 0:
                    return base.tail[i]
            return UNKNOWN
        if isinstance(base, SeqOf):
            if isinstance(index, SliceVal) or isinstance(node.slice, ast.Slice):
                return base
            return base.elem
        if isinstance(base, Seq):
            if isinstance(index, Const):
                if base.keys is not None:
                    if index.value in base.keys:
                        return base.items[base.keys.index(index.value)]
                    return UNKNOWN
                if isinstance(index.value, int) and -len(base.items) <= index.value < len(base.items):
                    return base.items[index.value]
                return UNKNOWN
            if isinstance(index, SliceVal) or isinstance(node.slice, ast.Slice):
                return UNKNOWN
            if isinstance(index, TextPrefix) and base.keys is not None:
                # `scratch[f"send_{i}"]`: one of the entries whose keys start so
                like = [v for k, v in zip(base.keys, base.items)
                        if isinstance(k, str) and k.startswith(index.prefix)]
                return join_all(like) if like else UNKNOWN
            return join_all(base.items)  # dynamic index into a list of like values
        if isinstance(base, Array):
            return Array(origin=base.origin)
        if isinstance(base, Const) and isinstance(base.value, tuple) \
                and isinstance(index, Const) and isinstance(index.value, int):
            try:
                return Const(value=base.value[index.value])
            except IndexError:
                return UNKNOWN
        return UNKNOWN

    def eval_index(self, node: ast.expr, frame: Frame) -> list[Value]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                lo = self.eval(e.lower, frame) if e.lower else Const(value=None)
                hi = self.eval(e.upper, frame) if e.upper else Const(value=None)
                if e.step:
                    self.eval(e.step, frame)
                out.append(binding.slice_value(lo, hi, e.step is not None))
            else:
                out.append(self.eval(e, frame))
        return out

    def expr_Slice(self, node: ast.Slice, frame: Frame) -> Value:
        return SliceVal()

    def expr_BinOp(self, node: ast.BinOp, frame: Frame) -> Value:
        left, right = self.eval(node.left, frame), self.eval(node.right, frame)
        if frame.kernel_id and (isinstance(left, Array) or isinstance(right, Array)):
            self.events.kernel_ops.append(KernelOp("binop", type(node.op).__name__, node,
                                                   (left, right), frame.kernel_id))
        return self.binop(left, right, node.op)

    def binop(self, a: Value, b: Value, op=None) -> Value:
        if isinstance(a, (Ref, Array)) or isinstance(b, (Ref, Array)):
            return Array(origin="arithmetic")
        if isinstance(op, ast.Mult) and isinstance(b, (Seq, SeqOf)) \
                and not isinstance(a, (Seq, SeqOf)):
            a, b = b, a  # `2 * [spec]` repeats the list as `[spec] * 2` does
        if isinstance(op, ast.Mult) and isinstance(a, Seq) and a.keys is None \
                and isinstance(b, Const) and isinstance(b.value, int) and 0 <= b.value <= 64 \
                and len(a.items) * b.value <= pyops.MAX_SEQ:
            return Seq(items=a.items * b.value)
        if isinstance(op, ast.Mult) and isinstance(a, SeqOf) and (b is UNKNOWN or (
                isinstance(b, Const) and type(b.value) is int)):
            return a  # `specs * 2`: still a list of unknown length of the same items
        if isinstance(op, ast.Add) and isinstance(a, Seq) and isinstance(b, Seq) \
                and a.keys is None and b.keys is None and len(a.items) + len(b.items) <= pyops.MAX_SEQ:
            return Seq(items=a.items + b.items)
        if isinstance(op, ast.Add) and (isinstance(a, Partial) or isinstance(b, Partial)):
            return pyops.concat_partial(a, b)
        if isinstance(op, ast.MatMult) and isinstance(a, Alloc):
            return a  # `pltpu.SemaphoreType.DMA(...) @ mesh`: placed on that mesh's cores
        if isinstance(a, Const) and isinstance(b, Const) and op is not None:
            return pyops.const_binop(a.value, b.value, op)
        if isinstance(op, ast.Add) and any(isinstance(v, Seq) and v.items and v.keys is None
                                           for v in (a, b)) \
                and any(isinstance(v, SeqOf) for v in (a, b)):
            # A known list and one of unknown length: the known items keep
            # their places at the front (or the back).
            return self.concat(a, b)
        if isinstance(op, ast.Add) and (isinstance(a, SeqOf) or isinstance(b, SeqOf)) \
                and all(isinstance(v, SeqOf) or (isinstance(v, Seq) and v.keys is None)
                        for v in (a, b)):
            # A list of unknown length and another list: items like either.
            elems = [a.elem] if isinstance(a, SeqOf) else list(a.items)
            elems += [b.elem] if isinstance(b, SeqOf) else list(b.items)
            elem = self.join_values(elems)
            return SeqOf(elem=elem) if elem is not UNKNOWN else UNKNOWN
        self.escape(a)  # what happens to descriptors inside is out of sight now
        self.escape(b)
        return UNKNOWN

    def expr_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Value:
        v = self.eval(node.operand, frame)
        if frame.kernel_id and isinstance(v, Array):
            self.events.kernel_ops.append(KernelOp("unary", type(node.op).__name__, node, (v,),
                                                   frame.kernel_id))
        if isinstance(v, (Ref, Array)):
            return Array(origin="arithmetic")
        if isinstance(v, Const):
            try:
                if isinstance(node.op, ast.USub):
                    return Const(value=-v.value)
                if isinstance(node.op, ast.Not):
                    return Const(value=not v.value)
            except TypeError:
                return UNKNOWN
        return UNKNOWN

    def expr_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Value:
        """Python's `and` / `or`: the first operand that decides, else the
        last. Operands after a deciding one are not evaluated (they do not
        run); after one of unknown truth they are, and the value is unknown."""
        stop = isinstance(node.op, ast.Or)  # the truth that ends the chain
        self._bool_truth.pop(id(node), None)
        known = True
        v = UNKNOWN
        for i, operand in enumerate(node.values):
            v = self.eval(operand, frame)
            truth = pyops.truthiness(v)
            if not known:
                if truth is stop:
                    # `unknown and False`: whichever operand ends the chain,
                    # its truth is `stop` (the value itself stays unknown).
                    self._bool_truth[id(node)] = stop
                    break
                continue
            if i == len(node.values) - 1:
                continue
            if truth is None:
                known = False
            elif truth is stop:
                return v
        return v if known else UNKNOWN

    def test_truth(self, test: ast.expr, value: Value) -> bool | None:
        """The truth of an evaluated `if` / `while` / ternary test."""
        truth = pyops.truthiness(value)
        if truth is None and isinstance(test, ast.BoolOp):
            return self._bool_truth.get(id(test))
        return truth

    def expr_Compare(self, node: ast.Compare, frame: Frame) -> Value:
        vals = [self.eval(node.left, frame)] + [self.eval(c, frame) for c in node.comparators]
        if any(isinstance(v, (Ref, Array)) for v in vals):
            return Array(origin="comparison")
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(vals[1], Const) and vals[1].value is None:
            known = pyops.is_none(vals[0])
            if known is not None:
                return Const(value=known if isinstance(node.ops[0], ast.Is) else not known)
        if len(node.ops) == 1 and all(isinstance(v, Const) for v in vals):
            return pyops.const_compare(vals[0].value, vals[1].value, node.ops[0])
        return UNKNOWN

    def expr_IfExp(self, node: ast.IfExp, frame: Frame) -> Value:
        truth = self.test_truth(node.test, self.eval(node.test, frame))
        if truth is True:
            return self.eval(node.body, frame)
        if truth is False:
            return self.eval(node.orelse, frame)
        # Each side in its own scope (`next(it) if c else None` reads only
        # on one of them), merged afterwards.
        saved = frame.scope
        a, b = saved.fork(), saved.fork()
        frame.scope = a
        va = self.eval(node.body, frame)
        frame.scope = b
        vb = self.eval(node.orelse, frame)
        frame.scope = saved
        saved.merge(a, b, self._lost)
        return join(va, vb)

    def expr_Yield(self, node: ast.Yield, frame: Frame) -> Value:
        """A generator: what it yields is what iterating over its result gives."""
        value = self.eval(node.value, frame) if node.value is not None else Const(value=None)
        if frame.yields is None:
            frame.yields = []
        frame.yields.append(value)
        return UNKNOWN  # what `send()` passes in

    def expr_YieldFrom(self, node: ast.YieldFrom, frame: Frame) -> Value:
        inner = self.eval(node.value, frame)
        if frame.yields is None:
            frame.yields = []
        frame.yields.append(self.iter_item(inner) if isinstance(inner, (Seq, SeqOf)) else UNKNOWN)
        self.escape(inner)
        return UNKNOWN

    def expr_Lambda(self, node: ast.Lambda, frame: Frame) -> Value:
        return Func(node=node, scope=frame.scope)

    def expr_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Value:
        v = self.eval(node.value, frame)
        self.assign(node.target, v, frame, node.value)
        return v

    def expr_Starred(self, node: ast.Starred, frame: Frame) -> Value:
        return self.eval(node.value, frame)

    def expr_ListComp(self, node, frame: Frame) -> Value:
        inner = Frame(Scope(frame.scope), frame.kernel, depth=frame.depth,
                      loop_depth=frame.loop_depth, kernel_id=frame.kernel_id, mod=frame.mod,
                      site=frame.site)
        elt = node.elt if hasattr(node, "elt") else node.value
        gens = node.generators
        # `[f(x) for x in <known list>]`: one element per item, so the list
        # keeps its length and each element its own value.
        if len(gens) == 1 and not gens[0].ifs and not isinstance(node, ast.DictComp):
            items = self.expand(self.eval(gens[0].iter, inner))
            if items is not None:
                out = []
                for item in items:
                    self.assign(gens[0].target, item, inner, None)
                    out.append(self.eval(elt, inner))
                return Seq(items=tuple(out))
        # Otherwise evaluate the element once with joined items; unknown length.
        # An iterator read an unknown number of times is at an unknown place.
        iters = self._iters_in_reach(frame.scope)
        for gen in gens:
            item = self.iter_item(self.eval(gen.iter, inner))
            self.assign(gen.target, item, inner, None)
            for cond in gen.ifs:
                self.eval(cond, inner)
        value = self.eval(elt, inner)
        for scope, name, before in iters:
            if scope.vars.get(name) is not before:
                scope.vars[name] = Iter(rest=UNKNOWN)
        if isinstance(node, ast.DictComp) or value is UNKNOWN:
            self.escape(value)
            return UNKNOWN
        # `[make_async_remote_copy(..., sem.at[d]) for d in range(n)]`: a list
        # of unknown length whose items are all like this one.
        return SeqOf(elem=value)

    @staticmethod
    def _iters_in_reach(scope: Scope) -> list:
        out, s = [], scope
        while s is not None and s.parent is not None:  # not the module's
            out.extend((s, k, v) for k, v in s.vars.items() if isinstance(v, Iter))
            s = s.parent
        return out

    def expand(self, it: Value, limit: int = 64) -> list[Value] | None:
        """The items of a finite iterable the engine knows element by element."""
        if isinstance(it, Seq) and it.keys is None and len(it.items) <= limit:
            return list(it.items)
        if isinstance(it, pyops.Range) and 0 <= it.n <= limit:
            return [Const(value=i) for i in range(it.n)]
        if isinstance(it, pyops.Enumerate):
            inner = self.expand(it.seq, limit)
            return None if inner is None else [Seq(items=(Const(value=i), v))
                                               for i, v in enumerate(inner)]
        if isinstance(it, pyops.Zip):
            parts = [self.expand(x, limit) for x in it.seqs]
            if any(p is None for p in parts) or not parts:
                return None
            return [Seq(items=tuple(col)) for col in zip(*parts)]
        return None

    expr_GeneratorExp = expr_ListComp
    expr_SetComp = expr_ListComp
    expr_DictComp = expr_ListComp

    def expr_Call(self, node: ast.Call, frame: Frame) -> Value:
        func = self.eval(node.func, frame)
        # A launch's cost estimate (often a call of the user's estimator) is
        # not modelled: not worked out either.
        skip = _COST if isinstance(func, Api) and func.name.endswith(_LAUNCH_TAILS) else None
        args, kwargs = self.eval_args(node, frame, skip)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "pop" \
                and isinstance(node.func.value, ast.Name):
            current = frame.scope.lookup(node.func.value.id)
            if isinstance(current, (Seq, Partial)) and (not isinstance(current, Seq)
                                                        or current.keys is None):
                item, rest = self._popped(current, args)
                frame.scope.vars[node.func.value.id] = rest
                return item
        if isinstance(node.func, ast.Name) and node.func.id == "next" and func is UNKNOWN \
                and args and isinstance(node.args[0], ast.Name):
            it = frame.scope.lookup(node.args[0].id)
            if isinstance(it, Iter):
                items, rests = [], []
                for rest in it.rests():
                    item, rest = self._popped(rest, [Arg(None, Const(value=0))]) \
                        if isinstance(rest, (Seq, Partial)) else (UNKNOWN, UNKNOWN)
                    items.append(item)
                    rests.append(rest)
                frame.scope.rebind(node.args[0].id, iter_of(rests))
                return join_all(items)
        if isinstance(node.func, ast.Attribute) and node.func.attr in pyops.MUTATORS:
            receiver = node.func.value
            if isinstance(receiver, ast.Name):
                self.mutate_list(frame.scope.vars, receiver.id, node.func.attr, args,
                                 frame.scope.lookup(receiver.id))
            elif isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name):
                owner = frame.scope.lookup(receiver.value.id)
                if isinstance(owner, Instance):
                    self.mutate_list(owner.attrs, receiver.attr, node.func.attr, args,
                                     owner.attrs.get(receiver.attr))
        return self.call(func, args, kwargs, node, frame)

    def mutate_list(self, where: dict, name: str, method: str, args: list[Arg],
                    current: Value | None) -> None:
        """`refs.append(r)` / `self.refs.extend(more)`: a list is a value here,
        so rebind the name to the grown list (or forget it when we cannot say)."""
        if isinstance(current, Partial) and method == "pop":
            where[name] = self._popped(current, args)[1]
            return
        if isinstance(current, Partial) and method in ("append", "extend") and len(args) == 1:
            added = Seq(items=(args[0].value,)) if method == "append" else args[0].value
            where[name] = pyops.concat_partial(current, added)
            return
        if not isinstance(current, (Seq, SeqOf)) or (isinstance(current, Seq)
                                                      and current.keys is not None):
            return
        if isinstance(current, Seq) and method == "pop":
            where[name] = self._popped(current, args)[1]
            return
        new: Value = UNKNOWN
        if isinstance(current, Seq) and method == "append" and len(args) == 1:
            new = Seq(items=current.items + (args[0].value,))
        elif isinstance(current, Seq) and method == "extend" and len(args) == 1 \
                and isinstance(args[0].value, Seq):
            new = Seq(items=current.items + args[0].value.items)
        elif method in ("append", "extend", "insert") and args:
            added = args[-1].value
            elems = [added] if method != "extend" else (
                list(added.items) if isinstance(added, Seq) else [added.elem]
                if isinstance(added, SeqOf) else [UNKNOWN])
            old = list(current.items) if isinstance(current, Seq) else [current.elem]
            new = SeqOf(elem=join_all(old + elems))
        if new is UNKNOWN:
            self.escape(current)
        where[name] = new

    def _popped(self, current: Value, args: list[Arg]) -> tuple[Value, Value]:
        """(item, what is left) for `xs.pop()` / `xs.pop(0)` / `xs.pop(-1)`."""
        where = args[0].value if args else Const(value=-1)
        i = where.value if isinstance(where, Const) and isinstance(where.value, int) else None
        if isinstance(current, Seq):
            items = current.items
            if i is None or not items or not -len(items) <= i < len(items):
                return UNKNOWN, UNKNOWN
            rest = items[:i] + items[i + 1:] if i != -1 else items[:-1]
            return items[i], Seq(items=rest)
        if isinstance(current, Partial):
            if i == 0:
                return (current.head[0] if current.head else UNKNOWN), current.drop_first()
            if i == -1:
                last = current.tail[-1] if current.tail else UNKNOWN
                return last, Partial(head=current.head[:-1], tail=current.tail[:-1],
                                     elem=current.elem)
        return UNKNOWN, UNKNOWN

    def eval_args(self, node: ast.Call, frame: Frame, skip: tuple = ()):
        """The call's arguments; keywords in `skip` are left unknown, unevaluated."""
        args: list[Arg] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, frame)
                if isinstance(v, Seq):
                    args.extend(Arg(None, item) for item in v.items)
                elif isinstance(v, SeqOf) and v.elem is not UNKNOWN:
                    args.append(Arg(a, StarUnknown(elem=v.elem)))
                else:
                    args.append(Arg(a, STAR_UNKNOWN))
                continue
            args.append(Arg(a, self.eval(a, frame)))
        kwargs: dict[str, Arg] = {}
        for kw in node.keywords:
            v = UNKNOWN if skip and kw.arg in skip else self.eval(kw.value, frame)
            if kw.arg is None:
                if isinstance(v, Seq) and v.keys is not None:
                    for k, item in zip(v.keys, v.items):
                        if isinstance(k, str):
                            kwargs[k] = Arg(None, item, keyword=k)
                continue
            kwargs[kw.arg] = Arg(kw.value, v, keyword=kw.arg)
        return args, kwargs

    def iter_item(self, it: Value) -> Value:
        if isinstance(it, SeqOf):
            return it.elem
        if isinstance(it, Partial):
            return it.elem
        if isinstance(it, Iter):
            return self.join_values([self.iter_item(r) for r in it.rests()])
        if isinstance(it, Seq):
            return self.join_values(list(it.items)) if it.items else UNKNOWN
        if isinstance(it, pyops.Zip):
            return Seq(items=tuple(self.iter_item(s) for s in it.seqs))
        if isinstance(it, pyops.Enumerate):
            return Seq(items=(UNKNOWN, self.iter_item(it.seq)))
        return UNKNOWN

    # ------------------------------------------------------------ calls

    def call(self, func: Value, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
             frame: Frame) -> Value:
        if isinstance(func, Api):
            if func.name.startswith(("pl.", "pltpu.")) and (frame.mod is None
                                                            or frame.mod is self.root):
                self.api_calls.append((node, func.name, args, kwargs))
            return declared(self.call_api(func.name, args, kwargs, node, frame), node)
        if isinstance(func, Seq) and func.origin.startswith("enum ") and len(args) == 1 \
                and isinstance(args[0].value, Const) and args[0].value in func.items:
            return args[0].value  # `Format(member)` is that member
        if isinstance(func, Func):
            return self.call_func(func, [a.value for a in args],
                                  {k: a.value for k, a in kwargs.items()}, frame, call_node=node)
        if isinstance(func, Choice):
            return self.join_values([self.call(option, args, kwargs, node, frame)
                                     for option in func.options])
        if isinstance(func, ClassVal):
            return self.instantiate(func, args, kwargs, frame)
        if isinstance(func, Bound):
            return self.call_method(func, args, kwargs, node, frame)
        if isinstance(func, binding.PallasCallable):
            return kernels.invoke_pallas_callable(self, func, args, frame)
        if isinstance(func, binding.PipelineCallable):
            return binding.run_pipeline(self, func, kwargs, frame)
        if isinstance(func, binding.KernelCallable):
            operands = None if any(isinstance(a.value, StarUnknown) for a in args) \
                else [a.value for a in args]
            # It runs where pl.kernel was called (its kernel context), once.
            made = next((f for kc, f in self.pending_kernels if kc is func), frame)
            return binding.run_pl_kernel(self, func, operands, made)
        if isinstance(func, binding.ScopedFunc):
            return func.call(self, args, frame)
        if isinstance(func, (binding.SpecClass, binding.SpecInit)):
            return func.call(self, args, kwargs, node, frame)
        if isinstance(func, binding.PartialApi) and func.makes_value():
            # `f = partial(jax.ShapeDtypeStruct, dtype=f32)`, then `f(shape)`
            return self.call_api(func.api, list(func.args) + list(args),
                                 {**dict(func.kwargs), **kwargs}, node, frame)
        if isinstance(func, binding.Decorator) and args:
            return func.apply(self, args[0].value, node, frame)
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "getattr" and func is UNKNOWN and len(args) in (2, 3) \
                and isinstance(args[1].value, Const) and isinstance(args[1].value.value, str) \
                and isinstance(args[0].value, (Instance, ModuleRef)):
            # `getattr(obj, "name")` is `obj.name` (an attribute the engine has
            # not seen may still exist: unknown, not the default)
            return self.attribute(args[0].value, args[1].value.value, node, frame)
        if name == "dict" and func is UNKNOWN and len(args) == 1 and not kwargs \
                and isinstance(args[0].value, pyops.Zip) and len(args[0].value.seqs) == 2:
            # `dict(zip(NAMES, refs))`: keys and values known one by one
            keys, values = args[0].value.seqs
            if isinstance(keys, Seq) and isinstance(values, Seq) and keys.keys is None \
                    and values.keys is None and len(keys.items) == len(values.items) \
                    and all(isinstance(k, Const) and isinstance(k.value, pyops.SIMPLE)
                            for k in keys.items):
                return Seq(items=values.items, keys=tuple(k.value for k in keys.items))
        if name == "dict" and func is UNKNOWN and not args:
            return Seq(items=tuple(a.value for a in kwargs.values()), keys=tuple(kwargs))
        if name == "super" and func is UNKNOWN and not args:
            # In a BlockSpec subclass's __init__: `super().__init__(...)`.
            holder = next((v for v in frame.scope.vars.values()
                           if isinstance(v, binding.SpecHolder)), None)
            if holder is not None:
                return holder
        if name in pyops.BUILTINS and func is UNKNOWN:
            return pyops.BUILTINS[name](args)
        for a in list(args) + list(kwargs.values()):
            self.escape(a.value)
        return UNKNOWN

    def instantiate(self, cls: ClassVal, args: list[Arg], kwargs: dict[str, Arg],
                    frame: Frame) -> Value:
        inst = Instance(cls)
        if cls.record:
            for name, a in zip(cls.fields, args):
                inst.attrs[name] = a.value
            for k, a in kwargs.items():
                inst.attrs[k] = a.value
            for k, v in cls.defaults.items():
                inst.attrs.setdefault(k, v)
        init = cls.methods.get("__post_init__" if cls.record else "__init__")
        if init is not None:
            self.call_func(Func(node=init, scope=cls.scope), [inst] + [a.value for a in args]
                           if not cls.record else [inst],
                           {k: a.value for k, a in kwargs.items()} if not cls.record else {},
                           frame)
        return inst

    def _lost(self, a: Value, b: Value) -> None:
        """Two values merged into Unknown: descriptors inside may still be
        started or waited where we can no longer see them."""
        self.escape(a)
        self.escape(b)

    def join_values(self, values: list[Value]) -> Value:
        out = join_all(values)
        if out is UNKNOWN:
            for v in values:
                self.escape(v)
        return out

    def escape(self, value: Value) -> None:
        """A descriptor handed to code we cannot follow: its fate is unknown."""
        if type(value) in _INERT:
            return
        if isinstance(value, Descriptor):
            for i in value.call_ids:
                self.events.dmas[i].escaped = True
        elif isinstance(value, Ref) and value.sem is not None:
            self.events.escaped_roots.add((self._kernel_id, value.root))
        elif isinstance(value, Seq):
            for item in value.items:
                self.escape(item)
        elif isinstance(value, SeqOf):
            self.escape(value.elem)
        elif isinstance(value, Func):
            self._escaped_funcs.append(value)
        elif isinstance(value, Choice):
            for option in value.options:
                self.escape(option)
        elif isinstance(value, Instance) and value not in self._escaping:
            self._escaping.add(value)
            for item in list(value.attrs.values()):
                self.escape(item)

    def call_func(self, func: Func, args: list[Value], kwargs: dict[str, Value],
                  frame: Frame, *, unknown_params: bool = False,
                  kernel: bool | None = None, param_origin: dict | None = None,
                  call_node: ast.AST | None = None, backend_name: str | None = None) -> Value:
        node = func.node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return UNKNOWN
        in_kernel = frame.kernel if kernel is None else kernel
        if frame.depth >= MAX_DEPTH:
            for v in args:
                self.escape(v)
            # Part of this kernel is not seen: claims about what it never
            # does (start, wait, use) cannot be made.
            self.events.truncated.add(frame.kernel_id)
            return UNKNOWN
        args = list(func.bound_args) + list(args)
        kwargs = {**dict(func.bound_kwargs), **kwargs}
        if not unknown_params and pyops.wrong_arity(node, args, kwargs):
            # Python would raise TypeError here: our model of this call is off
            # (or the code is broken); either way, nothing to judge in it.
            for v in list(args) + list(kwargs.values()):
                self.escape(v)
            return UNKNOWN
        kid = frame.kernel_id
        if kernel is True and not frame.kernel_id:
            self._kernel_count += 1
            kid = self._kernel_count
            self.kernel_backend[kid] = backend_name or self.file_backend
        scope_parent = func.scope if isinstance(func.scope, Scope) else self.module_scope
        mod = scope_parent.module or self.root
        # Code in another file remembers the call here that led to it.
        site = None if mod is self.root else (frame.site or call_node or self._root_stmt)
        key = (id(node), in_kernel, kid, unknown_params, pyops.args_key(args, kwargs),
               id(func.scope), id(site) if site is not None else 0,
               tuple((k, v.value) for k, v in self.pins.items()) if self.pins else ())
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # recursion
            self.events.truncated.add(frame.kernel_id)
            return UNKNOWN
        self._active.add(key)
        self._entered.add(id(node))
        if unknown_params:
            self._unknown_run.add(id(node))
        saved_kid, self._kernel_id = self._kernel_id, kid
        saved_site, self._site = self._site, site
        try:
            scope = Scope(scope_parent)
            inner = Frame(scope, kernel=in_kernel, depth=frame.depth + 1, kernel_id=kid,
                          mod=mod, site=site)
            self.bind_params(node, args, kwargs, inner, unknown_params, param_origin or {})
            if isinstance(node, ast.Lambda):
                result = self.eval(node.body, inner)
            else:
                self.exec_body(node.body, inner)
                result = self.join_values(inner.returns) if inner.returns else Const(value=None)
                if inner.yields is not None:
                    elem = self.join_values(inner.yields)
                    result = SeqOf(elem=elem) if elem is not UNKNOWN else UNKNOWN
        finally:
            self._active.discard(key)
            self._kernel_id = saved_kid
            self._site = saved_site
        self._memo[key] = result
        return result

    def bind_params(self, node, args: list[Value], kwargs: dict[str, Value], frame: Frame,
                    unknown_params: bool, origins: dict) -> None:
        a = node.args
        positional = list(a.posonlyargs) + list(a.args)
        # Arguments after a `*args` of unknown length: positions unknown,
        # unless the signature fixes them (no defaults, no *args): then the
        # arguments after it are the last parameters, `f(*xs, out, buf)`.
        star_at = next((i for i, v in enumerate(args) if isinstance(v, StarUnknown)), None)
        star = star_at is not None
        from_back: dict[str, Value] = {}
        after: list[Value] = []
        args_star = args[star_at] if star else None
        if star:
            after = args[star_at + 1:]
            args = args[:star_at]
            if after and not pyops.has_star(after) and a.vararg is None and not a.defaults \
                    and not unknown_params and len(args) + len(after) <= len(positional) \
                    and not any(p.arg in kwargs for p in positional):
                tail = positional[len(positional) - len(after):]
                from_back = {p.arg: v for p, v in zip(tail, after)}
        values: dict[str, Value] = {}
        for i, p in enumerate(positional):
            if unknown_params:
                v = kwargs.get(p.arg, UNKNOWN)  # a launcher variant fixes its flags
            elif star and i >= star_at:
                # Given by keyword, a parameter takes no positional argument.
                v = kwargs[p.arg] if p.arg in kwargs else from_back.get(p.arg, UNKNOWN)
            elif i < len(args):
                v = args[i]
            elif p.arg in kwargs:
                v = kwargs[p.arg]
            else:
                v = self._default(a, p, frame)
            values[p.arg] = v
        if a.vararg is not None:
            extra = args[len(positional):] if not (unknown_params or star) else None
            if extra is not None:
                values[a.vararg.arg] = Seq(items=tuple(extra), origin=VARARGS)
            elif star and not unknown_params and star_at >= len(positional):
                # `*refs` of unknown length: its first items are the known
                # arguments before the unknown part, its last the ones after.
                head = tuple(args[len(positional):star_at])
                tail = tuple(after) if after and not pyops.has_star(after) else ()
                middle = [v.elem for v in [args_star] + list(after)
                          if isinstance(v, StarUnknown) and v.elem is not UNKNOWN]
                if middle and not head and not tail and len(middle) == len(after) + 1:
                    # all of it is of one known kind (`*blocks` of computed specs)
                    values[a.vararg.arg] = SeqOf(elem=join_all(middle))
                else:
                    values[a.vararg.arg] = Partial(
                        head=head, tail=tail, elem=join_all(list(head) + list(tail) + middle))
            else:
                values[a.vararg.arg] = UNKNOWN
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if unknown_params:
                values[p.arg] = kwargs.get(p.arg, UNKNOWN)
            elif p.arg in kwargs:
                values[p.arg] = kwargs[p.arg]
            else:
                values[p.arg] = self._const_default(d)
        if a.kwarg is not None:
            named = {p.arg for p in positional} | {p.arg for p in a.kwonlyargs}
            extra_kw = {k: v for k, v in kwargs.items() if k not in named}
            values[a.kwarg.arg] = UNKNOWN if unknown_params else Seq(
                items=tuple(extra_kw.values()), keys=tuple(extra_kw))
        for p in positional + list(a.kwonlyargs) + ([a.vararg] if a.vararg else []) \
                + ([a.kwarg] if a.kwarg else []):
            v = values.get(p.arg, UNKNOWN)
            if p.arg in origins and isinstance(v, (Ref, Seq)) and not v.origin:
                v = replace(v, origin=origins[p.arg])
            frame.scope.vars[p.arg] = v
            if frame.kernel:
                self.record_param(p, v, frame)

    def record_param(self, p: ast.arg, value: Value, frame: Frame) -> None:
        if not self.want_names:
            return
        name = self._param_names.get(id(p))
        if name is None:
            name = self._param_names[id(p)] = ast.Name(
                id=p.arg, ctx=ast.Load(), lineno=p.lineno, col_offset=p.col_offset,
                end_lineno=p.lineno, end_col_offset=p.col_offset + len(p.arg.encode("utf-8")))
        self.record_name(name, value, frame, is_param=True)

    def _default(self, a: ast.arguments, p: ast.arg, frame: Frame) -> Value:
        positional = list(a.posonlyargs) + list(a.args)
        idx = positional.index(p) - (len(positional) - len(a.defaults))
        if idx >= 0:
            return self._const_default(a.defaults[idx])
        return UNKNOWN

    def _const_default(self, d) -> Value:
        if isinstance(d, ast.Constant):
            return Const(value=d.value)
        return UNKNOWN

    def apply_decorator(self, dec: ast.expr, func: Value, frame: Frame) -> Value:
        """Decorators that run the body right away (pl.when, pl.loop,
        run_scoped via functools.partial, core_map, pl.kernel) are entered
        here; any other decorator (jax.jit, functools.wraps...) leaves the
        function as it is."""
        d = self.eval(dec, frame)
        if isinstance(d, binding.Decorator):
            return d.apply(self, func, dec, frame)
        return func

    def call_method(self, bound: Bound, args: list[Arg], kwargs: dict[str, Arg],
                    node: ast.Call, frame: Frame) -> Value:
        obj = bound.obj
        if isinstance(obj, Descriptor):
            attr = node.func if isinstance(node.func, ast.Attribute) else None
            op = DescOp(op=bound.name, node=node, attr_node=attr,
                        priority=kwargs.get("priority") or (args[0] if args else None),
                        add=kwargs.get("add"))
            for i in obj.call_ids:
                self.events.dmas[i].ops.append(op)
            return Const(value=None)
        if isinstance(obj, Ref):
            if bound.name == "bitcast":
                return replace(as_view(obj, None, self.segment(node)), dtype=None)
            if bound.name == "reshape":
                shape = binding.shape_of([a.value for a in args]) if args else None
                return as_view(obj, shape, self.segment(node))
            if bound.name == "transpose":
                return as_view(obj, None, self.segment(node))
        if isinstance(obj, Array):
            return Array(origin=obj.origin)
        return UNKNOWN

    # ------------------------------------------------------------ Pallas APIs

    def call_api(self, name: str, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
                 frame: Frame) -> Value:
        """A call of a Pallas / JAX API: modelled by its family in apis/."""
        return apis.call(self, name, args, kwargs, node, frame)


# ---------------------------------------------------------------- helpers


def _harmless_base(value: Value, node: ast.expr) -> bool:
    """Bases that add no behaviour the engine would miss."""
    if isinstance(node, ast.Name) and node.id == "object":
        return True
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        node = node.value
    name = value.name if isinstance(value, Api) else getattr(node, "id", getattr(node, "attr", ""))
    return name.split(".")[-1] in ("ABC", "Generic", "Protocol")


_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}


# Node type -> handler (`stmt_If`, `expr_Call`...): one dict lookup per node.
_STMT = {getattr(ast, n[5:]): f for n, f in vars(Interpreter).items()
         if n.startswith("stmt_") and hasattr(ast, n[5:])}
_EXPR = {getattr(ast, n[5:]): f for n, f in vars(Interpreter).items()
         if n.startswith("expr_") and hasattr(ast, n[5:])}


# Values `escape` has nothing to do for (checked by exact type: the fast path).
_INERT = frozenset({type(UNKNOWN), Const, Array, Api, Spec, Alloc, ShapeDtype, SliceVal,
                    GridSpec, ModuleRef, Imported, type(None)})


MAX_UNROLL = 8  # a launcher's loop over this many known items runs item by item


def _real(path: str) -> str:
    import os
    return os.path.realpath(path)
