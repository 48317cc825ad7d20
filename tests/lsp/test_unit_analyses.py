"""The analysis service on its own (no client): what it keeps per document."""
from __future__ import annotations

import asyncio

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
