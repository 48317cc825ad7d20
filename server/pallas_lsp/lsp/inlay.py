"""Inlay hints: the inferred kind after kernel parameters (and, optionally,
after assignment targets), e.g. `x_ref: Ref[VMEM f32[8,128]]`."""
from __future__ import annotations

import re

from lsprotocol import types

from pallas_lsp.engine.model import NameInfo
from pallas_lsp.lsp.positions import LineIndex
from pallas_lsp.lsp.settings import Settings

MAX_LABEL = 48
_SEM = re.compile(r"^(DMA|regular|barrier) semaphore · shape (.*)$")


def short_kind(info: NameInfo) -> str | None:
    """Compact form of the engine's one-line description, or None when the
    engine knows nothing worth showing."""
    value = info.value
    custom = getattr(value, "inlay", None)
    if callable(custom):
        try:
            text = custom()
            return text or None
        except Exception:
            pass
    text = value.describe()
    if not text or text == "unknown":
        return None
    m = _SEM.match(text)
    if m:
        return f"{m.group(1)} sem {m.group(2)}"
    parts = text.split(" · ")
    if len(parts) > 1 and parts[0] in ("Ref", "Array"):
        text = f"{parts[0]}[{' '.join(parts[1:])}]"
    text = text.replace(", ", ",")
    if len(text) > MAX_LABEL:
        text = text[: MAX_LABEL - 1] + "…"
    return text


def _annotated(line_text: str, end_col: int) -> bool:
    rest = line_text[end_col:].lstrip()
    return rest.startswith(":") and not rest.startswith(":=")


def inlay_hints(names: list[NameInfo], index: LineIndex, encoding: str, settings: Settings,
                first_line: int, last_line: int) -> list[types.InlayHint]:
    if not settings.inlay_enable:
        return []
    out = []
    seen = set()
    for info in names:
        if info.is_param:
            if not settings.inlay_parameters:
                continue
        elif info.is_assign:
            if not settings.inlay_assignments:
                continue
        else:
            continue
        span = info.span
        if not first_line <= span.end_line <= last_line:
            continue
        key = (span.end_line, span.end_col)
        if key in seen:
            continue
        line_text = index.line_text(span.end_line)
        if span.end_col > len(line_text) or line_text[span.col:span.end_col] != info.name:
            continue  # stale span: the engine saw another text
        if _annotated(line_text, span.end_col):
            continue
        label = short_kind(info)
        if label is None:
            continue
        seen.add(key)
        line, character = index.to_client(span.end_line, span.end_col, encoding)
        origin = getattr(info.value, "origin", "") or None
        out.append(types.InlayHint(
            position=types.Position(line, character),
            label=f": {label}",
            kind=types.InlayHintKind.Type,
            tooltip=f"{info.name}: {info.value.describe()}" + (f"\n{origin}" if origin else ""),
            padding_left=False,
            padding_right=False,
        ))
    out.sort(key=lambda h: (h.position.line, h.position.character))
    return out
