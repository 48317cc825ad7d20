"""In kernel code, a name written as a Ref's (`_ref`, `_vmem`, `_hbm`, `_smem`)
bound to the result of code the engine cannot see is a Ref.

Application kernels carve their scratch with helpers of their own
(`attn_wq_vmem = pool.alloc(shape, dtype)` of a VMEM pool allocator in
another module). The engine cannot follow the helper, but the kernel's
author said what the value is, as a kernel parameter named `x_ref` says it
(the convention standalone.py already reads). Such a Ref's space, shape and
dtype stay unknown, so only what holds of any Ref is checked: reading it
(`buf_vmem[0]`) where a DMA needs a Ref. A name without the convention, and
a value the engine knows, are left as they are. JAX, in TPU interpret mode,
rejects the read through a real allocator and runs the twin."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.engine.conftest import HEADER, line_of, run

KERNEL = '''
import vmem_pool


def kernel(x_hbm, o_hbm, pool_ref, sem):
    pool = vmem_pool.Pool(pool_ref)
    NAME = pool.alloc(1)
    copy = pltpu.make_async_copy(x_hbm, DST, sem)  # SITE
    copy.start()
    copy.wait()
    pltpu.sync_copy(pool_ref.at[1], o_hbm)


def run(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((2,) + x.shape, x.dtype), pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams())(x)
'''

POOL = '''
class Pool:
    """Hands out windows of one VMEM buffer."""

    def __init__(self, ref):
        self.ref = ref

    def alloc(self, i):
        return self.ref.at[i]
'''


def _source(name: str, dst: str) -> str:
    return KERNEL.replace("NAME", name).replace("DST", dst)


@pytest.mark.parametrize("name", ["buf_vmem", "buf_ref"])
def test_a_read_of_a_ref_named_so_is_reported(name):
    analysis, src = run(_source(name, f"{name}[0]"))
    assert [(f.code, f.span.line) for f in analysis.findings] == [("PAL101", line_of(src, "# SITE"))]


@pytest.mark.parametrize("name", ["buf_vmem", "buf_ref"])
def test_the_twin_is_silent(name):
    assert run(_source(name, name))[0].findings == []


def test_a_name_without_the_convention_stays_unknown():
    # `bufs` may be a list of Refs, and `bufs[0]` one of them
    assert run(_source("bufs", "bufs[0]"))[0].findings == []


def test_only_in_kernel_code():
    src = '''
import vmem_pool


def host(x):
    staging_vmem = vmem_pool.make(x)
    return staging_vmem[0]
'''
    analysis, _ = run(src)
    assert analysis.findings == []


def test_the_dma_site_is_known():
    from pallas_lsp.engine.analyze import analyze
    a = analyze(HEADER + _source("buf_vmem", "buf_vmem"), "k.py", coverage=True)
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known for s in dma), dma


def _jax(tmp_path, dst: str):
    (tmp_path / "vmem_pool.py").write_text(POOL)
    (tmp_path / "main.py").write_text(
        HEADER + _source("buf_vmem", dst)
        + "\nx = jnp.ones((8, 128), jnp.float32)\nprint(float(run(x).sum()))\n")
    return subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={"JAX_PLATFORMS": "cpu", "PATH": ""})


def test_jax_runs_the_twin(tmp_path):
    p = _jax(tmp_path, "buf_vmem")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "1024.0"


def test_jax_refuses_the_read(tmp_path):
    p = _jax(tmp_path, "buf_vmem[0]")
    assert p.returncode != 0
    assert "DMA source/destination/semaphore arguments must be Refs" in p.stderr, p.stderr[-2000:]


def test_an_attribute_named_as_a_ref_makes_a_ref():
    # `flat = alloc.window_ref` (a pipeline allocation of code not seen)
    src = _source("flat", "flat[0]").replace("flat = pool.alloc(1)", "flat = pool.window_ref")
    analysis, text = run(src)
    assert [(f.code, f.span.line) for f in analysis.findings] == [("PAL101", line_of(text, "# SITE"))]
    assert run(src.replace("flat[0]", "flat"))[0].findings == []
    # a plain attribute name is left alone
    assert run(src.replace("window_ref", "window"))[0].findings == []
