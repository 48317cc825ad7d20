"""PAL205: `o_ref[...] = x_ref` stores a Ref instead of its contents."""
import ast

from pallas_lsp.engine.rules._base import Context, Edit, Finding, Fix, Ref

CODE = "PAL205"
MESSAGE = "Cannot store a Ref into another Ref. Did you forget to load from it using `[...]`?"


def check(ctx: Context):
    for acc in ctx.events.accesses:
        if acc.kind != "swap" or acc.value is None or not acc.value.present:
            continue
        v = acc.value.value
        # A view (`x.at[i]`) stored into a Ref fails differently in JAX
        # (TransformedRefAvalError), so this rule only claims whole Refs.
        if not isinstance(v, Ref) or v.sem is not None or v.view:
            continue
        node = acc.value.node
        text = ctx.text(node)
        fixes = ()
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            fixes = (Fix(title=f"Load it: `{text}[...]`",
                         edits=(Edit(ctx.span(node), f"{text}[...]"),), safe=True),)
        yield Finding(
            code=CODE,
            message=MESSAGE,
            detail=f"`{text}` is a Ref; `{text}[...]` reads its contents.",
            span=ctx.span(node),
            fixes=fixes,
        )
