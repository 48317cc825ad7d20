"""Launcher variants: the settings a launcher is run with besides unknown
arguments (boolean flags, optional operands, local flags pinned per
branch), and which defs may launch a kernel at all. Each variant is real
code a user can reach, and running them one by one keeps a spec list and
the kernel that unpacks it in step."""
from __future__ import annotations

import ast
import bisect
import re

from pallas_lsp.engine import syntax
from pallas_lsp.engine.model import Const, Func, Seq
from pallas_lsp.engine.values import GIVEN, UNKNOWN, VARARGS


LAUNCH_NAMES = {"pallas_call", "kernel", "core_map"}


LAUNCH_TEXT = __import__("re").compile(r"pallas_call|core_map|\bkernel\s*\(")


def launch_lines(lines: list[str]) -> list[int]:
    """1-based lines that may launch a kernel. The substring test first: the
    regex alone, tried at every position of every line, costs more."""
    return [i + 1 for i, text in enumerate(lines)
            if ("kernel" in text or "pallas_call" in text or "core_map" in text)
            and LAUNCH_TEXT.search(text)]


MAX_VARIANTS = 8


def params_with_defaults(func: ast.AST) -> list[tuple[ast.arg, ast.expr]]:
    """(parameter, default expression) for each parameter that has one."""
    a = func.args
    positional = list(a.posonlyargs) + list(a.args)
    return list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) \
        + [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]


def flag_variants(func: ast.AST) -> list[dict]:
    """Flag settings to run a launcher with: every combination of up to
    two boolean parameters with a literal default, else the defaults and
    each flag flipped alone (code that needs two flags at once is rare, and
    every run repeats the launcher). [] when it has no such flag."""
    import itertools
    a = func.args
    positional = list(a.posonlyargs) + list(a.args)
    pairs = params_with_defaults(func)
    flags = [(p.arg, d.value) for p, d in pairs
             if isinstance(d, ast.Constant) and isinstance(d.value, bool)]
    # `flag: bool` without a default is a flag too (the default counts as False).
    defaulted = {p.arg for p, _ in pairs}
    flags += [(p.arg, False) for p in positional + list(a.kwonlyargs)
              if p.arg not in defaulted and isinstance(p.annotation, ast.Name)
              and p.annotation.id == "bool"]
    # So is a keyword-only parameter without a default that the body only
    # ever tests (`if has_bias:`, `x if has_bias else None`): builders take
    # their configuration that way.
    named = {n for n, _ in flags}
    candidates = [p for p in a.kwonlyargs
                  if p.arg not in defaulted and p.arg not in named and p.annotation is None]
    if candidates:  # the walk is the expensive part: only when it can add a flag
        tested = tested_names(func)
        flags += [(p.arg, False) for p in candidates if p.arg in tested]
    if flags:
        inert = launch_options_only(func, {n for n, _ in flags})
        flags = [f for f in flags if f[0] not in inert]
    if not flags:
        return []
    if len(flags) <= 2:
        combos = itertools.product((False, True), repeat=len(flags))
        return [{name: Const(value=v) for (name, _), v in zip(flags, combo)} for combo in combos]
    out = [{name: Const(value=d) for name, d in flags}]
    for name, d in flags[:MAX_VARIANTS - 1]:
        out.append({**out[0], name: Const(value=not d)})
    return out


MAX_LOCAL_FLAGS = 2


