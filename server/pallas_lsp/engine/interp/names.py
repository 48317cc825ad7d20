"""Names seen in kernels, kept for hover, inlay hints and semantic tokens:
`record_name` / `record_param` note each read, assignment and parameter
binding (values made lazily), `name_infos` turns them into NameInfo."""
from __future__ import annotations

import ast

from pallas_lsp.engine.frames import Frame
from pallas_lsp.engine.model import NameInfo, Value
from pallas_lsp.engine.values import join_all


class NamesMixin:
    """Names read, assigned and bound in kernels (hover)."""

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

    def record_param(self, p: ast.arg, value: Value, frame: Frame) -> None:
        if not self.want_names:
            return
        name = self._param_names.get(id(p))
        if name is None:
            name = self._param_names[id(p)] = ast.Name(
                id=p.arg, ctx=ast.Load(), lineno=p.lineno, col_offset=p.col_offset,
                end_lineno=p.lineno, end_col_offset=p.col_offset + len(p.arg.encode("utf-8")))
        self.record_name(name, value, frame, is_param=True)
