"""PAL301-PAL305 on small kernels, including the double-buffering and
conditional patterns that must stay silent."""
import pytest

from conftest import codes

CALL = """
pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                               pltpu.SemaphoreType.DMA((2,)), pltpu.SemaphoreType.REGULAR])
"""

BUGGY = {
    "PAL301": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    c = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0])
    pltpu.sync_copy(buf.at[0], o_hbm.at[pl.ds(0, 8)])
""",
    "PAL302": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0]).start()
    pltpu.sync_copy(buf.at[0], o_hbm.at[pl.ds(0, 8)])
""",
    "PAL303": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0]).wait()
    pltpu.sync_copy(buf.at[0], o_hbm.at[pl.ds(0, 8)])
""",
    "PAL304": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], flag).start()
    # The rebuilt wait is where JAX raises (PAL109); the start is PAL304.
    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], flag).wait()
""",
    "PAL305": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    c = pltpu.make_async_copy(buf, o_hbm.at[pl.ds(0, 8)], sems.at[0])
    c.start()
    c.wait()
""",
}


@pytest.mark.parametrize("code", sorted(BUGGY))
def test_buggy(code):
    expected = [code, "PAL109"] if code == "PAL304" else [code]
    assert codes(BUGGY[code] + CALL) == expected


NEGATIVE = {
    "double buffer across fori_loop iterations": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    def fetch(i, slot):
        return pltpu.make_async_copy(x_hbm.at[pl.ds(i * 8, 8)], buf.at[slot], sems.at[slot])
    fetch(0, 0).start()
    def body(i, carry):
        slot = i % 2
        @pl.when(i + 1 < 4)
        def _():
            fetch(i + 1, 1 - slot).start()
        fetch(i, slot).wait()
        pltpu.sync_copy(buf.at[slot], o_hbm.at[pl.ds(i * 8, 8)])
        return carry
    jax.lax.fori_loop(0, 4, body, 0)
""",
    "start and wait under the same pl.when": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    i = pl.program_id(0)
    @pl.when(i == 0)
    def _():
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0]).start()
    @pl.when(i == 0)
    def _():
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0]).wait()
""",
    "descriptors through a list and loops": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    copies = [pltpu.make_async_copy(x_hbm.at[pl.ds(8 * k, 8)], buf.at[k], sems.at[k])
              for k in range(2)]
    for c in copies:
        c.start()
    for c in copies:
        c.wait()
""",
    "descriptor handed to unknown code": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    c = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sems.at[0])
    some_library.schedule(c)
""",
    "optional descriptor carried across a Python loop": """
def kernel(x_hbm, o_hbm, buf, sems, flag):
    dma = None
    for i in range(4):
        if dma:
            dma.wait()
        dma = pltpu.async_copy(x_hbm.at[pl.ds(8 * i, 8)], buf.at[i % 2], sems.at[i % 2])
    dma.wait()
""",
}


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_negative_patterns_are_silent(name):
    assert codes(NEGATIVE[name] + CALL) == []


@pytest.mark.parametrize("code", ["PAL301", "PAL302", "PAL303"])
@pytest.mark.parametrize("elision", ["    # ...\n", "    ...\n", "    # …\n"])
def test_a_kernel_with_elided_code_may_pair_there(code, elision):
    """Docs and tutorials elide the rest of a kernel (`# ...`): the wait (or
    the start, or the use of a descriptor) may be in what is left out. The same kernel written out is
    reported."""
    assert codes(BUGGY[code] + CALL) == [code]
    elided = BUGGY[code].replace("    pltpu.sync_copy", elision + "    pltpu.sync_copy")
    assert codes(elided + CALL) == []
    trailing = BUGGY[code] + elision  # the last line of the body, after every statement
    assert codes(trailing + CALL) == []


def test_an_elision_in_another_function_does_not_open_the_kernel():
    other = "\ndef helper():\n    # ...\n    pass\n"
    assert codes(BUGGY["PAL302"] + other + CALL) == ["PAL302"]
