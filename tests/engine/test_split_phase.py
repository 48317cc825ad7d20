"""Split-phase DMAs across two pallas_calls: one kernel starts a copy on its
scratch semaphore and returns, a second kernel with the same scratch shapes
only waits on it (an application's collectives overlap compute between the
two custom calls this way, relying on the runtime giving both kernels the
same semaphore). Each kernel alone is PAL302 / PAL303; the pair is not
reported. An unpaired start or wait still is."""
from __future__ import annotations

from pathlib import Path

from tests.engine.conftest import line_of, run

SOURCE = '''
SCRATCH = [pltpu.SemaphoreType.DMA]


def start_body(x_ref, o_ref, sem):
    pltpu.make_async_copy(x_ref, o_ref, sem).start()  # START


def done_body(x_ref, d_ref, o_ref, sem):
    pltpu.make_async_copy(x_ref, d_ref, sem).wait()  # WAIT


def split_copy(x):
    spec = pl.BlockSpec(memory_space=pl.ANY)
    out = pl.pallas_call(start_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         in_specs=[spec], out_specs=spec, scratch_shapes=SCRATCH)(x)
    return pl.pallas_call(DONE, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[spec, spec], out_specs=spec, scratch_shapes=DONE_SCRATCH,
                          input_output_aliases={1: 0})(x, out)
'''


def _codes(body):
    analysis, src = run(body)
    return sorted((f.code, f.span.line) for f in analysis.findings), src


def test_a_start_kernel_and_a_done_kernel_pair_up():
    got, _ = _codes(SOURCE.replace("DONE_SCRATCH", "SCRATCH").replace("DONE", "done_body"))
    assert got == []


def test_a_done_kernel_on_another_scratch_position_does_not_pair():
    body = SOURCE.replace("DONE_SCRATCH", "[pltpu.VMEM((8, 128), jnp.float32)] + SCRATCH") \
        .replace("def done_body(x_ref, d_ref, o_ref, sem)", "def done_body(x_ref, d_ref, o_ref, buf, sem)") \
        .replace("DONE", "done_body")
    got, src = _codes(body)
    assert got == [("PAL302", line_of(src, "# START")), ("PAL303", line_of(src, "# WAIT"))]


def test_a_done_kernel_handed_the_start_kernels_output_pairs_without_an_alias():
    """The pair needs no `input_output_aliases`: the waiting kernel's call is
    handed the starting kernel's output (on a v5e chip such a pair ran, and
    the copy had landed: benchmarks/tpu_chip/split_phase.py pair_noalias)."""
    body = SOURCE.replace("DONE_SCRATCH", "SCRATCH").replace("DONE", "done_body") \
        .replace(",\n                          input_output_aliases={1: 0})", ")")
    assert "input_output_aliases" not in body
    got, _ = _codes(body)
    assert got == []


def test_two_unrelated_kernels_are_not_a_pair():
    """Neither aliased nor handed the other's output: a test file's hang
    case and dropped-copy case, each launched on its own."""
    body = SOURCE.replace("DONE_SCRATCH", "SCRATCH").replace("DONE", "done_body") \
        .replace(",\n                          input_output_aliases={1: 0})", ")") \
        .replace("(x, out)", "(x, x)")
    assert "input_output_aliases" not in body
    got, src = _codes(body)
    assert got == [("PAL302", line_of(src, "# START")), ("PAL303", line_of(src, "# WAIT"))]


def test_an_unpaired_start_is_still_reported():
    body = SOURCE.replace("DONE_SCRATCH", "SCRATCH").replace("DONE", "start_body") \
        .replace("in_specs=[spec, spec]", "in_specs=[spec]").replace("(x, out)", "(out)") \
        .replace(", input_output_aliases={1: 0}", "")
    got, src = _codes(body)
    assert got == [("PAL302", line_of(src, "# START"))]


CHIP = Path(__file__).resolve().parents[2] / "benchmarks" / "tpu_chip" / "data" / \
    "split_phase_v5e.txt"


def test_the_chip_ran_the_pairs_and_hung_on_the_waits_nothing_signals():
    """What a v5e chip did with benchmarks/tpu_chip/split_phase.py (recorded:
    CI has no TPU). The pairs the engine leaves alone, aliased or not, gave
    the right result; the wait-only kernel alone and the wait on a scratch
    position the start kernel never signalled, which the engine reports
    (PAL303), never returned."""
    lines = [ln for ln in CHIP.read_text(encoding="utf-8").splitlines()
             if not ln.startswith("#")]
    assert lines.count("pair: pair OK TPU v5 lite") == 3
    assert lines.count("pair_noalias: pair_noalias OK TPU v5 lite") == 2
    assert any(ln.startswith("wait_only: no line; killed by timeout") for ln in lines)
    assert any(ln.startswith("pair_other_slot: no line; killed by timeout") for ln in lines)
    src = Path(__file__).resolve().parents[2] / "benchmarks" / "tpu_chip" / "split_phase.py"
    from pallas_lsp.engine import analyze
    text = src.read_text(encoding="utf-8")
    got = [(f.code, f.span.line) for f in analyze(text, str(src)).findings]
    # the pairs, as the chip ran them; the other position's wait, which hung
    assert got == [("PAL303", line_of(text, "pltpu.make_async_copy(x_hbm, d_hbm, sem1).wait()"))]
