"""Calls: `expr_Call` evaluates arguments and dispatches on the callee
(a Pallas / JAX `Api` goes to apis/, a user `Func` is entered with its
parameters bound, classes are instantiated, launch results and decorators
go to binding/, a few builtins are modelled); `call_func` memoises and
bounds helper calls; `escape` marks what is handed to code the engine
cannot follow."""
from __future__ import annotations

import ast
import builtins

from pallas_lsp.engine import apis, pyops, variants
from pallas_lsp.engine.apis import arrays, kernels, pytrees
from pallas_lsp.engine.binding import inherited, unseen
from pallas_lsp.engine.binding.inherited import DeferredLauncher, InheritedLauncher
from pallas_lsp.engine.binding.decorators import (Decorator, PartialApi, RunStateDecorator,
                                                  ScopedFunc, StateFunc)
from pallas_lsp.engine.binding.kernel import KernelCallable, run_pl_kernel
from pallas_lsp.engine.binding.pallas_call import PallasCallable
from pallas_lsp.engine.binding.pipeline import PipelineCallable, run_pipeline
from pallas_lsp.engine.binding.shapes import shape_of
from pallas_lsp.engine.binding.specs import SpecClass, SpecHolder, SpecInit
from pallas_lsp.engine.events import Arg, DescOp
from pallas_lsp.engine.frames import DEEP, PYTHON_DEPTH, Frame, Scope
from pallas_lsp.engine.model import Api, Array, Const, Descriptor, Func, Ref, Seq, Value
from pallas_lsp.engine.records import replace
from pallas_lsp.engine.values import (STAR_UNKNOWN, UNKNOWN, VARARGS, Alloc, Bound, Choice,
                                      ClassVal, GridSpec, Imported, Instance, Iter, ModuleRef,
                                      Partial, SeqOf, ShapeDtype, SliceVal, Spec, StarUnknown,
                                      SuperCell, TreeDef, as_view, iter_of, join_all, tuple_items)
from pallas_lsp.engine.values import declared


