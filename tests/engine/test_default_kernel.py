"""A launcher whose kernel is a parameter's default (`def launch(x,
body=_kernel)`): the def the default names is the kernel when a call leaves
the parameter out, or when no call in the file is seen; a caller's own
kernel replaces it."""
from __future__ import annotations

import pytest

from tests.engine.conftest import codes, line_of, run

KERNELS = """
def _kernel(x_hbm, o_ref, buf, sem):
    cp = pltpu.make_async_copy(x_hbm, buf, sem.at[0])
    cp.start()  # START
    o_ref[...] = buf[...]


def _fixed(x_hbm, o_ref, buf, sem):
    cp = pltpu.make_async_copy(x_hbm, buf, sem.at[0])
    cp.start()
    cp.wait()
    o_ref[...] = buf[...]


def launch(x, {param}):
    return pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((1,))],
    )(x)
"""


@pytest.mark.parametrize("param", ["body=_kernel", "*, body=_kernel"])
@pytest.mark.parametrize("caller", [
    "",  # a library launcher: no call seen
    "launch(jnp.zeros((8, 128), jnp.float32))",
])
def test_the_default_is_the_kernel(param, caller):
    a, src = run(KERNELS.format(param=param) + f"\n\ndef test_it():\n    {caller or 'pass'}\n")
    found = [(f.code, f.span.line) for f in a.findings]
    assert found == [("PAL302", line_of(src, "# START"))]


def test_a_fixed_default_is_silent():
    body = KERNELS.format(param="body=_kernel").replace(
        "def launch(x, body=_kernel)", "def launch(x, body=_fixed)")
    assert codes(body + "\n\ndef test_it():\n    launch(jnp.zeros((8, 128), jnp.float32))\n") \
        == []


def test_the_callers_kernel_replaces_the_default():
    body = KERNELS.format(param="body=_fixed") + \
        "\n\ndef test_it():\n    launch(jnp.zeros((8, 128), jnp.float32), body=_kernel)\n"
    a, src = run(body)
    assert [(f.code, f.span.line) for f in a.findings] == [("PAL302", line_of(src, "# START"))]


def test_a_default_that_is_not_a_def_stays_unknown():
    body = KERNELS.format(param="body=None")
    assert codes(body + "\n\ndef test_it():\n    launch(jnp.zeros((8, 128), jnp.float32))\n") \
        == []
