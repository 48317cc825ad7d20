"""Names a file's annotations say are one Ref: `x: pl.UnconstrainedInRef[...]`
as a parameter, `global_histogram: Ref` as a field of a class.

The syntax floor reads any `x[...]` of such a name handed to a DMA as a load
(typed test suites and scratch dataclasses say so where no launch is in view).
Only an annotation whose outermost type is named `...Ref` counts: `list[Ref]`,
`Refs`, `jax.Array` and strings that do not parse say nothing.
"""
from __future__ import annotations

import ast


def _outer(ann):
    """The annotation's type with `Optional[...]`, `X | None` and quotes taken off."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        sides = [s for s in (ann.left, ann.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return _outer(sides[0]) if len(sides) == 1 else None
    if isinstance(ann, ast.Subscript):
        head = ann.value
        name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", "")
        if name == "Optional":
            return _outer(ann.slice)
        return head
    return ann


def is_ref_annotation(ann) -> bool:
    t = _outer(ann) if ann is not None else None
    name = t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else ""
    return name.endswith("Ref")


def ref_fields(tree: ast.Module) -> frozenset[str]:
    """Field names some class of the file annotates as a Ref and none as
    anything else (by name across the file, as the floor's other signs)."""
    refs: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    (refs if is_ref_annotation(st.annotation) else other).add(st.target.id)
    return frozenset(refs - other)
