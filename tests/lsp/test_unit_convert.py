"""Unit tests: Finding -> Diagnostic, Fix -> CodeAction, fix-all, selection,
noqa edits and hover/inlay helpers, on hand-made engine results."""
from __future__ import annotations

from lsprotocol import types

from pallas_lsp.check.config import ProjectConfig
from pallas_lsp.engine.model import (Edit, Finding, Fix, NameInfo, Ref, Related, SemKind, Severity,
                                     Space, Span)
from pallas_lsp.lsp import convert, hover, inlay, noqa_edit
from pallas_lsp.lsp.client_features import ClientFeatures
from pallas_lsp.lsp.positions import UTF8, UTF16, LineIndex
from pallas_lsp.lsp.selection import Selected, select
from pallas_lsp.lsp.settings import DEFAULT, parse

TEXT = 'x = "🚀"; f(scratch[...], o)\ncopy.start()\n'
INDEX = LineIndex(TEXT)
ARG = Span(0, 11, 0, 23)  # scratch[...] in code points
FINDING = Finding("PAL101", "not a Ref", ARG, Severity.ERROR,
                  related=(Related(Span(1, 0, 1, 12), "raised here"),),
                  fixes=(Fix("use scratch", (Edit(ARG, "scratch"),), True),
                         Fix("guess", (Edit(ARG, "scratch.at[0]"),), False)))


def feats(**kw):
    return ClientFeatures(**{"related_information": True, "code_description": True,
                             "document_changes": True, **kw})


def test_diagnostic_positions_per_encoding():
    d16 = convert.to_diagnostic(Selected(FINDING, "error"), "file:///k.py", INDEX, feats(), DEFAULT)
    assert (d16.range.start.character, d16.range.end.character) == (12, 24)
    d8 = convert.to_diagnostic(Selected(FINDING, "error"), "file:///k.py", INDEX,
                               feats(encoding=UTF8), DEFAULT)
    assert (d8.range.start.character, d8.range.end.character) == (14, 26)
    assert d16.code == "PAL101" and d16.source == "pallas-lsp"
    assert d16.related_information[0].location.range.start.line == 1
    # JAX's text, then ours after a dash, as on the command line.
    detailed = Finding("PAL101", "DMA source/destination/semaphore arguments must be Refs.", ARG,
                       detail="`scratch[...]` reads the whole Ref into an Array.")
    d = convert.to_diagnostic(Selected(detailed, "error"), "file:///k.py", INDEX, feats(), DEFAULT)
    assert d.message == ("DMA source/destination/semaphore arguments must be Refs. — "
                         "`scratch[...]` reads the whole Ref into an Array.")


def test_related_folded_into_message_without_client_support():
    d = convert.to_diagnostic(Selected(FINDING, "warning"), "file:///k.py", INDEX,
                              feats(related_information=False, code_description=False), DEFAULT)
    assert d.related_information is None and "line 2: raised here" in d.message
    assert d.severity == types.DiagnosticSeverity.Warning and d.code_description is None


def test_fix_actions_preferred_only_when_safe():
    diag = convert.to_diagnostic(Selected(FINDING, "error"), "file:///k.py", INDEX, feats(), DEFAULT)
    safe, unsafe = (convert.fix_action(f, diag, "file:///k.py", 7, INDEX, feats()) for f in FINDING.fixes)
    assert safe.is_preferred is True and not unsafe.is_preferred
    change = safe.edit.document_changes[0]
    assert change.text_document.version == 7 and change.edits[0].new_text == "scratch"
    plain = convert.fix_action(FINDING.fixes[0], diag, "file:///k.py", 7, INDEX, feats(document_changes=False))
    assert list(plain.edit.changes) == ["file:///k.py"]


def test_fix_all_takes_safe_non_overlapping_fixes():
    other = Finding("PAL103", "m", Span(1, 0, 1, 4), fixes=(Fix("unsafe", (Edit(Span(1, 0, 1, 4), "z"),), False),))
    overlapping = Finding("PAL102", "m", Span(0, 11, 0, 18), fixes=(Fix("s", (Edit(Span(0, 11, 0, 18), "q"),), True),))
    edits = convert.fix_all_edits([Selected(FINDING, "error"), Selected(other, "error"),
                                   Selected(overlapping, "error")])
    assert [e.new_text for e in edits] == ["scratch"]