def local_flag_pins(func: ast.AST) -> list[dict]:
    """Variants for a launcher's local flags: a name assigned once in its
    body from a comparison or boolean expression (`push = rows <= cap`),
    used only as a truth value, both in the launcher (where it shapes a
    scratch or spec list) and in a kernel defined inside it (where it decides
    which refs are unpacked). Analysed with the flag unknown, the list and
    the unpacking disagree and everything after it is lost; pinned to True,
    then False, both halves follow the same branch. Each pin maps the id of
    the assignment to the value it takes when it is not a known constant."""
    # Statements only (cheap): the candidates and the nested defs.
    assigned: dict[str, list] = {}
    nested: list[ast.AST] = []
    stack = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested.append(node)
            continue
        if isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(
                        node if len(node.targets) == 1 and _a_bool(node.value) else None)
                else:
                    for sub in syntax.walk(t):
                        if isinstance(sub, ast.Name):
                            assigned.setdefault(sub.id, []).append(None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            for sub in syntax.walk(node.target):
                if isinstance(sub, ast.Name):
                    assigned.setdefault(sub.id, []).append(None)
        for name in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(node, name, None) or ())
    candidates = {name: nodes[0] for name, nodes in assigned.items()
                  if len(nodes) == 1 and nodes[0] is not None}
    if not candidates:
        return []
    params = {a.arg for a in syntax.walk(func.args) if isinstance(a, ast.arg)}
    candidates = {n: v for n, v in candidates.items() if n not in params}
    # A flag handed to a module-level kernel by `functools.partial(body,
    # with_scales=with_scales)` reaches the kernel as a nested def's would.
    handed = [n for n in partial_keyword_args(func) if n.id in candidates]
    in_kernel: set[str] = {n.id for n in handed}
    for fn in nested:
        in_kernel |= tested_names(fn) & candidates.keys()
    if not in_kernel:
        return []
    # pure truth values across the launcher (handing one to the kernel aside)
    tested_here = tested_names(func, {id(n) for n in handed})
    own = own_tests(func)  # ... tested in the launcher's own code too
    flags = [candidates[n] for n in candidates if n in in_kernel and n in tested_here and n in own]
    if not flags:
        return []
    if len(flags) == 2:
        # Two flags, every combination (as many runs as each apart): a list
        # one flag sizes and another flag's branch reads stay in step.
        a, b = flags
        return [{id(a): Const(value=x), id(b): Const(value=y)}
                for x in (True, False) for y in (True, False)]
    out = []
    for node in flags[:MAX_LOCAL_FLAGS]:
        out += [{id(node): Const(value=True)}, {id(node): Const(value=False)}]
    return out


# Calls whose result is a bool whatever the engine knows of their arguments.
_BOOL_METHODS = frozenset({"startswith", "endswith", "isdigit", "isalpha", "isalnum",
                           "isnumeric", "isidentifier", "issubset", "issuperset", "isdisjoint"})
_BOOL_FUNCTIONS = frozenset({"isinstance", "issubclass", "hasattr", "callable", "bool", "any",
                             "all"})


def _a_bool(value: ast.expr) -> bool:
    """An expression whose value Python makes a bool: a comparison, `and` /
    `or` / `not`, `s.endswith(...)`, `isinstance(...)`."""
    if isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        return (isinstance(f, ast.Attribute) and f.attr in _BOOL_METHODS) \
            or (isinstance(f, ast.Name) and f.id in _BOOL_FUNCTIONS)
    return False


def own_tests(func: ast.AST) -> set[str]:
    """Names tested (if / ternary / while) in `func` outside its nested defs."""
    out: set[str] = set()
    stack = list(syntax.children(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and isinstance(node.test, ast.Name):
            out.add(node.test.id)
        stack.extend(syntax.children(node))
    return out


MAX_OPTIONAL = 2  # optional arguments of a launcher run given, one at a time


def vararg_variants(func: ast.AST) -> list[dict]:
    """A launcher whose `*args` it tests for truth (`x if maybe_values else
    [None]`, `if extra:`) has a call with none of them: one run with it
    empty. Run with unknown arguments the test is undecided and the operand
    list it builds has no length."""
    star = func.args.vararg
    if star is None:
        return []
    for node in syntax.walk(func):
        test = node.test if isinstance(node, (ast.If, ast.IfExp, ast.While)) else \
            node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) else None
        if isinstance(test, ast.Name) and test.id == star.arg:
            return [{star.arg: Seq(items=(), origin=VARARGS)}]
    return []


MAX_DEMANDED = 3  # configurations a builder's asserts may demand, run one by one


def assert_variants(func: ast.AST) -> list[dict]:
    """The values a launcher's own top-level `assert`s demand of its
    parameters where the defaults contradict them (`assert ... and
    lhs_indirect` with `lhs_indirect=False`; `assert rows is not None` with
    `rows=None`; each alternative of `a or b` the parameters alone can meet,
    through locals like `do_a2a8 = comm == "a2a8"`): one run per
    configuration. On its defaults such a builder refutes itself (`REFUTED`)
    and binds nothing; a caller must pass these."""
    defaults = {p.arg: d.value for p, d in params_with_defaults(func)
                if isinstance(d, ast.Constant)}
    aliases = {st.targets[0].id: st.value for st in func.body
               if isinstance(st, ast.Assign) and len(st.targets) == 1
               and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Compare)}
    combos: list[dict] = [{}]
    for st in func.body:
        if not isinstance(st, ast.Assert):
            continue
        options = _options(st.test, defaults, aliases)
        combos = [merged for c in combos for o in options
                  if (merged := _merge(c, o)) is not None][:MAX_DEMANDED]
    out = []
    for c in combos:
        demand = {n: w for n, w in c.items() if not _meets(defaults[n], w)}
        if demand and demand not in out:
            out.append(demand)
    return out


