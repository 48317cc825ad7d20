"""Go to the spec (typeDefinition), to the launches of a kernel
(implementation, across files), the kernel outline (documentSymbol) and
workspace/symbol, over a real client."""
from __future__ import annotations

import asyncio
import textwrap

from lsprotocol import types

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session, wait_for
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("editor_kernel.py")
TEXT = kernel_text("editor_kernel.py")


async def type_definition(s, needle, offset=0, occurrence=0, uri=URI, text=TEXT):
    line, col = find(text, needle, occurrence)
    pos = position_of(text, line, col + offset, s.encoding)
    return await s.client.text_document_type_definition_async(types.TypeDefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos))


def target_text(text, loc, encoding):
    """The source text a location covers (single line)."""
    from lsp_harness import offset_of
    start = offset_of(text, loc.range.start, encoding)
    end = offset_of(text, loc.range.end, encoding)
    return text[start:end]


async def test_type_definition_goes_to_the_spec(session):
    session.open(URI, TEXT)
    await session.diagnostics(URI)
    expected = {
        # a BlockSpec in in_specs / out_specs
        ("def kernel(lens_ref, x_ref", len("def kernel(lens_ref, ")): "pl.BlockSpec((8, 128), lambda i, lens: (0, 0))",
        ("o_hbm, buf, sems):", 0): "pl.BlockSpec(memory_space=pl.ANY)",
        # scratch_shapes entries
        ("buf, sems):", 0): "pltpu.VMEM((2, 8, 128), jnp.float32)",
        ("sems):", 0): "pltpu.SemaphoreType.DMA((2,))",
        # a view and a read of a Ref go where the Ref came from
        ("sems.at[0])", 0): "pltpu.SemaphoreType.DMA((2,))",
        ("o_hbm.at[0]", 0): "pl.BlockSpec(memory_space=pl.ANY)",
        # the scalar-prefetch operand, at the call of the pallas_call
        ("lens_ref, x_ref", 0): "lens",
        ("n = lens_ref[0]", 0): "lens",
        # a run_scoped allocation
        ("def body(tmp)", len("def body(")): "pltpu.VMEM((8, 128), jnp.float32)",
        # a copy descriptor: its copy call
        ("copy.start()", 0): "pltpu.make_async_copy(buf.at[0], o_hbm.at[0], sems.at[0])",
    }
    for (needle, offset), want in expected.items():
        got = await type_definition(session, needle, offset)
        assert got and len(got) == 1, needle
        loc = got[0]
        assert loc.uri == URI
        assert target_text(TEXT, loc, session.encoding) == want, needle
    # `lens` in `)(lens, x)` is the operand itself
    line, col = find(TEXT, ")(lens, x)")
    (loc,) = await type_definition(session, "n = lens_ref[0]")
    assert (loc.range.start.line, loc.range.start.character) == (
        line, position_of(TEXT, line, col + 2, session.encoding).character)


async def test_type_definition_on_unknown_is_null(session):
    session.open(URI, TEXT)
    assert await type_definition(session, "tag = ") is None  # a constant
    assert await type_definition(session, "y = x_ref") is None  # arithmetic made it


async def test_type_definition_positions_after_an_emoji():
    """UTF-16: `buf` after "🚀é" on the copy line."""
    async with start_session("visual-studio-code") as s:
        s.open(URI, TEXT)
        line, col = find(TEXT, "buf.at[0]")
        got = await s.client.text_document_type_definition_async(types.TypeDefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line, col + 1)))  # col + 1: the emoji's second unit
        assert target_text(TEXT, got[0], "utf-16") == "pltpu.VMEM((2, 8, 128), jnp.float32)"


LIB = '''
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_ref, o_ref, acc):
    acc[...] = x_ref[...]
    o_ref[...] = acc[...] + 1.0
'''

LAUNCHER = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from kernels_lib import add_kernel


def add(x):
    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec((8, 128), lambda: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
    )(x)
'''

SECOND = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from kernels_lib import add_kernel


def add_twice(x):
    f = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       scratch_shapes=[])
    return f(f(x))
'''


def _project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "k"\n')
    lib = tmp_path / "kernels_lib.py"
    lib.write_text(LIB)
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    (tmp_path / "second.py").write_text(SECOND)
    return lib


async def _implementation(s, uri, text, needle):
    line, col = find(text, needle)
    return await s.client.text_document_implementation_async(types.ImplementationParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=position_of(text, line, col + 4, s.encoding)))


