"""PAL306: windows `ref.at[...]` past the Ref's known shape, judged as JAX's
trace-time check judges them (tests/oracle/fixtures/pal306_* prove the
messages against JAX), and silent wherever a value is not known."""
import pytest

from conftest import line_of, run

LAUNCH = """
def launch(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec((16, 128), lambda: (0, 0))],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x)
"""


def _pal306(kernel_body: str):
    analysis, src = run("def kernel(x_ref, o_hbm, buf, sem):\n" + kernel_body + LAUNCH)
    return [(f.span.line, f.message) for f in analysis.findings if f.code == "PAL306"], src


@pytest.mark.parametrize("window,message", [
    ("x_ref.at[pl.ds(12, 8)]", "Out of bound slice: start=12, size=8, stride=1, dim=16."),
    ("x_ref.at[pl.ds(16, 1)]", "Out of bound slice: start=16, dim=16."),
    ("x_ref.at[20:]", "Out of bound slice: start=16, dim=16."),
    ("x_ref.at[16:24]", "Out of bound slice: start=16, dim=16."),
    ("x_ref.at[:, pl.ds(64, 128)]", "Out of bound slice: start=64, size=128, stride=1, dim=128."),
    ("buf.at[2]", "Out of bound indexer: idx=2, dim=2."),
])
def test_a_window_past_the_end_is_reported_at_its_index(window, message):
    found, src = _pal306(f"    pltpu.sync_copy({window}, o_hbm)  # here\n")
    assert found == [(line_of(src, "# here"), message)]


@pytest.mark.parametrize("window", [
    "x_ref.at[pl.ds(0, 32)]",  # JAX does not check a start of 0 while tracing
    "x_ref.at[12:20]",  # clamped to 12:16 as Python clamps (then a shape mismatch)
    "x_ref.at[pl.ds(pl.program_id(0) * 8, 8)]",  # a start the engine does not know
    "x_ref.at[pl.ds(12, 8, stride=2)]",  # strided: not judged
    "x_ref.at[pl.ds(8, 8)]",
    "buf.at[1]",
    "buf.at[-1]",
    "x_ref.at[...,]",
])
def test_a_window_inside_or_unknown_is_silent(window):
    found, _ = _pal306(f"    pltpu.sync_copy({window}, o_hbm)\n")
    assert found == []


def test_an_integer_index_is_judged_only_as_a_dma_argument():
    """JAX checks an integer index only when the copy runs: a view that no
    DMA uses reads nothing."""
    found, _ = _pal306("    view = buf.at[2]\n    pltpu.sync_copy(buf.at[0], o_hbm)\n")
    assert found == []


def test_the_window_through_a_helper_and_a_constant():
    analysis, src = run('''
ROWS = 8

def fetch(src, dst, sem, start):
    return pltpu.make_async_copy(src.at[pl.ds(start, ROWS)], dst, sem)  # here

def kernel(x_ref, o_hbm, buf, sem):
    c = fetch(x_ref, buf.at[0], sem, ROWS + 4)
    c.start()
    c.wait()
    pltpu.sync_copy(buf.at[0], o_hbm)
''' + LAUNCH)
    found = [(f.span.line, f.message) for f in analysis.findings if f.code == "PAL306"]
    assert found == [(line_of(src, "# here"), "Out of bound slice: start=12, size=8, stride=1, "
                                              "dim=16.")]
    assert "PAL305" not in {f.code for f in analysis.findings}  # no shape from a bad window
