"""Names seen in kernels, kept for hover, inlay hints and semantic tokens:
`record_name` / `record_param` note each read, assignment and parameter
binding (values made lazily), `name_infos` turns them into NameInfo.

A kernel whose pallas_call has in_specs runs once where the call is made,
before its operands are known, and again when it is called with them; what
the first run recorded (an ANY input without a shape) is dropped for hover
when that launch site ran again, instead of joined into "shape unknown"."""
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
        site = self.provisional_site
        if old is None:
            self.names[node] = [node, [value] if site is None else [], is_param, is_assign,
                                [] if site is None else [(site, value)]]
            return
        if site is not None:
            if len(old[4]) < 32:
                old[4].append((site, value))
        else:
            seen = old[1]
            if not seen or seen[-1] is not value:
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
        again = self.operand_run_sites

        def seen(values: list, early: list) -> list:
            kept = values + [v for site, v in early if site not in again]
            # (a name only the provisional run reached keeps what it saw)
            return kept or [v for _, v in early]

        out = [NameInfo(span=span(node), name=node.id, value=join_all(seen(values, early)),
                        is_param=is_param, is_assign=is_assign)
               for node, values, is_param, is_assign, early in self.names.values()]
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
