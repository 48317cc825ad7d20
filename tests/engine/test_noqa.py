from conftest import codes

KERNEL = """
def kernel(x_hbm, o_hbm, sems):
    pltpu.make_async_copy(x_hbm, o_hbm, sems).start()  {comment}
    pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).wait()

pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
"""


def test_noqa_variants():
    assert codes(KERNEL.format(comment="")) == ["PAL103"]
    assert codes(KERNEL.format(comment="# noqa")) == []
    assert codes(KERNEL.format(comment="# noqa: PAL103")) == []
    assert codes(KERNEL.format(comment="# noqa: PAL101, PAL103")) == []
    assert codes(KERNEL.format(comment="# noqa: PAL101")) == ["PAL103"]
    assert codes(KERNEL.format(comment="# NOQA:PAL103")) == []


def test_noqa_inside_a_string_does_not_count():
    from pallas_lsp.engine.noqa import noqa_lines
    assert noqa_lines("x = '# noqa'\ny = 1  # noqa: PAL101\n") == {1: frozenset({"PAL101"})}
    assert noqa_lines('s = "a # b"  # noqa\n') == {0: None}
