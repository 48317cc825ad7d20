"""A launcher's local flags that Python makes bools, and two of them together.

`pipelined = variant.endswith("_pipeline")` and `expanded =
variant.startswith("expanded")` are bools whatever the engine knows of
`variant`; one sizes the scratch list (`DMA((depth, 2 if expanded else 3))
if pipelined else DMA`) and the kernel unpacks its Refs and picks its DMAs
by the other. Each flag is pinned True, then False, and two flags in every
combination (as many runs as pinning each apart), so the list and the
kernel's branches stay in step. Before, `str.endswith` was not taken for a
flag and every DMA of such a kernel was Unknown. JAX, in TPU interpret
mode, rejects each bug and runs each twin."""
from __future__ import annotations

import pytest

from tests.engine.conftest import HEADER, line_of, run, run_jax

SOURCE = '''
def layout(x, variant):
    pipelined = variant.endswith("_pipeline")
    expanded = variant.startswith("expanded")
    depth = 2 if pipelined else 1

    def kernel(x_hbm, *refs):
        if expanded:
            o_hbm, buf, sem = refs
            pairs = ((x_hbm, buf),)
        else:
            o_hbm, buf, other, sem = refs
            pairs = ((x_hbm, buf), (x_hbm, other))
        if pipelined:
            copies = [pltpu.make_async_copy(src.at[slot], DST, SEM)  # SITE
                      for slot in range(depth) for i, (src, dst) in enumerate(pairs)]
            for c in copies:
                c.start()
            for c in copies:
                c.wait()
        else:
            pltpu.sync_copy(x_hbm, buf)
        pltpu.sync_copy(buf, o_hbm)

    scratch = (pltpu.VMEM(x.shape, x.dtype),) if expanded else \\
        (pltpu.VMEM(x.shape, x.dtype), pltpu.VMEM(x.shape, x.dtype))
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[*scratch,
                        pltpu.SemaphoreType.DMA((depth, 1 if expanded else 2)) if pipelined
                        else pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams())(x)
'''

OK = {"DST": "dst.at[slot]", "SEM": "sem.at[slot, i]"}
BUGS = {
    "read": ({"DST": "dst[slot]"}, "PAL101", "DMA source/destination/semaphore arguments must be Refs."),
    "whole array": ({"SEM": "sem"}, "PAL103", "Cannot signal on a non-()-shaped semaphore"),
}


def _source(edits: dict) -> str:
    text = SOURCE
    for k, v in {**OK, **edits}.items():
        text = text.replace(k, v)
    return text


@pytest.mark.parametrize("case", sorted(BUGS))
def test_the_bug_is_reported(case):
    edits, code, _ = BUGS[case]
    analysis, src = run(_source(edits))
    assert [(f.code, f.span.line) for f in analysis.findings] == [(code, line_of(src, "# SITE"))]


def test_the_twin_is_silent_and_known():
    from pallas_lsp.engine.analyze import analyze
    a = analyze(HEADER + _source({}), "k.py", coverage=True)
    assert a.findings == []
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known for s in dma), dma


def test_a_name_bound_to_a_non_bool_call_is_not_a_flag():
    # `variant.strip()` is a string: truthy or not, it is not pinned
    src = _source({"SEM": "sem"}).replace('variant.endswith("_pipeline")', "variant.strip()")
    assert [f.code for f in run(src)[0].findings] == []


def _jax(edits: dict, variant: str):
    return run_jax(HEADER + _source(edits) + "\nx = jnp.ones((2, 8, 128), jnp.float32)\n"
                   f"print(float(layout(x, {variant!r}).sum()))\n")


@pytest.mark.parametrize("variant", ["expanded_pipeline", "split_pipeline", "split"])
def test_jax_runs_the_twin(variant):
    p = _jax({}, variant)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "2048.0"


@pytest.mark.parametrize("case", sorted(BUGS))
def test_jax_refuses_the_bug(case):
    edits, _, message = BUGS[case]
    p = _jax(edits, "split_pipeline")
    assert p.returncode != 0
    assert message in p.stderr, p.stderr[-2000:]