async def test_implementation_finds_launches_in_other_files(tmp_path):
    lib = _project(tmp_path)
    async with start_session("visual-studio-code", root=tmp_path) as s:
        launcher_uri = (tmp_path / "launcher.py").as_uri()
        s.open(launcher_uri, LAUNCHER)  # open: its own analysis
        s.open(lib.as_uri(), LIB)  # second.py stays closed: the workspace's callers

        async def launches():
            got = await _implementation(s, lib.as_uri(), LIB, "def add_kernel")
            return got if got and len(got) == 2 else None

        got = None
        for _ in range(200):
            got = await launches()
            if got:
                break
            await asyncio.sleep(0.1)
        assert got, "both launches"
        by_uri = {loc.uri: loc.range.start.line for loc in got}
        assert by_uri[launcher_uri] == LAUNCHER.split("\n").index("    return pl.pallas_call(")
        second = (tmp_path / "second.py").as_uri()
        assert by_uri[second] == SECOND.split("\n").index(
            "    f = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), "
            "jnp.float32),")


async def test_implementation_in_the_same_file(session):
    session.open(URI, TEXT)
    got = await _implementation(session, URI, TEXT, "def kernel(")
    assert got and len(got) == 1
    line, _ = find(TEXT, "return pl.pallas_call(")
    assert got[0].uri == URI and got[0].range.start.line == line
    assert await _implementation(session, URI, TEXT, "def run(") is None  # not a kernel


async def test_document_symbols_list_kernels_with_parameter_kinds(session):
    session.open(URI, TEXT)
    symbols = await session.client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=URI)))
    (kernel,) = symbols
    assert isinstance(kernel, types.DocumentSymbol)  # every recorded client is hierarchical
    assert kernel.name == "kernel" and kernel.kind == types.SymbolKind.Function
    assert kernel.detail == "pallas-lsp: Pallas kernel, launched by pl.pallas_call"
    line, _ = find(TEXT, "def kernel(")
    assert kernel.selection_range.start.line == line
    children = [(c.name, c.kind, c.detail) for c in kernel.children]
    assert children == [
        ("lens_ref", types.SymbolKind.Variable, "Ref · SMEM"),
        ("x_ref", types.SymbolKind.Variable, "Ref · VMEM · ?[8, 128]"),
        ("o_ref", types.SymbolKind.Variable, "Ref · VMEM · f32[8, 128]"),
        ("o_hbm", types.SymbolKind.Variable, "Ref · ANY · f32[2, 8, 128]"),
        ("buf", types.SymbolKind.Variable, "Ref · VMEM · f32[2, 8, 128]"),
        ("sems", types.SymbolKind.Event, "DMA semaphore · shape (2,)"),
    ]


async def test_flat_symbols_for_clients_without_hierarchy():
    caps = {"textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": False}}}
    from lsp_harness import ClientServerConfig, SERVER_COMMAND, make_client, server_env
    from pygls.protocol import default_converter
    config = ClientServerConfig(server_command=SERVER_COMMAND, server_env=server_env(),
                                client_factory=make_client)
    client = await config.start()
    try:
        converter = default_converter()
        await client.initialize_session(types.InitializeParams(
            capabilities=converter.structure(caps, types.ClientCapabilities)))
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=URI, language_id="python", version=1, text=TEXT)))
        symbols = await client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=URI)))
        assert all(isinstance(x, types.SymbolInformation) for x in symbols)
        assert [(x.name, x.container_name) for x in symbols][:3] == [
            ("kernel", "pallas-lsp kernels"), ("lens_ref", "kernel"), ("x_ref", "kernel")]
        await client.shutdown_session()
    finally:
        await client.stop()


async def test_workspace_symbol_finds_kernels_in_closed_files(tmp_path):
    _project(tmp_path)
    (tmp_path / "other.py").write_text(textwrap.dedent(TEXT))
    async with start_session("neovim", root=tmp_path) as s:
        found = await wait_for_symbols(s, "addk")
        assert [(x.name, x.location.uri) for x in found] == [
            ("add_kernel", (tmp_path / "kernels_lib.py").as_uri())]
        line = LIB.split("\n").index("def add_kernel(x_ref, o_ref, acc):")
        assert found[0].location.range.start == types.Position(line, 4)
        assert found[0].container_name == "pallas-lsp kernel (pl.pallas_call)"
        assert [x.name for x in await wait_for_symbols(s, "kernel")] == ["add_kernel", "kernel"]


async def wait_for_symbols(s, query, timeout=30.0):
    async def ask():
        return await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query=query))
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await ask()
        if got or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.2)
