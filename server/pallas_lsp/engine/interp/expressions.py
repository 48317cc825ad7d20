"""Expressions other than calls and containers: names and constants,
attribute access (`Api` names, module attributes, instance fields, Ref
views such as `.at` / `.T`), subscripts (Ref reads, list / dict / tuple
indexing), operators (binary, unary, boolean, comparisons), conditional
expressions, `yield`, lambdas and walrus. Each `expr_<Node>` method is
found by node type (interpreter.py's table)."""
from __future__ import annotations

import ast

from pallas_lsp.engine import api, pyops
from pallas_lsp.engine.apis import arrays
from pallas_lsp.engine.binding import inherited
from pallas_lsp.engine.binding.shapes import index_shape, slice_value, window_overflow
from pallas_lsp.engine.binding.specs import SpecHolder, SpecInit
from pallas_lsp.engine.events import Arg, KernelOp, RefAccess, Window
from pallas_lsp.engine.frames import Frame
from pallas_lsp.engine.model import Api, Array, Const, Descriptor, Func, Ref, Seq, Value
from pallas_lsp.engine.values import (UNKNOWN, VARARGS, Alloc, AtProxy, Bound, ClassVal, Imported,
                                      Instance, ModuleRef, Partial, SeqOf, SliceVal, TextPrefix,
                                      TreeDef, as_view, join, join_all)


class ExpressionsMixin:
    """Expressions other than calls and containers."""

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

    def binding_of(self, name: str, frame: Frame):
        """What the user's code binds `name` to in this frame or its module (None: nothing)."""
        value = frame.scope.lookup(name)
        if value is None:
            value = (frame.scope.module or self.root).scope.vars.get(name)
        return value

    def expr_Attribute(self, node: ast.Attribute, frame: Frame) -> Value:
        return self.attribute(self.eval(node.value, frame), node.attr, node, frame)

    def attribute(self, base: Value, attr: str, node: ast.expr, frame: Frame) -> Value:
        """`base.attr` (also `getattr(base, "attr")`)."""
        if isinstance(base, SpecHolder) and attr == "__init__":
            return SpecInit(holder=base)
        if isinstance(base, Api):
            if attr == "itemsize" and arrays.dtype_itemsize(base.name) is not None:
                return arrays.dtype_itemsize(base.name)
            key = (node, base.name)
            out = self._api_attrs.get(key)
            if out is None:
                out = Api(name=api.join(base.name, attr), decl=node)
                # `ptu.pallas_call` of a test-utility module the engine cannot see
                out = self._api_attrs[key] = inherited.foreign_launcher(out.name) or out
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
        if isinstance(base, TreeDef) and attr == "unflatten":
            return Bound(obj=base, name=attr)
        if isinstance(base, Descriptor):
            if attr in ("start", "wait", "wait_recv", "wait_send"):
                return Bound(obj=base, name=attr)
            return UNKNOWN
        if isinstance(base, Array) and attr in ("shape", "dtype", "ndim", "size", "itemsize"):
            known = arrays.attribute(base, attr)
            return known if known is not None else UNKNOWN
        if isinstance(base, Array):
            return Bound(obj=base, name=attr)  # x.astype(...), x.sum() → Array
        return UNKNOWN

    def expr_Subscript(self, node: ast.Subscript, frame: Frame) -> Value:
        base = self.eval(node.value, frame)
        return self.eval_subscript_load(node, base, frame)

    def eval_subscript_load(self, node: ast.Subscript, base: Value, frame: Frame) -> Value:
        if isinstance(base, AtProxy):
            comps = self.eval_index(node.slice, frame)
            shape = index_shape(base.ref.shape, comps, node.slice)
            overflow = window_overflow(base.ref.shape, comps)
            if overflow:
                shape = None  # a window past the end has no meaningful shape (PAL306 says why)
            if overflow and (frame.kernel or self.active_kernel):
                elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                for i, text, kind in overflow:
                    self.events.windows.append(Window(node=node, index=elts[i], text=text,
                                                      kind=kind, kernel_id=self.active_kernel,
                                                      site=self.active_site))
            return as_view(base.ref, shape, self.segment(node))
        if isinstance(base, Ref):
            shape = index_shape(base.shape, self.eval_index(node.slice, frame),
                                        node.slice)
            if frame.kernel or self.active_kernel:
                # (outside a kernel, `r[...]` reads a jax.new_ref array: legal)
                self.events.accesses.append(RefAccess(kernel_id=self.active_kernel, site=self.active_site,
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
            if hi is None and k_lo is None and base.tail:
                # `guard, sems = refs[n * per:]` past a part of unknown length:
                # what is left ends as the list does (unpacked, the names take
                # its last items).
                return Partial(tail=base.tail, elem=base.elem)
            if base.elem is not UNKNOWN:
                return SeqOf(elem=base.elem)  # some of its items, which is not known
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
            elif not isinstance(index, (Const, SliceVal)) and base.elem is not UNKNOWN:
                return base.elem  # an index the engine cannot tell: one of the items
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
            if isinstance(node.slice, ast.Slice) and base.keys is None:
                return self._slice_items(base, node.slice, frame)
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

    def _slice_items(self, base: Seq, sl: ast.Slice, frame: Frame) -> Value:
        """`operands[:n_in]`, `refs[2:]`, `xs[::2]` of a list the engine knows
        item by item, with bounds it knows: those items; else Unknown."""
        bounds = []
        for part in (sl.lower, sl.upper, sl.step):
            if part is None:
                bounds.append(None)
                continue
            v = self.eval(part, frame)
            if not (isinstance(v, Const) and type(v.value) is int):
                return UNKNOWN
            bounds.append(v.value)
        if bounds[2] == 0:
            return UNKNOWN  # Python raises
        # A slice of a call's `*args` is still positional arguments, one
        # array each (`tree_map(new_ref, operands[:n_in])`).
        return Seq(items=base.items[bounds[0]:bounds[1]:bounds[2]],
                   origin=base.origin if base.origin == VARARGS else "")

    def eval_index(self, node: ast.expr, frame: Frame) -> list[Value]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                lo = self.eval(e.lower, frame) if e.lower else Const(value=None)
                hi = self.eval(e.upper, frame) if e.upper else Const(value=None)
                if e.step:
                    self.eval(e.step, frame)
                out.append(slice_value(lo, hi, e.step is not None))
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
        if isinstance(op, ast.Mult) and isinstance(a, Seq) and a.keys is None and a.items \
                and b is UNKNOWN:
            # `[pltpu.SemaphoreType.DMA] * (3 + 2 * n)` with n from a mesh:
            # a list of unknown length whose items are all alike.
            elem = self.join_values(list(a.items))
            return SeqOf(elem=elem) if elem is not UNKNOWN else UNKNOWN
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
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(vals[0], Const) and type(vals[0].value) is type:
            # `structure is dict`, `structure` a builtin type a test case passed
            t = pyops.builtin_type(node.comparators[0], lambda n: self.binding_of(n, frame))
            if t is not None:
                same = vals[0].value is t
                return Const(value=same if isinstance(node.ops[0], ast.Is) else not same)
        if len(node.ops) == 1:
            decided = arrays.compare_dtypes(vals[0], vals[1], node.ops[0])
            if decided is not None:
                return decided
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
