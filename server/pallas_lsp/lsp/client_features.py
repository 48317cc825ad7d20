"""What the client said it can do, read once from its capabilities."""
from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from pallas_lsp.lsp.positions import UTF16, choose_encoding


def _get(obj, path: str, default=None):
    for part in path.split("."):
        if obj is None:
            return default
        obj = getattr(obj, part, None)
    return default if obj is None else obj


@dataclass(frozen=True)
class ClientFeatures:
    encoding: str = UTF16
    pull_diagnostics: bool = False
    diagnostic_refresh: bool = False
    related_information: bool = False
    code_description: bool = False
    markdown_hover: bool = True
    document_changes: bool = False
    code_action_literals: bool = True
    is_preferred: bool = False
    configuration: bool = False
    dynamic_configuration: bool = False
    inlay_refresh: bool = False
    watched_files: bool = False
    work_done_progress: bool = False
    code_lens_refresh: bool = False
    semantic_tokens_refresh: bool = False

    @classmethod
    def from_capabilities(cls, caps: types.ClientCapabilities | None) -> "ClientFeatures":
        if caps is None:
            return cls()
        formats = _get(caps, "text_document.hover.content_format", [])
        return cls(
            encoding=choose_encoding(_get(caps, "general.position_encodings")),
            pull_diagnostics=_get(caps, "text_document.diagnostic") is not None,
            diagnostic_refresh=bool(_get(caps, "workspace.diagnostics.refresh_support", False)),
            related_information=bool(_get(caps, "text_document.publish_diagnostics.related_information", False)),
            code_description=bool(_get(caps, "text_document.publish_diagnostics.code_description_support", False)),
            markdown_hover=(not formats) or types.MarkupKind.Markdown in formats,
            document_changes=bool(_get(caps, "workspace.workspace_edit.document_changes", False)),
            code_action_literals=_get(caps, "text_document.code_action.code_action_literal_support") is not None,
            is_preferred=bool(_get(caps, "text_document.code_action.is_preferred_support", False)),
            configuration=bool(_get(caps, "workspace.configuration", False)),
            dynamic_configuration=bool(_get(caps, "workspace.did_change_configuration.dynamic_registration", False)),
            inlay_refresh=bool(_get(caps, "workspace.inlay_hint.refresh_support", False)),
            watched_files=bool(_get(caps, "workspace.did_change_watched_files.dynamic_registration", False)),
            work_done_progress=bool(_get(caps, "window.work_done_progress", False)),
            code_lens_refresh=bool(_get(caps, "workspace.code_lens.refresh_support", False)),
            semantic_tokens_refresh=bool(_get(caps, "workspace.semantic_tokens.refresh_support",
                                              False)),
        )
