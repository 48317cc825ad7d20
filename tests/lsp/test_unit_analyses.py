"""The analysis service on its own (no client): what it keeps per document."""
from __future__ import annotations

import asyncio
import threading

from pallas_lsp.lsp.analyses import AnalysisService
from pallas_lsp.lsp.documents import Snapshot


def raising(source, path=None):
    raise RuntimeError("the engine raised")


def test_notices_survive_forget_for_the_same_version():
    """A publish already waiting on this version's analysis reads its notices
    after a re-check was asked for (forget): they must still be there, or it
    publishes an empty list for a file the engine could not analyse."""
    service = AnalysisService(raising)
    snap = Snapshot("file:///k.py", 3, "x = 1\n", "/k.py")

    async def go():
        analysis = await service.get(snap)
        assert analysis.internal_error.startswith("RuntimeError")
        service.forget(snap.uri)
        assert service.cached(snap) is None  # analysed again next time
        (notice,) = service.notices(snap)
        assert "could not analyse" in notice.message
        newer = Snapshot(snap.uri, 4, "x = 2\n", snap.path)
        assert service.notices(newer) == ()  # never another version's
        service.close(snap.uri)
        assert service.notices(snap) == ()

    asyncio.run(go())


class _Tracked:
    """An Analysis stand-in that records when it is settled, and on which
    thread it is freed."""

    settled: list = []
    freed_on: list = []

    def __init__(self, version):
        self.version, self.internal_error = version, None

    def settle(self):
        _Tracked.settled.append(self.version)

    def __del__(self):
        _Tracked.freed_on.append((self.version, threading.current_thread().name))


def test_settled_after_the_publish_skipped_when_superseded_and_freed_off_the_loop():
    """Editor-only data is built after the diagnostics are out, never for a
    version a keystroke already replaced; the analysis a new one replaces is
    freed on the analysis thread, not on the event loop (5-10 ms for a big
    file's AST)."""
    from pallas_lsp.lsp import analyses as mod

    def engine(text, path=None):
        return _Tracked(int(text.split("=")[1]))

    service = AnalysisService(engine)
    current = {"version": 1}
    service.is_current = lambda snap: snap.version == current["version"]
    _Tracked.settled.clear()
    _Tracked.freed_on.clear()

    async def go():
        await service.get(Snapshot("file:///k.py", 1, "x = 1\n", "/k.py"))
        assert _Tracked.settled == []  # not before the publish that waits for it
        current["version"] = 2  # the user typed before it was settled
        await service.get(Snapshot("file:///k.py", 2, "x = 2\n", "/k.py"))
        await asyncio.sleep(mod.SETTLE_AFTER_S * 4)
        while not service._worker.quiet():  # settles have run (on any lane)
            await asyncio.sleep(0.01)

    asyncio.run(go())
    assert _Tracked.settled == [2]
    assert [v for v, _ in _Tracked.freed_on] == [1]
    assert _Tracked.freed_on[0][1].startswith("pallas-analysis")  # a lane, not the loop


def test_an_edit_starts_its_analysis_what_it_takes_before_the_pause_ends():
    """The lead is the file's recent analysis time with a margin, never more
    than 60 % of the debounce, and nothing for a file never analysed (or a
    debounce of 0)."""
    import time as _time
    from pallas_lsp.engine.model import Analysis
    from pallas_lsp.lsp import analyses as mod

    def slow(source, path=None):
        _time.sleep(0.05)
        return Analysis(path=path)

    service = AnalysisService(slow)
    assert service.lead_s("/k.py", 1.0) == 0.0
    asyncio.run(service.get(Snapshot("file:///k.py", 1, "x = 1\n", "/k.py")))
    lead = service.lead_s("/k.py", 1.0)
    assert 0.05 * mod.LEAD_MARGIN <= lead < 0.5, lead
    assert service.lead_s("/k.py", 0.06) == 0.06 * mod.LEAD_SHARE
    assert service.lead_s("/k.py", 0.0) == 0.0
    assert service.lead_s("/other.py", 1.0) == 0.0
