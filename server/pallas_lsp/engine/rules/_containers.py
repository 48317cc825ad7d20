"""Names a file shows to hold several values: lists, tuples, dicts.

The syntax floor reads a DMA argument `x[i]` as a load when nothing says `x`
is a container (a list of Refs is indexed the same way). This module says
which names the file gives away as containers, by name alone across the file
(never by scope): a name that is a container anywhere in the file is taken
for one everywhere, which errs towards silence.
"""
from __future__ import annotations

import ast

# Builtins whose result is a container, or whose argument is one.
_MAKERS = frozenset({"list", "tuple", "dict", "zip", "map", "sorted", "reversed", "range",
                     "enumerate", "filter", "set", "frozenset"})
_TAKERS = frozenset({"len", "zip", "enumerate", "list", "tuple", "sorted", "reversed", "sum",
                     "map", "any", "all", "iter", "next", "set", "dict", "frozenset", "filter"})
# Tails of library calls that return a pytree or a sequence.
_TREE_TAILS = ("tree_map", "tree_leaves", "tree_unflatten", "tree_flatten", "split",
               "array_split", "unstack", "chunk", "items", "values", "keys")
_METHODS = frozenset({"append", "extend", "insert", "pop", "items", "keys", "values", "index",
                      "count", "get", "copy", "update", "setdefault", "remove", "clear"})
_ANNOTATIONS = ("list", "tuple", "dict", "sequence", "mapping", "iterable", "pytree")
_LITERALS = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.Dict, ast.DictComp,
             ast.Set, ast.SetComp)


# Name endings that say a container (`in_refs`, `buf_list`, `scratch_args`);
# not a bare plural: `k_bufs` is as often one Ref with a leading slot axis.
_CONTAINER_ENDINGS = ("refs", "list", "lists", "tuple", "tuples", "args", "pair", "pairs",
                      "seq", "tree", "trees", "dict")


def named_as_container(key: str) -> bool:
    return key.lstrip(".").lower().endswith(_CONTAINER_ENDINGS)


def key_of(node) -> str | None:
    """`x` for a name, `.attr` for an attribute: what the evidence is about."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.Starred):
        return key_of(node.value)
    return None


def indexed_in_place(arg) -> ast.Subscript | None:
    """The `x[i]` a DMA argument selects its Ref from: the argument itself
    (`x[i]`) or under its views (`x[i].at[j]`); None for other shapes."""
    while isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Attribute) \
            and arg.value.attr == "at":
        arg = arg.value.value
    if isinstance(arg, ast.Subscript) and isinstance(arg.ctx, ast.Load):
        return arg
    return None


def _makes_container(value) -> bool:
    if isinstance(value, _LITERALS):
        return True
    if isinstance(value, ast.BinOp):  # `[sem] * 2`, `refs + (x,)`
        return _makes_container(value.left) or _makes_container(value.right)
    if isinstance(value, ast.Subscript):  # `refs[1:3]`: a slice of a list is a list
        return isinstance(value.slice, ast.Slice)
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Name):
            return f.id in _MAKERS
        if isinstance(f, ast.Attribute):
            return f.attr.endswith(_TREE_TAILS)
    return False


def _annotated(annotation) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation).lower()
    return any(word in text for word in _ANNOTATIONS)


def containers(tree: ast.AST, dma_args: frozenset[int] = frozenset()) -> frozenset[str]:
    """Keys (`key_of`) of everything `tree` shows to be a container.

    `dma_args` are the ids of subscripts DMAs are handed: the caller weighs
    those itself (one of them is the subscript it judges)."""
    out: set[str] = set()
    add = out.add
    for node in ast.walk(tree):
        cls = node.__class__
        if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            a = node.args
            for p in (a.vararg, a.kwarg):
                if p is not None:
                    add(p.arg)
            params = a.posonlyargs + a.args
            defaulted = list(zip(params[len(params) - len(a.defaults):], a.defaults)) + \
                [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for p, d in defaulted:
                if _makes_container(d):
                    add(p.arg)
            for p in params + a.kwonlyargs:
                if _annotated(p.annotation):
                    add(p.arg)
        elif cls is ast.Starred:
            k = key_of(node.value)
            if k:
                add(k)
        elif cls is ast.keyword and node.arg is None:  # `f(**x)`
            k = key_of(node.value)
            if k:
                add(k)
        elif cls in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
            targets = node.targets if cls is ast.Assign else [node.target]
            value = node.value
            if cls is ast.AnnAssign and _annotated(node.annotation):
                k = key_of(node.target)
                if k:
                    add(k)
            if value is not None and _makes_container(value):
                for t in targets:
                    k = key_of(t)
                    if k:
                        add(k)
            if value is not None and any(isinstance(t, (ast.Tuple, ast.List)) for t in targets):
                k = key_of(value)  # `a, b = x`
                if k:
                    add(k)
        elif cls in (ast.For, ast.AsyncFor, ast.comprehension):
            # The iterable is a container; so may each element be (pairs of
            # Refs): a loop variable is never read as a single Ref here.
            for k in (key_of(node.iter), key_of(node.target)):
                if k:
                    add(k)
        elif cls is ast.Call:
            f = node.func
            if isinstance(f, ast.Name) and f.id in _TAKERS:
                for arg in node.args:
                    k = key_of(arg)
                    if k:
                        add(k)
            elif isinstance(f, ast.Name) and f.id == "isinstance" and len(node.args) == 2:
                k = key_of(node.args[0])
                if k and any(w in ast.unparse(node.args[1]).lower() for w in _ANNOTATIONS):
                    add(k)
            elif isinstance(f, ast.Attribute) and f.attr in _METHODS:
                k = key_of(f.value)
                if k:
                    add(k)
        elif cls is ast.Subscript:
            k = key_of(node.value)
            if k is None:
                continue
            s = node.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, (str, bytes, int)) \
                    and not isinstance(s.value, bool) and id(node) not in dma_args:
                add(k)  # `x["k_cache"]`, `first = x[0]`: an item taken by position
    return frozenset(out)
