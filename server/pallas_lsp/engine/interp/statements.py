"""Statements: assignment (targets, unpacking, subscript stores), control
flow (`if` / `match` as joined branches, loops run once or twice and merged
with the zero-iteration path, `try`, `with`, `raise`, `return`). Each
`stmt_<Node>` method is found by node type (interpreter.py's table)."""
from __future__ import annotations

import ast

from pallas_lsp.engine import expected_errors, flow, pyops, standalone
from pallas_lsp.engine.binding.scratch import to_alloc
from pallas_lsp.engine.events import Arg, RefAccess
from pallas_lsp.engine.frames import REFUTED, Frame, Scope
from pallas_lsp.engine.model import Api, Array, Const, Descriptor, Ref, Seq, Space, Value
from pallas_lsp.engine.values import UNKNOWN, Alloc, Instance, Partial, SeqOf, Spec, join, tuple_items
from pallas_lsp.engine.values import instance_writes

MAX_LOOP_UNROLL_DEPTH = 2  # loops nested deeper than this run their body once
MAX_UNROLL = 8  # a launcher's loop over this many known items runs item by item


class StatementsMixin:
    """Assignment and control-flow statements."""

    def stmt_Return(self, node: ast.Return, frame: Frame) -> None:
        frame.returns.append(self.eval(node.value, frame) if node.value else Const(value=None))
        frame.left = True

    def stmt_Expr(self, node: ast.Expr, frame: Frame) -> None:
        self.eval(node.value, frame)

    def stmt_Assign(self, node: ast.Assign, frame: Frame) -> None:
        value = self.eval(node.value, frame)
        if self.pins and id(node) in self.pins and not isinstance(value, Const):
            value = self.pins[id(node)]
        if value is UNKNOWN and frame.kernel and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.Call, ast.Attribute, ast.Subscript)) \
                and (standalone.named_as_ref(node.targets[0].id)
                     or isinstance(node.value, ast.Attribute)
                     and standalone.named_as_ref(node.value.attr)):
            # `buf_vmem = pool.alloc(...)`, `flat = alloc.window_ref` of code
            # the engine cannot see: in kernel code a name written as a Ref's
            # (`_ref`, `_vmem`, `_hbm`) is one, as a kernel parameter named so
            # is (standalone.py). Its space, shape and dtype stay unknown.
            value = Ref(origin=f"{node.targets[0].id} (a Ref by its name; its value is not "
                               f"modelled)", space=Space.UNKNOWN)
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
        narrowed = self._ref_check(node.test, frame)
        if narrowed is not None:  # `if isinstance(x, jax.Ref):` x is a Ref in the body
            name, ref = narrowed

            def body():
                frame.scope.vars[name] = ref
                self.exec_body(node.body, frame)

            self.either(frame, body, lambda: self.exec_body(node.orelse, frame))
            return
        self.branch(frame, node.body, node.orelse)

    def _ref_check(self, test: ast.expr, frame: Frame) -> tuple[str, Ref] | None:
        """`isinstance(name, jax.Ref)` on a name whose value is not known."""
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2
                and isinstance(test.args[0], ast.Name)):
            return None
        cls = self.eval(test.args[1], frame)
        if not (isinstance(cls, Api) and cls.name in pyops.REF_CLASSES):
            return None
        name = test.args[0].id
        if isinstance(frame.scope.lookup(name), (Ref, Array)):
            return None
        return name, Ref(origin=f"{name} (a Ref by `isinstance`)", space=Space.UNKNOWN)

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
        may rest on a default no caller passes. The code after it still runs,
        but on values the function itself refuses (a builder's defaults that
        its own asserts reject): kernels launched under this scope are not
        bound with them (`REFUTED`)."""
        test = self.eval(node.test, frame)  # names in it are kernel names too (hover)
        if isinstance(node.test, ast.Constant) and not node.test.value:
            self.stmt_Raise(node, frame)
        elif not frame.undecided and not frame.kernel and (
                (isinstance(test, Const) and isinstance(test.value, (bool, int)) and not test.value)
                or (isinstance(node.test, ast.BoolOp) and self.test_truth(node.test, test) is False)):
            # (`unknown and False` is false whatever the unknown part is)
            frame.scope.vars[REFUTED] = Const(value=node.lineno)

    def stmt_With(self, node: ast.With, frame: Frame) -> None:
        for item in node.items:
            v = self.eval(item.context_expr, frame)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, UNKNOWN if not isinstance(v, Ref) else v,
                            frame, None)
        before = len(self.events.launches)
        self.exec_body(node.body, frame)
        pattern = expected_errors.expected_pattern(node)
        if pattern is not None:
            expected_errors.mark(self.events.launches, before, pattern)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, node: ast.Try, frame: Frame) -> None:
        # Run in a row; a `raise` or `return` in one part does not skip the
        # others (a handler may catch it), nor the code after the `try`.
        self.exec_body(node.body, frame)
        # Modules the body imported: a handler's fallback (`pltpu = None`)
        # is the other branch, not what the name is from now on.
        modules = {k: v for k, v in frame.scope.vars.items() if isinstance(v, Api)} \
            if node.handlers and _imports_in(node.body) else None
        for handler in node.handlers:
            frame.left = False
            if handler.name:
                frame.scope.vars[handler.name] = UNKNOWN
            self.exec_body(handler.body, frame)
        if modules:
            now = frame.scope.vars
            for k, v in modules.items():
                if now.get(k) is not v:
                    now[k] = join(v, now[k]) if k in now else v
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

    def assign(self, target: ast.expr, value: Value, frame: Frame, value_node) -> None:
        if isinstance(target, ast.Name):
            frame.scope.vars[target.id] = value
            self.record_name(target, value, frame, is_assign=True)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
            value = tuple_items(value) or value
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
            if v is UNKNOWN:
                v = value.elem  # one of the items the engine cannot place
            self.assign(elt, v, frame, None)

    def store_subscript(self, target: ast.Subscript, base: Value, value: Value, value_node,
                        frame: Frame) -> None:
        index = self.eval_index(target.slice, frame)
        if isinstance(base, Ref) and (frame.kernel or self.active_kernel):
            self.events.accesses.append(RefAccess(kernel_id=self.active_kernel, site=self.active_site,
                kind="swap", node=target, ref=Arg(target.value, base),
                value=Arg(value_node, value)))
        elif isinstance(target.value, ast.Name) and isinstance(base, (Seq, SeqOf)) \
                and (isinstance(value, (Descriptor, Ref, Array, Seq, Alloc, Spec))
                     or to_alloc(value) is not None):
            # `copies[k] = make_async_copy(...)`, `scratch["buf"] = pltpu.VMEM(...)`,
            # `scratch["sem"] = pltpu.SemaphoreType.DMA` (a bare kind is one semaphore):
            # the list or dict is a value here, so rebind the name to the updated one.
            frame.scope.rebind(target.value.id, pyops.stored(
                base, index[0] if len(index) == 1 else UNKNOWN, value))
        else:
            self.escape(value)


def _imports_in(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)