class CallsMixin:
    """Calls and what escapes them (see the module docstring)."""

    def expr_Call(self, node: ast.Call, frame: Frame) -> Value:
        method = self._super_method(node, frame)
        if method is not None:
            args, kwargs = self.eval_args(node, frame)
            return self.call(method, args, kwargs, node, frame)
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

    def _super_method(self, node: ast.Call, frame: Frame) -> Value | None:
        """`super().name(...)` in a method of the user's class: the method
        of the first base (of the user's) that has it, on the same instance."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call)
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "super"
                and not f.value.args):
            return None
        cell = frame.scope.lookup("__class__")
        if not isinstance(cell, SuperCell):
            return None
        for parent in cell.cls.parents:
            self._property_frame = frame
            method = self.method_value(parent, f.attr, cell.obj)
            if method is not None:
                return method
        # `super().pallas_call(...)` overriding a launcher of an unseen base
        return inherited.launcher(f.attr) if cell.cls.open else None

    def eval_args(self, node: ast.Call, frame: Frame, skip: tuple = ()):
        """The call's arguments; keywords in `skip` are left unknown, unevaluated."""
        args: list[Arg] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, frame)
                v = tuple_items(v) or v
                if isinstance(v, Seq):
                    args.extend(Arg(None, item) for item in v.items)
                elif isinstance(v, SeqOf) and v.elem is not UNKNOWN:
                    args.append(Arg(a, StarUnknown(elem=v.elem)))
                elif isinstance(v, Partial) and (v.head or v.tail):
                    # `body(*refs)` with `refs` known at its ends: those keep
                    # their places, the middle is of unknown length.
                    args.extend(Arg(None, item) for item in v.head)
                    middle = v.middle if v.middle is not UNKNOWN else \
                        v.rest if not v.tail else UNKNOWN
                    args.append(Arg(a, StarUnknown(elem=middle) if middle is not UNKNOWN
                                    else STAR_UNKNOWN))
                    args.extend(Arg(None, item) for item in v.tail)
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

    def call(self, func: Value, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
             frame: Frame) -> Value:
        if isinstance(func, Api) and func.name in _NAMEDTUPLES and len(args) == 2:
            return self.namedtuple_class(args[0].value, args[1].value, frame)
        if isinstance(func, Api) and inherited.foreign(func.name):
            # a helper the engine cannot see, handed a kernel and its scratch
            launched = unseen.launch(self, args, kwargs, node, frame)
            if launched is not None:
                return launched
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
        if isinstance(func, PallasCallable):
            return kernels.invoke_pallas_callable(self, func, args, frame)
        if isinstance(func, PipelineCallable):
            return run_pipeline(self, func, kwargs, frame)
        if isinstance(func, KernelCallable):
            operands = None if any(isinstance(a.value, StarUnknown) for a in args) \
                else [a.value for a in args]
            # It runs where pl.kernel was called (its kernel context), once.
            made = next((f for kc, f in self.pending_kernels if kc is func), frame)
            return run_pl_kernel(self, func, operands, made)
        if isinstance(func, (ScopedFunc, StateFunc)):
            return func.call(self, args, frame)
        if isinstance(func, (InheritedLauncher, DeferredLauncher)):
            return func.call(self, args, kwargs, node, frame)
        if isinstance(func, (SpecClass, SpecInit)):
            return func.call(self, args, kwargs, node, frame)
        if isinstance(func, PartialApi) and func.makes_value():
            # `f = partial(jax.ShapeDtypeStruct, dtype=f32)`, then `f(shape)`
            return self.call_api(func.api, list(func.args) + list(args),
                                 {**dict(func.kwargs), **kwargs}, node, frame)
        if isinstance(func, Decorator) and args:
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
                           if isinstance(v, SpecHolder)), None)
            if holder is not None:
                return holder
        if name in pyops.BUILTINS and func is UNKNOWN:
            return pyops.BUILTINS[name](args)
        if func is UNKNOWN and name not in _BUILTIN_NAMES:
            launched = unseen.launch(self, args, kwargs, node, frame)
            if launched is not None:
                return launched
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
        init_name = "__post_init__" if cls.record else "__init__"
        init = cls.methods.get(init_name)
        if init is not None:
            self.call_func(Func(node=init, scope=cls.method_scopes.get(init_name, cls.scope)),
                           [inst] + [a.value for a in args]
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
        if self.active_kernel and isinstance(value, (Ref, Func, StateFunc)):
            self.events.opaque.add(self.active_kernel)
        if isinstance(value, Descriptor):
            for i in value.call_ids:
                self.events.dmas[i].escaped = True
        elif isinstance(value, Ref) and value.sem is not None:
            self.events.escaped_roots.add((self.active_kernel, value.root))
        elif isinstance(value, Seq):
            for item in value.items:
                self.escape(item)
        elif isinstance(value, SeqOf):
            self.escape(value.elem)
        elif isinstance(value, Func):
            self._escaped_funcs.append(value)
        elif isinstance(value, StateFunc):
            self.escape(value.func)
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
        if self.work.too_deep(frame.depth):
            return self._not_followed(node, args, kwargs, frame.kernel_id, DEEP)
        args = list(func.bound_args) + list(args)
        kwargs = {**dict(func.bound_kwargs), **kwargs}
        if not unknown_params and pyops.wrong_arity(node, args, kwargs):
            # Python would raise TypeError here: our model of this call is off
            # (or the code is broken); either way, nothing to judge in it.
            for v in list(args) + list(kwargs.values()):
                self.escape(v)
            return UNKNOWN
        if func.captured and not any(isinstance(v, StarUnknown) for v in args):
            # defaults the def took when it ran, for parameters left out
            given = {p.arg for p in (list(node.args.posonlyargs) + list(node.args.args))[:len(args)]}
            kwargs = {**{k: v for k, v in func.captured if k not in given}, **kwargs}
        kid = frame.kernel_id
        if kernel is True and not frame.kernel_id:
            self.kernel_count += 1
            kid = self.kernel_count
            self.kernel_backend[kid] = backend_name or self.file_backend
        scope_parent = func.scope if isinstance(func.scope, Scope) else self.module_scope
        mod = scope_parent.module or self.root
        # Code in another file remembers the call here that led to it.
        site = None if mod is self.root else (frame.site or call_node or self._root_stmt)
        # Kernel code run without a launch (standalone.py) makes no protocol
        # claims: its runs share helper results, so a chain run from each
        # of its links costs one pass, not one per link.
        key = (id(node), in_kernel, kid if kid not in self.events.standalone else -2,
               unknown_params, pyops.args_key(args, kwargs),
               id(func.scope), id(site) if site is not None else 0,
               tuple((k, v.value) for k, v in self.pins.items()) if self.pins else ())
        if key in self._memo:
            return self._memo[key]
        if key in self._active:  # recursion
            self.events.truncated.add(frame.kernel_id)
            return UNKNOWN
        why = self.work.enter(id(node))
        if why:
            return self._not_followed(node, args, kwargs, kid, why)
        self._active.add(key)
        self._entered.add(id(node))
        if unknown_params:
            self._unknown_run.add(id(node))
        saved_kid, self.active_kernel = self.active_kernel, kid
        saved_site, self.active_site = self.active_site, site
        try:
            scope = Scope(scope_parent)
            inner = Frame(scope, kernel=in_kernel, depth=frame.depth + 1, kernel_id=kid,
                          mod=mod, site=site)
            self.bind_params(node, args, kwargs, inner, unknown_params, param_origin or {})
            cls = self._method_class.get(id(node))
            if cls is not None and args and cls.kinds.get(node.name) == "method":
                scope.vars["__class__"] = SuperCell(cls=cls, obj=args[0])
            if isinstance(node, ast.Lambda):
                result = self.eval(node.body, inner)
            else:
                self.exec_body(node.body, inner)
                result = self.join_values(inner.returns) if inner.returns else Const(value=None)
                if inner.yields is not None:
                    elem = self.join_values(inner.yields)
                    result = SeqOf(elem=elem) if elem is not UNKNOWN else UNKNOWN
        except RecursionError:  # a net under MAX_DEPTH (frames.py): Python's own stack ran out
            result = self._not_followed(node, args, kwargs, kid, PYTHON_DEPTH)
        finally:
            self.work.leave(id(node))
            self._active.discard(key)
            self.active_kernel = saved_kid
            self.active_site = saved_site
        self._memo[key] = result
        return result

    def _not_followed(self, node, args: list[Value], kwargs: dict[str, Value], kid: int,
                      why: str) -> Value:
        """A call the work budget does not follow: its result is unknown, what
        it was handed escapes, and part of the kernel is unseen, so no claims
        about what it never does (start, wait, use) are made."""
        for v in list(args) + list(kwargs.values()):
            self.escape(v)
        self.events.truncated.add(kid)
        self.work.not_followed(node, why)
        return UNKNOWN

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
        # What a parameter the `*args` fills holds: known when the signature
        # fixes which parameters the arguments after it take (or none follow).
        inside = args_star.elem if star and (from_back or not after) else UNKNOWN
        values: dict[str, Value] = {}
        for i, p in enumerate(positional):
            if unknown_params:
                # a launcher variant fixes its flags; a def named as the default is
                # the kernel a caller gets when it names none
                v = kwargs[p.arg] if p.arg in kwargs else self._func_default(a, p)
            elif star and i >= star_at:
                # Given by keyword, a parameter takes no positional argument;
                # one the `*args` fills is of its items' kind, when known.
                v = kwargs[p.arg] if p.arg in kwargs else from_back.get(
                    p.arg, inside if i < len(positional) - len(a.defaults) else UNKNOWN)
            elif i < len(args):
                v = args[i]
            elif p.arg in kwargs:
                v = kwargs[p.arg]
            else:
                v = self._default(a, p, frame)
            values[p.arg] = v
        if a.vararg is not None:
            extra = args[len(positional):] if not (unknown_params or star) else None
            if unknown_params and a.vararg.arg in kwargs:  # a launcher variant fixes it
                values[a.vararg.arg] = kwargs[a.vararg.arg]
            elif extra is not None:
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
                    inner = args_star.elem if not pyops.has_star(after) else UNKNOWN
                    # `elem` is every item's kind only when the unknown parts' are known.
                    stars = [v for v in [args_star] + list(after) if isinstance(v, StarUnknown)]
                    whole = all(v.elem is not UNKNOWN for v in stars)
                    values[a.vararg.arg] = Partial(
                        head=head, tail=tail, elem=join_all(list(head) + list(tail) + middle)
                        if whole else UNKNOWN, middle=inner, disjoint=True)
            else:
                values[a.vararg.arg] = UNKNOWN
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if unknown_params:
                values[p.arg] = kwargs[p.arg] if p.arg in kwargs else \
                    self._func_defaults.get(id(d), UNKNOWN)
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
            if v is UNKNOWN and p.annotation is not None and not frame.kernel:
                v = self._annotated_record(p.annotation, frame)
            if p.arg in origins and isinstance(v, (Ref, Seq)) and not v.origin:
                v = replace(v, origin=origins[p.arg])
            frame.scope.vars[p.arg] = v
            if frame.kernel:
                self.record_param(p, v, frame)

    def _annotated_record(self, annotation, frame: Frame) -> Value:
        """`metadata: Metadata` where `Metadata` is a NamedTuple of the file
        and no value is known: a tuple of its fields, each unknown. Its
        length is known (`num_scalar_prefetch=len(metadata)`, `*metadata`)."""
        if not isinstance(annotation, ast.Name):
            return UNKNOWN
        cls = frame.scope.lookup(annotation.id)
        if not (isinstance(cls, ClassVal) and cls.tuple_like and cls.fields):
            return UNKNOWN
        inst = Instance(cls)
        for f in cls.fields:
            inst.attrs[f] = UNKNOWN
        return inst

    def _default(self, a: ast.arguments, p: ast.arg, frame: Frame) -> Value:
        positional = list(a.posonlyargs) + list(a.args)
        idx = positional.index(p) - (len(positional) - len(a.defaults))
        if idx >= 0:
            return self._const_default(a.defaults[idx])
        return UNKNOWN

    def _func_default(self, a: ast.arguments, p: ast.arg) -> Value:
        v = self._default(a, p, None)
        return v if isinstance(v, Func) else UNKNOWN

    def _const_default(self, d) -> Value:
        if isinstance(d, ast.Constant):
            return Const(value=d.value)
        return self._func_defaults.get(id(d), UNKNOWN)  # `body=_kernel`

    def apply_decorator(self, dec: ast.expr, func: Value, frame: Frame) -> Value:
        """Decorators that run the body right away (pl.when, pl.loop,
        run_scoped via functools.partial, core_map, pl.kernel) are entered
        here; any other decorator (jax.jit, functools.wraps...) leaves the
        function as it is."""
        d = self.eval(dec, frame)
        if isinstance(d, Decorator):
            return d.apply(self, func, dec, frame)
        if isinstance(d, Api) and kernels.is_run_state(d.name):
            return RunStateDecorator().apply(self, func, dec, frame)  # `@pl.run_state`
        if isinstance(d, Func) and isinstance(func, Func):
            # The user's decorator (or a partial of it, `partial(self.pallas_call,
            # out_shape=...)`), run as Python does: a launcher it reaches
            # (`pl.pallas_call(f, ...)`, `pl.kernel(...)`) takes the def as its
            # kernel, and the name is what the decorator returns.
            before = self._launch_count()
            out = self.call_func(d, [func], {}, frame, call_node=dec)
            if isinstance(out, _DECORATED):
                return out
            if self._launch_count() != before:
                return UNKNOWN  # a launcher took the def: the name is its (unknown) result
        if (d is UNKNOWN or isinstance(d, Func)) and launch_config(dec):
            # A decorator the engine cannot follow, given a launch's
            # configuration (`@self.kernel(out_shape=..., mesh=...)` of a base
            # class it cannot see): the def is a kernel, the name the
            # launcher's result. Calls of the name are not calls of the def
            # (arrays are not its Refs); the def runs on its own, later.
            self.escape(func)
            return UNKNOWN
        return func

    def _launch_count(self) -> tuple:
        return (len(self.events.launches), len(self.pending), len(self.pending_kernels),
                len(self.pending_pipelines))

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
                shape = shape_of([a.value for a in args]) if args else None
                return as_view(obj, shape, self.segment(node))
            if bound.name == "transpose":
                return as_view(obj, None, self.segment(node))
        if isinstance(obj, Array):
            return arrays.method(obj, bound.name, args, kwargs, node)
        if isinstance(obj, TreeDef) and bound.name == "unflatten" and len(args) == 1:
            return pytrees.unflatten(obj.tree, args[0].value)
        return UNKNOWN

    def call_api(self, name: str, args: list[Arg], kwargs: dict[str, Arg], node: ast.Call,
                 frame: Frame) -> Value:
        """A call of a Pallas / JAX API: modelled by its family in apis/."""
        return apis.call(self, name, args, kwargs, node, frame)


# Python's own callables: never a launcher of the user's (`dict(scratch_shapes=[...])`).
_BUILTIN_NAMES = frozenset(dir(builtins))
# The functional forms of NamedTuple classes.
_NAMEDTUPLES = frozenset({"collections.namedtuple", "namedtuple", "typing.NamedTuple",
                          "NamedTuple"})
# Values `escape` has nothing to do for (checked by exact type: the fast path).
_INERT = frozenset({type(UNKNOWN), Const, Array, Api, Spec, Alloc, ShapeDtype, SliceVal,
                    GridSpec, ModuleRef, Imported, type(None)})

_LAUNCH_TAILS = tuple("." + name for name in variants.LAUNCH_NAMES)
# What a decorator returns that stands for the decorated def when called.
_DECORATED = (Func, Choice, PallasCallable, KernelCallable, PipelineCallable, ScopedFunc,
              StateFunc, Decorator)
# Keywords of the Pallas launchers (`pallas_call`, `kernel`, `core_map`,
# `emit_pipeline`): a call given one configures a launch.
LAUNCH_KEYWORDS = frozenset({"out_shape", "out_type", "in_specs", "out_specs", "grid_spec",
                             "mesh", "scratch_shapes", "scratch_types"})


def launch_config(dec: ast.expr) -> bool:
    """`dec` is a call (a decorator factory, or `functools.partial(f, ...)`)
    given a Pallas launch's configuration by keyword."""
    return isinstance(dec, ast.Call) and any(kw.arg in LAUNCH_KEYWORDS for kw in dec.keywords)
_COST = ("cost_estimate",)
