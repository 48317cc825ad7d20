"""One file's long analysis never holds up another file: with a slow file open
(a chain of 10,000 helpers: seconds of real engine work, every run), a small
file opened after it gets its diagnostics and hovers long before the slow
file's diagnostics are out. (One analysis thread used to queue the small
file behind the big one: a hover waited for all of it.)"""
from __future__ import annotations

import asyncio
import time

import pytest
from lsp_harness import KERNELS, find, kernel_text, kernel_uri, position_of, start_session, wait_for

from pallas_lsp.lsp.analyses import AnalysisService
from pallas_lsp.lsp.documents import Snapshot
from pallas_lsp.lsp.worker import Superseded

SMALL = kernel_uri("dma_bugs.py")
SLOW = (KERNELS / "generated_slow_chain.py").as_uri()  # never written: the buffer is the file


def slow_chain(n: int = 10_000) -> str:
    lines = ["import jax", "import jax.numpy as jnp", "from jax.experimental import pallas as pl",
             "from jax.experimental.pallas import tpu as pltpu", ""]
    for i in range(n):
        lines += [f"def h{i}(x, o, sem):", f"    return h{i + 1}(x, o, sem)" if i < n - 1 else
                  "    pltpu.make_async_copy(x, o, sem).start()", ""]
    lines += ["def kernel(x_ref, o_ref, sem):", "    h0(x_ref, o_ref, sem)", "",
              "def run(x):",
              "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),",
              "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],",
              "        out_specs=pl.BlockSpec(memory_space=pl.ANY),",
              "        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)", ""]
    return "\n".join(lines)


async def test_small_file_is_not_queued_behind_a_slow_one():
    async with start_session("visual-studio-code",
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        # Warm up the process (imports, first analysis) on the small file alone.
        small = kernel_text("dma_bugs.py")
        s.open(SMALL, small)
        assert await s.diagnostics(SMALL, timeout=60)
        s.close(SMALL)

        start = time.monotonic()
        s.open(SLOW, slow_chain())
        s.open(SMALL, small)
        diagnostics = await s.diagnostics(SMALL, timeout=60)
        small_done = time.monotonic() - start
        assert any(d.code == "PAL101" for d in diagnostics)
        line, col = find(small, "scratch, sem):")
        pos = position_of(small, line, col, s.encoding)
        hover = await s.hover(SMALL, pos.line, pos.character)
        hovered = time.monotonic() - start
        assert hover is not None and "Ref" in hover.contents.value
        # The slow file is still being analysed when the small one is served...
        assert not s.client.published[SLOW], (small_done, hovered)
        await wait_for(lambda: s.client.published[SLOW], timeout=180)
        slow_done = time.monotonic() - start
        # ...and served in a fraction of the slow file's time, not after it.
        assert hovered < slow_done / 3, (small_done, hovered, slow_done)


def test_analysis_of_a_replaced_version_stops_early():
    """The user typed while a long analysis ran: it stops (Superseded) instead of
    finishing a result nobody will see, freeing its lane for the new version."""
    service = AnalysisService()  # the real engine
    text = slow_chain()
    current = {"version": 1}
    service.is_current = lambda snap: snap.version == current["version"]

    async def timed(version: int) -> float:
        t = time.monotonic()
        await service.get(Snapshot(SLOW, version, text, "/nowhere/slow.py"))
        return time.monotonic() - t

    async def go():
        full = await timed(1)  # a current version runs to the end
        current["version"] = 2
        job = asyncio.ensure_future(timed(2))
        await asyncio.sleep(full / 4)
        current["version"] = 3  # replaced while it runs
        t = time.monotonic()
        with pytest.raises(Superseded):
            await job
        return full, time.monotonic() - t

    full, after_replaced = asyncio.run(go())
    assert after_replaced < full / 2, (full, after_replaced)
