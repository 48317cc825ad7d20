"""The driver: what of a file runs, and how often. `run` executes the module
body, then finds what no call here reached and runs it on its own:
kernels of pallas_calls never called with operands (`_flush_pending`),
functions handed to code the engine does not model (`_run_escaped`),
kernel code no launch reaches (`_run_unlaunched`, standalone.py), defs
nobody calls (`_drive`, builders and their returned launchers) and each
launcher flag variant (variants.py). It also dedups kernel runs with equal
arguments (`same_kernel_run`) and frees the analysis (`release`). Evaluation
itself is the other mixins' job."""
from __future__ import annotations

import ast
import sys

from pallas_lsp.engine import buffered, cells, flow, pyops, relevance, standalone, variants
from pallas_lsp.engine.binding.kernel import run_pl_kernel
from pallas_lsp.engine.binding.pallas_call import run_kernel
from pallas_lsp.engine.binding.pipeline import run_pipeline
from pallas_lsp.engine.frames import (MAX_DEPTH, MAX_ESCAPED_CLOSURES, MAX_STEPS, MAX_VARIANT_RUNS,
                                     Budget, Frame, Scope, scopes_made)
from pallas_lsp.engine.model import Const, Func, Ref, Seq, Space, Value
from pallas_lsp.engine.values import Choice, Instance


PYTHON_FRAMES_PER_CALL = 25  # a chain of plain helpers nests 8; `if`, `with`, API bodies add more
VARIANTS = (f"its flag variants were not all run: the analysis ran {MAX_VARIANT_RUNS:,} launcher "
            f"variants (its work budget)")


