"""Signature help for Pallas APIs over a real client: the signature from the
extracted API docs, the active parameter, and what the engine knows about
each argument (also while the call is still being typed)."""
from __future__ import annotations

from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)
from test_hover import api_docs_ready

URI = kernel_uri("editor_kernel.py")
TEXT = kernel_text("editor_kernel.py")


async def help_at(s, text, needle, offset=0, uri=URI):
    line, col = find(text, needle)
    pos = position_of(text, line, col + offset, s.encoding)
    return await s.client.text_document_signature_help_async(types.SignatureHelpParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos))


def parameter_names(sig):
    return [sig.label[p.label[0]:p.label[1]] for p in sig.parameters]


async def test_copy_arguments_show_what_the_engine_knows(session):
    session.open(URI, TEXT)
    assert await api_docs_ready(session, URI) == "ready"
    h = await help_at(session, TEXT, "o_hbm.at[0], sems", 2)
    (sig,) = h.signatures
    assert sig.label == "make_async_copy(src_ref, dst_ref, sem)"
    assert h.active_parameter == 1 and parameter_names(sig) == ["src_ref", "dst_ref", "sem"]
    docs = [p.documentation for p in sig.parameters]
    assert docs == ["src_ref: Ref[VMEM f32[8,128]] ← buf.at[0]",
                    "dst_ref: Ref[ANY f32[8,128]] ← o_hbm.at[0]",
                    "sem: DMA sem () ← sems.at[0]"]
    listing = sig.documentation.value
    assert "sem: DMA sem () ← sems.at[0]" in listing
    assert "asynchronous copy" in listing  # the docstring's first paragraph
    # the third argument
    h = await help_at(session, TEXT, "sems.at[0])", 1)
    assert h.active_parameter == 2


async def test_while_typing_an_unclosed_call():
    text = TEXT.replace("    copy.start()\n", "    c2 = pltpu.make_async_copy(x_ref, \n    copy.start()\n")
    async with start_session("visual-studio-code") as s:
        s.open(URI, text)
        assert await api_docs_ready(s, URI) == "ready"
        line, col = find(text, "c2 = pltpu.make_async_copy(x_ref, ")
        pos = position_of(text, line, col + len("c2 = pltpu.make_async_copy(x_ref, "), s.encoding)
        h = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
            text_document=types.TextDocumentIdentifier(uri=URI), position=pos,
            context=types.SignatureHelpContext(trigger_kind=types.SignatureHelpTriggerKind.TriggerCharacter,
                                               trigger_character=",", is_retrigger=False)))
        (sig,) = h.signatures
        assert h.active_parameter == 1
        assert sig.parameters[0].documentation == "src_ref: Ref[VMEM ?[8,128]] ← x_ref"
        assert sig.parameters[1].documentation is None  # nothing typed yet


async def test_keyword_argument_is_the_active_parameter(session):
    session.open(URI, TEXT)
    assert await api_docs_ready(session, URI) == "ready"
    h = await help_at(session, TEXT, "scratch_shapes=[pltpu.VMEM", len("scratch_shapes=["))
    (sig,) = h.signatures
    assert sig.label.startswith("PrefetchScalarGridSpec(num_scalar_prefetch: int")
    assert parameter_names(sig)[h.active_parameter].startswith("scratch_shapes")


async def test_not_a_pallas_call_gives_null(session):
    session.open(URI, TEXT)
    assert await help_at(session, TEXT, "jax.ShapeDtypeStruct((8, 128)", len("jax.ShapeDtypeStruct(")) \
        is None
    assert await help_at(session, TEXT, "def kernel(") is None


async def test_trigger_characters_are_advertised(session):
    provider = session.result.capabilities.signature_help_provider
    assert set(provider.trigger_characters) == {"(", ","}
