"""Hover: inferred kinds of kernel names, Pallas API docs (extracted from jax) with the
errors a call can raise, catalog entries on diagnostics and noqa codes, and
engine-only text when the user's environment has no jax."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lsp_harness import find, kernel_text, kernel_uri, position_of, start_session
from lsp_harness import session  # noqa: F401  (the per-client fixture)

URI = kernel_uri("dma_bugs.py")


async def hover_at(s, text, needle, offset=0, occurrence=0):
    line, col = find(text, needle, occurrence)
    pos = position_of(text, line, col + offset, s.encoding)
    return await s.hover(URI, pos.line, pos.character)


async def test_kernel_parameter_kind(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    h = await hover_at(session, text, "scratch, sem):")
    value = h.contents.value
    assert "scratch: Ref · VMEM · f32[8, 128]" in value
    assert "scratch_shapes[0]" in value  # where it came from


async def test_semaphore_and_descriptor_kinds(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    h = await hover_at(session, text, "sems):", 1)
    assert "DMA semaphore · shape (2,)" in h.contents.value
    h = await hover_at(session, text, "copy.start()", 1)
    assert "copy descriptor" in h.contents.value


async def api_docs_ready(s, uri=URI, timeout=180.0):
    """The server's extracted API docs are loaded (the first run on a machine
    extracts them from jax, which takes seconds)."""
    async def state():
        return (await s.server_text(uri) or {}).get("api_docs")
    await wait_for_async(lambda: state(), lambda v: v in ("ready", "unavailable"), timeout)
    return await state()


async def wait_for_async(get, ok, timeout):
    import asyncio
    import time
    deadline = time.monotonic() + timeout
    while True:
        value = await get()
        if ok(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.1)


async def test_pallas_api_signature_docs_and_errors():
    async with start_session("visual-studio-code") as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        assert await api_docs_ready(s) == "ready"
        h = await hover_at(s, text, "make_async_copy(scratch", 3)
        value = h.contents.value
        assert h.contents.kind == "markdown"
        assert "src_ref" in value and "dst_ref" in value  # signature, extracted from jax
        assert "asynchronous copy" in value  # docstring
        assert "PAL101" in value and "PAL103" in value  # what this call can raise


async def test_diagnostic_hover_shows_catalog_entry_and_jax_line(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    await session.diagnostics(URI)
    h = await hover_at(session, text, "scratch[...], o_hbm", 9)
    value = h.contents.value
    assert "PAL101" in value
    assert "```python" in value  # before/after example
    assert "primitives.py" in value
    # a link to the exact line in the installed jax
    import re
    m = re.search(r"\((file://[^)]*primitives\.py)#L(\d+)\)", value)
    assert m, value
    path = Path(m.group(1)[len("file://"):])
    line = path.read_text().splitlines()[int(m.group(2)) - 1]
    assert "raise" in line or "must be Refs" in line


async def test_noqa_code_hover(session):
    text = kernel_text("dma_bugs.py").replace(
        "buf, sems)\n", "buf, sems)  # noqa: PAL103\n")
    session.open(URI, text)
    h = await hover_at(session, text, "PAL103", 3)
    assert h is not None
    assert "PAL103" in h.contents.value and "dma-semaphore-not-scalar" in h.contents.value


async def test_nothing_to_say_gives_null(session):
    text = kernel_text("dma_bugs.py")
    session.open(URI, text)
    assert await hover_at(session, text, "\n\n\ndef double", 1) is None


async def test_without_jax_hover_degrades_to_engine_text(tmp_path):
    env_dir = tmp_path / "nojax"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    async with start_session("visual-studio-code",
                             init_options={"python": {"interpreter": str(python)}}) as s:
        text = kernel_text("dma_bugs.py")
        s.open(URI, text)
        h = await hover_at(s, text, "make_async_copy(scratch", 3)
        value = h.contents.value
        assert "pltpu.make_async_copy" in value
        assert "src_ref" not in value  # no signature without jax
        assert "PAL101" in value
        h = await hover_at(s, text, "scratch, sem):")
        assert "Ref · VMEM · f32[8, 128]" in h.contents.value
        assert not [m for m in s.client.messages if m.type.value <= 2]  # no error popups