class DriverMixin:
    """What runs and how often: the module, then what no call reached."""

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
        self._func_defaults.clear()
        self._kernel_runs_by_args.clear()
        self._first_nested.clear()

    def run(self) -> None:
        old = sys.getrecursionlimit()
        # A helper call nests about ten Python frames (call, body, statement,
        # expression...), more through decorators and API models: room for
        # MAX_DEPTH of them and the code around. (Python 3.11+ keeps Python
        # frames off the C stack; a RecursionError left over is one call not
        # followed, see call_func.)
        sys.setrecursionlimit(max(old, PYTHON_FRAMES_PER_CALL * MAX_DEPTH + 4000))
        outer, scopes_made.scopes = getattr(scopes_made, "scopes", None), self._scopes
        try:
            frame = Frame(self.module_scope, kernel=False, mod=self.root)
            if self.path and cells.document_kind(self.path) in (cells.MARKDOWN, cells.RST):
                # A page shows snippets before the program that imports their
                # names (`pltpu.make_async_copy(...)` on line 90, the imports on
                # line 187): its top-level imports are bound first. (A
                # notebook's cells ran in order: its names are taken as they run.)
                self.exec_body([s for s in self.src.tree.body
                                if isinstance(s, (ast.Import, ast.ImportFrom))], frame)
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
            dead = self.src.dead  # defs after a `return`: never defined, never run
            for node in functions:
                if id(node) in dead:
                    continue
                if id(node) not in self._entered and (id(node) in relevant
                                                      or id(node) in self._buffered_methods):
                    # A nested def runs in the closure it was defined in (a
                    # builder's `make_call` sees the builder's `kernel`).
                    func = self._closures.get(id(node)) or Func(node=node, scope=self.module_scope)
                    hooked = buffered.buffered_self(self._buffered_methods.get(id(node)), node)
                    if hooked:
                        # Kernel code (emit_pipeline calls it), but the
                        # pipeline around it is not seen: no protocol checks.
                        self.events.truncated.add(self.kernel_count + 1)
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
                flags = variants.flag_variants(node)
                runs = [(v, {}) for v in flags]
                optional = variants.optional_variants(node, self.src.lines)
                if optional and not runs:
                    runs.append(({}, {}))  # the defaults: every optional argument None
                runs += [(v, {}) for v in optional]
                demanded = variants.assert_variants(node)
                empty = variants.vararg_variants(node)
                runs += [(v, {}) for v in demanded + empty]
                # ... and with each flag flipped, too: a kernel that only the
                # configuration its asserts demand, or the empty `*args`, lets
                # the engine bind has flagged paths of its own (`if interpret:`,
                # `if poison_scratch:` in its body).
                runs += variants.combined(flags[1:], demanded + empty)
                runs += [({}, pins) for pins in variants.local_flag_pins(node)]
                defaults = self._default_values(node, frame) if runs else {}
                for n, (fixed, pins) in enumerate(runs, start=1):
                    if not self.work.variant():
                        self.work.not_followed(node, VARIANTS)
                        break
                    fixed = {**defaults, **fixed}
                    self.variant = (id(node), n)
                    self.pins = pins
                    func = Func(node=node, scope=self.module_scope)
                    self._drive(func, fixed, frame)
                    self._flush_pending()
                    self._run_escaped(frame)
                self.variant = 0
                self.pins = {}
            self._run_test_cases(functions, relevant, frame)
        except Budget:
            self.events.truncated.add(-1)  # every kernel
            self.incomplete = (f"the analysis stopped after {MAX_STEPS:,} steps (the file is very "
                               f"large or its code very repetitive); what follows was not checked")
        except RecursionError:
            self.incomplete = "the analysis stopped: code nested too deeply to follow"
        finally:
            sys.setrecursionlimit(old)
            scopes_made.scopes = outer

    def _run_test_cases(self, functions, relevant, frame: Frame) -> None:
        """A parametrized test once per literal case (variants.parametrize_cases),
        its parameters bound to the case's values: the arrays it builds from
        them reach the launches it makes."""
        for node in functions:
            if id(node) not in relevant:
                continue
            for n, (label, case) in enumerate(variants.parametrize_cases(node), start=1):
                fixed = {**self._method_self(node),
                         **{k: self._case_value(v, frame) for k, v in case.items()}}
                self.variant, self.variant_label = (id(node), "case", n), label
                self._drive(Func(node=node, scope=self.module_scope), fixed, frame)
                self._flush_pending()
                self._run_escaped(frame)
        self.variant, self.variant_label = 0, ""

    def _case_value(self, node: ast.AST, frame: Frame) -> Value:
        """A test case's literal value; a builtin type (`tuple`, `dict`) is kept
        as itself, so the test's `if structure is dict:` picks its branch."""
        t = pyops.builtin_type(node, lambda n: self.binding_of(n, frame))
        return Const(value=t) if t is not None else self.eval(node, frame)

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
                self._first_nested[id(kernel.node)] = (scope, rest, self.kernel_count + 1,
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
            self._kernel_runs_by_args[key] = (self.kernel_count + 1, values)
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
            node = id(func.node)
            if node in self._idle_defs:
                continue
            if node in self._entered and not self._other_closure(func):
                continue
            self._escaped_runs.setdefault(node, set()).add(self._closure_key(func))
            if not self._run_unlaunched(func, frame):
                self.call_func(func, [], {}, frame, unknown_params=True)
            self._flush_pending()

    def _other_closure(self, func: Func) -> bool:
        """A function already run as escaped, escaping again from another run
        of its builder (`for pattern in PATTERNS: fn = build(pattern)`, each
        handed to a compile helper): its closure may pick other branches, so
        it runs again while its closure values are new (at most
        MAX_ESCAPED_CLOSURES times)."""
        runs = self._escaped_runs.get(id(func.node))
        if runs is None or len(runs) >= MAX_ESCAPED_CLOSURES \
                or not isinstance(func.scope, Scope) or func.scope is self.module_scope:
            return False
        return self._closure_key(func) not in runs

    def _closure_key(self, func: Func):
        if not isinstance(func.scope, Scope) or func.scope is self.module_scope:
            return None
        free = self._free.get(id(func.node))
        if free is None:
            free = self._free[id(func.node)] = flow.free_names(func.node)
        return pyops.args_key(flow.closure_values((func.scope.parent, func.scope.vars), free), {})

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
        self.events.truncated.add(self.kernel_count + 1)
        self.events.standalone.add(self.kernel_count + 1)
        self.events.standalone_defs[self.kernel_count + 1] = node
        here = src is None or src is self.src  # (this file's defs and globals only)
        refs = {p: Ref(origin=f"{p} (a Ref by its use; no launch seen)", space=Space.UNKNOWN)
                for p in standalone.ref_params(node, self._defs_by_name() if here else None)}
        if here and self._unbound is None:
            self._unbound = standalone.unbound_names(self.src.tree)
        for name in standalone.free_refs(node, self._unbound) if here and self._unbound else ():
            # a page's placeholder for a kernel's parameter (never bound in the file)
            self.module_scope.vars.setdefault(name, Ref(
                origin=f"{name} (a Ref by its use; never bound here)", space=Space.UNKNOWN))
        me = self._method_self(node)
        inst = me.get("self")
        if isinstance(inst, Instance):  # so is the state it keeps (`self.sems.at[slot]`)
            for name in standalone.ref_attrs(node):
                inst.attrs.setdefault(name, Ref(
                    origin=f"self.{name} (a Ref by its use; no launch seen)", space=Space.UNKNOWN))
        self.call_func(func, [], {**me, **refs}, frame, unknown_params=True, kernel=True)
        return True

    def _defs_by_name(self) -> dict:
        """The file's module-level functions by name (one each), for Ref-ness
        by use handed through helpers."""
        if self._module_defs is None:
            self._module_defs = {n.name: n for n in self.src.tree.body
                                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return self._module_defs

    def _flush_pending(self) -> None:
        """Kernels of pallas_calls that were never called with operands."""
        while self.pending or self.pending_pipelines or self.pending_kernels:
            while self.pending_kernels:
                kc, frame = self.pending_kernels.pop()
                run_pl_kernel(self, kc, None, frame)
            while self.pending:
                pc, frame = self.pending.pop()
                run_kernel(self, pc, None, frame)
            while self.pending_pipelines:
                pipe, frame = self.pending_pipelines.pop()
                run_pipeline(self, pipe, None, frame)

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


# Statements (and parts of them) that hold other statements.
_HAS_BODY = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor,
             ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match, ast.excepthandler,
             ast.match_case) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
