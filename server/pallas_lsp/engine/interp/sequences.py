"""Python containers as the engine models them: tuple / list / dict
displays (known items, `Partial` heads and tails, `SeqOf` of unknown
length), comprehensions (item by item over a known iterable, else one
joined element), iteration (`iter_item`, `expand`) and in-place list
methods (`append` / `extend` / `pop`)."""
from __future__ import annotations

import ast

from pallas_lsp.engine import pyops
from pallas_lsp.engine.events import Arg
from pallas_lsp.engine.frames import Frame, Scope
from pallas_lsp.engine.model import Const, Seq, Value
from pallas_lsp.engine.values import UNKNOWN, Iter, Partial, SeqOf, join_all, tuple_items


# A display of more constants than this is data (the huge ones never reach the
# parser: literals.py): evaluating it would cost a step and a value per item.
MAX_DATA_ITEMS = 4_096


def _all_constants(nodes: list) -> bool:
    return all(type(n) is ast.Constant for n in nodes)


class SequencesMixin:
    """Lists, tuples, dicts, comprehensions and iteration."""

    def expr_Tuple(self, node, frame: Frame) -> Value:
        if len(node.elts) > MAX_DATA_ITEMS and _all_constants(node.elts):
            return UNKNOWN  # a table of data: no rule reads it item by item
        items: list[Value] = []
        # `[a, *weights, *biases, b]` with lists of unknown length inside:
        # the items before the first and after the last are still known.
        parts: list[Value] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = self.eval(elt.value, frame)
                inner = tuple_items(inner) or inner
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
        if len(node.values) > MAX_DATA_ITEMS and _all_constants(node.values) \
                and _all_constants(node.keys):
            return UNKNOWN
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
        it = tuple_items(it) or it
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
        if isinstance(current, SeqOf) and current.elem is not UNKNOWN and len(args) == 1 \
                and (method == "append" or method == "extend" and isinstance(args[0].value, Seq)):
            # `xs.append(sem)` after a loop grew `xs`: its last items are known.
            added = Seq(items=(args[0].value,)) if method == "append" else args[0].value
            where[name] = pyops.concat_partial(Partial(elem=current.elem, rest=current.elem),
                                               added)
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

    def iter_item(self, it: Value) -> Value:
        it = tuple_items(it) or it
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
