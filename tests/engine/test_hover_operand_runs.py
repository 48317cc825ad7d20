"""Hover after a pallas_call made with in_specs and then called: the kernel
runs once where the call is made (operands unknown: an ANY input has no
shape) and again with the operands. What the first run saw is dropped for
that launch site, so the input shows the operand's shape and dtype instead of
"unknown"; other sites' runs and different operands are still joined."""
from __future__ import annotations

from tests.engine.conftest import run

KERNEL = '''
def kernel(x_hbm, o_hbm, sem):
    pltpu.async_copy(x_hbm, o_hbm, sem).wait()


def make(rows):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA])
'''


def _x_hbm(body: str):
    analysis, _ = run(KERNEL + body)
    values = {(n.value.shape, n.value.dtype) for n in analysis.lazy["names"]()
              if n.name == "x_hbm"}
    assert len(values) == 1, values
    return values.pop()


def test_the_input_gets_the_operands_shape():
    assert _x_hbm("y = make(8)(jnp.zeros((8, 128), jnp.float32))\n") == ((8, 128), "float32")


def test_two_operand_shapes_are_still_joined():
    assert _x_hbm("y = make(8)(jnp.zeros((8, 128), jnp.float32))\n"
                  "z = make(16)(jnp.zeros((16, 128), jnp.float32))\n") == ((None, 128), "float32")


def test_a_call_never_given_its_operands_keeps_what_it_saw():
    assert _x_hbm("f = make(8)\n") == (None, None)


def test_a_site_without_operands_is_not_hidden_by_another_sites_run():
    body = '''
a = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                   out_specs=pl.BlockSpec(memory_space=pl.ANY),
                   scratch_shapes=[pltpu.SemaphoreType.DMA])
y = make(8)(jnp.zeros((8, 128), jnp.float32))
'''
    assert _x_hbm(body) == (None, None)
