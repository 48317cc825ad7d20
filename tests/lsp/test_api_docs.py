"""The Pallas API docs: extracted from the installed jax in a subprocess,
cached on disk per jax version and path, read back without importing jax;
the hover uses them and never starts jedi for a Pallas name."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from lsp_harness import REPO, find, kernel_text, kernel_uri, position_of, start_session
from test_hover import api_docs_ready

SERVER = REPO / "server"

LOAD = """
import json, sys, time
from pallas_lsp.lsp.api_docs import ApiDocs
d = ApiDocs()
t = time.perf_counter()
d.configure(None)
d.allow_extraction()
d.ready.wait(300)
doc = d.lookup("pltpu.make_async_copy")
print(json.dumps({"state": d.state, "source": d.source, "seconds": time.perf_counter() - t,
                  "signature": doc and doc.signatures[0], "is_pallas": doc and doc.is_pallas,
                  "dma": d.lookup("pltpu.SemaphoreType.DMA").full_name,
                  "nested": d.lookup("pltpu.SemaphoreType.DMA.value").full_name,
                  "jax_imported": "jax" in sys.modules, "count": d.count}))
"""


def load(cache: Path) -> dict:
    env = {"PALLAS_LSP_CACHE_DIR": str(cache), "PYTHONPATH": str(SERVER), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True,
                         env=env, timeout=400, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_extracted_once_then_read_from_the_cache(tmp_path):
    first = load(tmp_path)
    assert first["state"] == "ready" and first["source"] == "extracted"
    assert first["signature"] == "make_async_copy(src_ref, dst_ref, sem) -> 'AsyncCopyDescriptor'"
    assert first["is_pallas"] and first["count"] > 150
    assert first["dma"] == first["nested"] == "jax._src.pallas.mosaic.core.SemaphoreType.DMA"
    assert not first["jax_imported"]  # the subprocess imported it, not us
    (cached,) = tmp_path.glob("api-docs-*.json")
    data = json.loads(cached.read_text())
    import jax
    assert data["jax_version"] == jax.__version__ and f"jax{jax.__version__}" in cached.name
    assert data["jax_path"] == str(Path(jax.__file__).resolve().parent)
    second = load(tmp_path)
    assert second["source"] == "cache" and second["signature"] == first["signature"]
    assert second["seconds"] < 1.0 and not second["jax_imported"]
    assert not list(tmp_path.glob("*.lock"))


def test_a_lock_left_by_a_dead_server_is_taken_over(tmp_path):
    from pallas_lsp.lsp import api_docs
    info = api_docs._probe_here()
    path = api_docs.cache_file(info)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    target = tmp_path / path.name
    target.with_suffix(".lock").write_text(str(proc.pid))  # that process is gone
    assert api_docs._claim(target)
    assert not api_docs._claim(target)  # now ours, and we are alive
    api_docs._release(target)


async def test_api_hover_never_starts_jedi():
    uri = kernel_uri("dma_bugs.py")
    text = kernel_text("dma_bugs.py")
    async with start_session("visual-studio-code") as s:
        s.open(uri, text)
        assert await api_docs_ready(s, uri) == "ready"
        line, col = find(text, "make_async_copy(scratch")
        pos = position_of(text, line, col + 3, s.encoding)
        t = time.perf_counter()
        h = await s.hover(uri, pos.line, pos.character)
        assert time.perf_counter() - t < 1.0
        assert "make_async_copy(src_ref, dst_ref, sem)" in h.contents.value
        assert (await s.server_text(uri))["jedi"] is None  # jedi was never started


async def test_a_reexport_from_user_code_is_resolved_by_jedi(tmp_path):
    """`from mylib import pl`: the import scan cannot tell it is Pallas; jedi
    can, and is started for it (then the docs come from the extracted table)."""
    (tmp_path / "mylib.py").write_text("from jax.experimental import pallas as pl\n")
    user = tmp_path / "user.py"
    text = "from mylib import pl\n\npl.pallas_call\n"
    user.write_text(text)
    async with start_session("visual-studio-code", root=tmp_path) as s:
        s.open(user.as_uri(), text)
        assert await api_docs_ready(s, user.as_uri()) == "ready"
        # With jedi's on-disk cache cold (a fresh machine), its first look at jax
        # takes longer than the hover timeout: that hover answers without jedi,
        # on time, and jedi keeps working, so a later hover has the docs.
        t = time.perf_counter()
        h = await s.hover(user.as_uri(), 2, 5)
        assert time.perf_counter() - t < 2.0 + 1.5  # hover.jediTimeoutMs (2 s) + slack
        deadline = time.perf_counter() + 60
        while not (h is not None and "pallas_call(kernel" in h.contents.value):
            assert time.perf_counter() < deadline, "jedi never resolved the re-export"
            await asyncio.sleep(0.5)
            h = await s.hover(user.as_uri(), 2, 5)
        assert (await s.server_text(user.as_uri()))["jedi"] is True


def test_the_jax_version_is_read_without_importlib_metadata():
    """The server's own jax: its version from the dist-info beside it, as
    importlib.metadata reads it, without loading that (and email) for good."""
    code = ("import sys\nfrom pallas_lsp.lsp import api_docs\n"
            "info = api_docs._probe_here()\n"
            "print('importlib.metadata' in sys.modules)\n"
            "from importlib import metadata\n"
            "print(info['version'] == metadata.version('jax'), info['version'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "False" and out[1] == "True" and out[2]


def test_the_version_is_none_unless_one_dist_info_says_it(tmp_path):
    from pallas_lsp.lsp import api_docs
    pkg = tmp_path / "jax"
    pkg.mkdir()
    assert api_docs._dist_info_version(str(pkg)) is None
    for v in ("1.2.3", "1.2.4"):
        info = tmp_path / f"jax-{v}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jax\nVersion: {v}\n\nbody\n")
        (tmp_path / "jaxlib-9.dist-info").mkdir(exist_ok=True)
        if v == "1.2.3":
            assert api_docs._dist_info_version(str(pkg)) == "1.2.3"
    assert api_docs._dist_info_version(str(pkg)) is None  # two of them: ask importlib.metadata