def combined(flips: list[dict], configs: list[dict]) -> list[tuple[dict, dict]]:
    """Each flag flip run on top of each configuration (the configuration's
    own values win), as (fixed, pins) runs; new settings only, at most
    MAX_VARIANTS of them."""
    out: list[tuple[dict, dict]] = []
    seen = [*configs, *flips]
    for config in configs:
        for flip in flips:
            run = {**flip, **config}
            if run not in seen:
                seen.append(run)
                out.append((run, {}))
                if len(out) >= MAX_VARIANTS:
                    return out
    return out


def _merge(a: dict, b: list):
    out = dict(a)
    for name, wanted in b:
        if name in out and out[name] != wanted:
            return None  # contradictory demands
        out[name] = wanted
    return out


def _meets(default, wanted) -> bool:
    if wanted is GIVEN:
        return default is not None
    return type(default) is type(wanted.value) and default == wanted.value


def _options(test: ast.AST, defaults: dict, aliases: dict) -> list[list]:
    """The ways `test` can hold, each a list of (parameter, value) it needs
    of parameters with literal defaults ([[]]: nothing the parameters decide)."""
    if isinstance(test, ast.Name) and test.id in aliases:
        test = aliases[test.id]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        out: list[list] = [[]]
        for v in test.values:
            out = [a + b for a in out for b in _options(v, defaults, aliases)][:MAX_DEMANDED]
        return out
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        options = [o for v in test.values for o in _options(v, defaults, aliases)
                   if o and all(n in defaults for n, _ in o)]
        if not options or any(all(_meets(defaults[n], w) for n, w in o) for o in options):
            return [[]]
        return options[:MAX_DEMANDED]
    got = _demanded(test)
    return [[got]] if got is not None and got[0] in defaults else [[]]


def _demanded(test: ast.AST):
    """(parameter, the value the conjunct `test` demands of it), or None."""
    if isinstance(test, ast.Name):
        return test.id, Const(value=True)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and isinstance(test.operand, ast.Name):
        return test.operand.id, Const(value=False)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant):
        op, right = test.ops[0], test.comparators[0].value
        if isinstance(op, ast.IsNot) and right is None:
            return test.left.id, GIVEN
        if isinstance(op, (ast.Is, ast.Eq)) and (right is None or isinstance(right, (bool, int, str))):
            return test.left.id, Const(value=right)
    return None


def optional_variants(func: ast.AST, lines: list[str]) -> list[dict]:
    """Variants for a launcher's optional operands (`bias=None`, tested with
    `bias is None` / `is not None`): each given alone (the defaults run has
    them all None). Run with unknown arguments, `if bias is not None:`
    joins a spec list with and without the operand, and the kernel that
    unpacks it is lost."""
    pairs = params_with_defaults(func)
    # Operands only: unannotated, or annotated as an array (`jax.Array | None`);
    # `float | None`, `str | None`, a config class... are options, not operands.
    optional = [p.arg for p, d in pairs if isinstance(d, ast.Constant) and d.value is None
                and (p.annotation is None or any(w in ast.unparse(p.annotation) for w in
                                                 ("Array", "ndarray", "Ref", "Tensor")))]
    if not optional:
        return []
    # Tested with `is None` somewhere in the function (its text: no AST walk).
    text = "\n".join(lines[func.lineno - 1:getattr(func, "end_lineno", func.lineno)])
    tested = [n for n in optional if re.search(rf"\b{re.escape(n)}\s+is\s+(not\s+)?None\b", text)]
    if not tested:
        return []
    # `if x is None: x = default` / `x = d if x is None else x`: a default
    # filled in, not an operand that may be missing (both runs agree).
    defaulted = set()
    stack = list(func.body)
    while stack:  # statements only
        node = stack.pop()
        if isinstance(node, ast.If) and none_test(node.test) is not None and not node.orelse \
                and all(isinstance(b, ast.Assign) and len(b.targets) == 1
                        and isinstance(b.targets[0], ast.Name)
                        and b.targets[0].id == none_test(node.test) for b in node.body):
            defaulted.add(none_test(node.test))
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.IfExp) \
                and none_test(node.value.test) == node.targets[0].id:
            defaulted.add(node.targets[0].id)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, None) or ())
    names = [n for n in tested if n not in defaulted]
    return [{name: GIVEN} for name in names[:MAX_OPTIONAL]]


