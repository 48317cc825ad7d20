"""Two memory spaces reached by DMA only: a chip's common memory
(`pltpu.CMEM(shape, dtype)` scratch) and the host's (`pl.MemoryRef(
jax.core.ShapedArray(shape, dtype), pl.HOST)` outputs). Their Refs are Refs of
that space, shape and dtype, so their copies are known to coverage and a read
handed to a copy is PAL101 (a tutorial's CMEM and host-memory chapters, third
held-out set). JAX runs the CMEM twin in interpret mode and rejects the read;
its interpret mode has no host memory, so that half is the engine's alone."""
from __future__ import annotations

import subprocess

from pallas_lsp.engine import analyze
from tests.engine.conftest import HEADER, line_of, run, run_jax

CMEM = '''
x = jnp.ones((8, 128), jnp.float32)


@pl.kernel(out_type=pltpu.HBM(x.shape, x.dtype),
           mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
           scratch_types=(pltpu.CMEM(x.shape, x.dtype), pltpu.VMEM(x.shape, x.dtype),
                          pltpu.SemaphoreType.DMA))
def kernel(x_hbm, o_hbm, x_cmem, x_vmem, sem):
    pltpu.async_copy(x_hbm, x_cmem, sem).wait()
    pltpu.async_copy(SRC, x_vmem, sem).wait()  # SECOND
    pltpu.async_copy(x_vmem, o_hbm, sem).wait()


print(float(kernel(x).sum()))
'''

HOST = '''
x = jnp.ones((8, 128), jnp.float32)


@pl.kernel(out_type=(pl.MemoryRef(jax.core.ShapedArray(x.shape, x.dtype), pl.HOST),
                     pltpu.HBM(x.shape, x.dtype)),
           mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
           scratch_types=(pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA))
def kernel(x_hbm, o_host, staging, vmem, sem):
    pltpu.async_copy(x_hbm, vmem, sem).wait()
    pltpu.async_copy(vmem, staging, sem).wait()
    pltpu.async_copy(DST, o_host.at[pl.ds(0, 8)], sem).wait()  # LAST


host_copy, _ = kernel(x)
'''


def _dma_known(src: str) -> list[bool]:
    cov = analyze(src, "snippet.py", coverage=True)
    return [s.known for s in cov.coverage.sites if s.kind == "dma"]


def test_cmem_scratch_is_a_ref_of_its_space():
    analysis, src = run(CMEM.replace("SRC", "x_cmem"))
    assert analysis.findings == []
    assert _dma_known(src) == [True, True, True]


def test_a_read_of_cmem_handed_to_a_copy_is_reported():
    analysis, src = run(CMEM.replace("SRC", "x_cmem[...]"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL101", line_of(src, "# SECOND"))]


def test_host_memory_outputs_are_refs_of_their_space():
    analysis, src = run(HOST.replace("DST", "staging"))
    assert analysis.findings == []
    assert _dma_known(src) == [True, True, True]
    analysis, src = run(HOST.replace("DST", "staging[...]"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL101", line_of(src, "# LAST"))]


def _interpret(src: str) -> subprocess.CompletedProcess:
    text = HEADER + CMEM.replace("SRC", src).replace(
        "@pl.kernel(", "@pl.kernel(interpret=pltpu.InterpretParams(), ")
    return run_jax(text)


def test_jax_runs_the_cmem_twin_and_refuses_the_read():
    ok = _interpret("x_cmem")
    assert ok.returncode == 0 and ok.stdout.strip() == "1024.0", ok.stderr[-2000:]
    bad = _interpret("x_cmem[...]")
    assert bad.returncode != 0
    assert "DMA source/destination/semaphore arguments must be Refs." in bad.stderr


def test_sparsecore_memory_ref_takes_a_shape_and_a_dtype():
    """`plsc.MemoryRef(shape, dtype, memory_space=..., tiling=...)` (newer JAX
    than the oracle's 0.10.2, which lacks it, so the engine's model alone): a
    buffer of that shape, dtype and space, here given to `run_scoped` by
    keyword. In HBM, the allocation is PAL208 and a read of it PAL204; in
    VMEM both are fine."""
    body = '''
from functools import partial
from jax.experimental.pallas import tpu_sc as plsc


def body(x_ref, o_ref, buf):
    pltpu.sync_copy(x_ref, buf)
    o_ref[...] = buf[...]  # READ


def kernel(x_ref, o_ref):
    pl.run_scoped(partial(body, x_ref, o_ref),
                  buf=plsc.MemoryRef((8, 128), jnp.float32, memory_space=SPACE,
                                     tiling=((8, 128),)))


def launch(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        compiler_params=pltpu.CompilerParams(kernel_type=pltpu.KernelType.SC_VECTOR_SUBCORE),
    )(x)
'''
    analysis, src = run(body.replace("SPACE", "pltpu.HBM"))
    got = {(f.code, f.span.line) for f in analysis.findings}
    assert ("PAL204", line_of(src, "# READ")) in got and {c for c, _ in got} == {"PAL204", "PAL208"}
    assert run(body.replace("SPACE", "pltpu.VMEM"))[0].findings == []