def test_selection_settings_over_project():
    project = ProjectConfig(ignore=("PAL2",), severity={"PAL101": "hint"})
    f2 = Finding("PAL201", "m", ARG)
    out = select([FINDING, f2], DEFAULT, project, "/w/k.py")
    assert [(s.finding.code, s.level) for s in out] == [("PAL101", "hint")]
    editor, _ = parse({"rules": {"severity": {"PAL101": "warning"}}})
    assert select([FINDING], editor, project)[0].level == "warning"
    assert select([FINDING], DEFAULT, ProjectConfig(exclude=("gen/",)), "/w/gen/k.py") == []
    off, _ = parse({"rules": {"usePyproject": False}})
    assert len(select([FINDING, f2], off, project)) == 2


def test_noqa_edit():
    assert noqa_edit.noqa_edit("    f(x)", 3, "PAL101") == Edit(Span(3, 8, 3, 8), "  # noqa: PAL101")
    assert noqa_edit.noqa_edit("f(x)  # noqa: E501", 0, "PAL101").new_text == ", PAL101"
    assert noqa_edit.noqa_edit("f(x)  # noqa: PAL101", 0, "PAL101") is None
    assert noqa_edit.noqa_edit("f(x)  # noqa", 0, "PAL101") is None
    assert noqa_edit.noqa_edit("f(x)  # why", 0, "PAL101").new_text == "  # noqa: PAL101"
    assert noqa_edit.noqa_edit('f("# noqa: X1")', 0, "PAL101").new_text == "  # noqa: PAL101"
    assert noqa_edit.noqa_edit("f(x, \\", 0, "PAL101") is None
    assert noqa_edit.code_at("f(x)  # noqa: E501, PAL103", 22) == "PAL103"
    assert noqa_edit.code_at("f(x)  # noqa: E501, PAL103", 2) is None


def test_hover_helpers():
    w = hover.word_at("    copy = pltpu.make_async_copy(a, b)", 0, 20)
    assert w.dotted == "pltpu.make_async_copy" and (w.span.col, w.span.end_col) == (17, 32)
    lines = ["from jax.experimental.pallas import tpu as pltpu",
             "from jax.experimental.pallas.tpu import make_async_copy as mac", "import jax"]
    assert hover.api_name_from_imports("pltpu.make_async_copy", lines) == "pltpu.make_async_copy"
    assert hover.api_name_from_imports("mac", lines) == "pltpu.make_async_copy"
    assert hover.api_name_from_imports("jax.experimental.pallas.semaphore_signal", lines) == "pl.semaphore_signal"
    assert hover.api_name_from_imports("jax.numpy", lines) is None
    codes = {e.code for e in hover.entries_for_api("pltpu.make_async_copy")}
    assert {"PAL101", "PAL103"} <= codes


def test_inlay_labels():
    sem = NameInfo(Span(0, 0, 0, 4), "sems", Ref(space=Space.SEMAPHORE, shape=(2,), sem=SemKind.DMA), is_param=True)
    buf = NameInfo(Span(0, 0, 0, 3), "buf", Ref(space=Space.VMEM, shape=(8, 128), dtype="float32"), is_param=True)
    assert inlay.short_kind(sem) == "DMA sem (2,)"
    assert inlay.short_kind(buf) == "Ref[VMEM f32[8,128]]"
    idx = LineIndex("def k(buf, sems: Any): pass\n")
    hints = inlay.inlay_hints([NameInfo(Span(0, 6, 0, 9), "buf", buf.value, is_param=True),
                               NameInfo(Span(0, 11, 0, 15), "sems", sem.value, is_param=True)],
                              idx, UTF16, DEFAULT, 0, 10)
    assert [h.label for h in hints] == [": Ref[VMEM f32[8,128]]"]  # annotated params are skipped