def none_test(node: ast.AST) -> str | None:
    """`x is None` / `x is not None` -> "x"."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 \
            and isinstance(node.ops[0], (ast.Is, ast.IsNot)) and isinstance(node.left, ast.Name) \
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        return node.left.id
    return None


# Keywords of a launch the engine does not model: a flag that only ever
# feeds one of them runs the same code either way.
_LAUNCH_OPTIONS = {"interpret", "debug", "name", "cost_estimate"}


def launch_options_only(func: ast.AST, names: set[str]) -> set[str]:
    """Those of `names` used in `func` (nested defs included) only as the
    value of `interpret=` / `debug=`... of a launch (`pl.pallas_call`,
    `pl.kernel`, a `functools.partial` of one): `interpret=interpret`
    and nothing else. Running a launcher with such a flag flipped repeats
    it for nothing."""
    uses: dict[str, int] = {}
    passed: dict[str, int] = {}
    for node in syntax.walk(func):
        if isinstance(node, ast.Name) and node.id in names:
            uses[node.id] = uses.get(node.id, 0) + 1
        elif isinstance(node, ast.Call) and _is_launch(node):
            for kw in node.keywords:
                if kw.arg in _LAUNCH_OPTIONS and isinstance(kw.value, ast.Name) \
                        and kw.value.id in names:
                    passed[kw.value.id] = passed.get(kw.value.id, 0) + 1
    return {n for n, k in passed.items() if uses.get(n) == k}


def _callee_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""


def _is_launch(call: ast.Call) -> bool:
    name = _callee_name(call.func)
    if name in ("partial", "Partial") and call.args:
        name = _callee_name(call.args[0])
    return name in LAUNCH_NAMES or name == "emit_pipeline"


def partial_keyword_args(func: ast.AST) -> list[ast.Name]:
    """Names passed as a keyword's value to `functools.partial(...)` in `func`."""
    return [k.value for node in syntax.walk(func)
            if isinstance(node, ast.Call) and _callee_name(node.func) == "partial"
            for k in node.keywords if k.arg is not None and isinstance(k.value, ast.Name)]


def tested_names(func: ast.AST, also: set[int] = frozenset()) -> set[str]:
    """Names used only as truth values in `func` (tests of if / ternaries /
    `not` / `and` / `or`); a name also used any other way is left out, but
    for the uses whose node ids are in `also`."""
    tested: set[int] = set(also)
    names = []
    for node in syntax.walk(func):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                names.append(node)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tested.add(id(node.test))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tested.add(id(node.operand))
        elif isinstance(node, ast.BoolOp):
            tested.update(id(v) for v in node.values)
    as_test, other = set(), set()
    for node in names:
        (as_test if id(node) in tested else other).add(node.id)
    return as_test - other


def required_args(func: Func) -> tuple[list, dict]:
    """Unknown values for the parameters of `func` that have neither a
    default nor a bound value: the smallest call a user can make."""
    a = func.node.args
    positional = list(a.posonlyargs) + list(a.args)
    bound = dict(func.bound_kwargs)
    rest = positional[len(func.bound_args):]
    required = rest[:max(0, len(rest) - len(a.defaults))]  # defaults are the last ones
    args = []
    for p in required:
        if p.arg in bound:
            break  # the rest are passed by keyword (bound), as Python requires
        args.append(UNKNOWN)
    kwargs = {p.arg: UNKNOWN for p, d in zip(a.kwonlyargs, a.kw_defaults)
              if d is None and p.arg not in bound}
    return args, kwargs


def mentions(func: ast.AST, lines: list[int]) -> bool:
    """Is one of `lines` (sorted, 1-based) inside the def? (a cheap filter)"""
    i = bisect.bisect_left(lines, func.lineno)
    return i < len(lines) and lines[i] <= (func.end_lineno or func.lineno)


def unreached_launch(func: ast.AST, reached: set[int], lines: list[int]) -> bool:
    """Does this def contain a pallas_call / pl.kernel / core_map call the
    analysis has not reached? Only statements that span one of the launch
    `lines` are searched (a launch call's name is on one of them)."""
    stack = [func]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and id(node) not in reached:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in LAUNCH_NAMES:
                return True
        for child in syntax.children(node):
            if not isinstance(child, ast.stmt) or mentions(child, lines):
                stack.append(child)
    return False


# ---------------------------------------------------------------- test cases

MAX_CASES = 16  # cases of a parametrized test run one by one (the rest are not)


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _names(node: ast.expr) -> list[str] | None:
    """pytest's argnames: "a, b" or ("a", "b")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [n.strip() for n in node.value.split(",") if n.strip()]
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _literal_items(node: ast.expr) -> list[ast.expr] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and not any(
            isinstance(e, ast.Starred) for e in node.elts):
        return list(node.elts)
    return None


def _pytest_cases(dec: ast.Call) -> list[dict] | None:
    """`@pytest.mark.parametrize("a, b", [(1, 2), pytest.param(3, 4)])`."""
    names = _names(dec.args[0]) if dec.args else None
    values = _literal_items(dec.args[1]) if len(dec.args) > 1 else None
    if not names or values is None:
        return None
    out = []
    for v in values:
        if isinstance(v, ast.Call) and _dotted(v.func).endswith("param"):
            items = list(v.args)
        elif len(names) == 1:
            items = [v]
        else:
            items = _literal_items(v)
        if items is None or len(items) != len(names):
            return None
        out.append(dict(zip(names, items)))
    return out


def _absl_cases(dec: ast.Call, kind: str, params: list[str]) -> list[dict] | None:
    """absl `parameterized.parameters / named_parameters / product`."""
    if kind == "product":
        if dec.args:
            return None
        cases = [{}]
        for k in dec.keywords:
            items = _literal_items(k.value) if k.arg else None
            if items is None:
                return None
            cases = [{**c, k.arg: v} for c in cases for v in items]
            if len(cases) > MAX_CASES:
                return cases[:MAX_CASES]
        return cases
    args = list(dec.args)
    if dec.keywords or any(isinstance(a, ast.Starred) for a in args):
        return None
    if len(args) == 1 and isinstance(args[0], ast.List):
        args = list(args[0].elts)  # one iterable of cases
    out = []
    for case in args:
        if isinstance(case, ast.Dict) or (isinstance(case, ast.Call) and _dotted(case.func)
                                          == "dict" and not case.args):
            pairs = ([(k.value if isinstance(k, ast.Constant) else None, v)
                      for k, v in zip(case.keys, case.values)] if isinstance(case, ast.Dict)
                     else [(k.arg, k.value) for k in case.keywords])
            if any(not isinstance(k, str) for k, _ in pairs):
                return None
            out.append({k: v for k, v in pairs if k != "testcase_name"})
            continue
        items = list(case.elts) if isinstance(case, ast.Tuple) else [case]
        if kind == "named_parameters":
            items = items[1:]  # the case's name
        if len(items) > len(params):
            return None
        out.append(dict(zip(params, items)))
    return out


def parametrize_cases(func: ast.AST) -> list[tuple[str, dict]]:
    """A test's literal cases, each as (label, {parameter: expression}); the
    product of stacked decorators, at most MAX_CASES. [] when it has none or
    they are not literals (never a guess)."""
    decs = [d for d in getattr(func, "decorator_list", ()) if isinstance(d, ast.Call)]
    params = [p.arg for p in func.args.posonlyargs + func.args.args]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    cases: list[dict] | None = None
    for dec in decs:
        name = _dotted(dec.func)
        tail = name.rpartition(".")[2]
        if tail == "parametrize" and "mark" in name:
            mine = _pytest_cases(dec)
        elif tail in ("parameters", "named_parameters", "product") and "parameterized" in name:
            mine = _absl_cases(dec, tail, params)
        else:
            continue
        if not mine:
            return []
        cases = mine if cases is None else [{**a, **b} for a in cases for b in mine]
    if not cases:
        return []
    cases = [c for c in cases if all(k in params for k in c)][:MAX_CASES]
    total = len(cases)
    return [(f"case {n} of {total} of `{func.name}`: " + ", ".join(
        f"{k}={ast.unparse(v)}" for k, v in c.items()), c) for n, c in enumerate(cases, start=1)]
