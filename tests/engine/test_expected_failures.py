"""Kernel test suites that check JAX's errors on purpose, and SparseCore kernels.

A kernel launched only inside `with self.assertRaises...` / `pytest.raises` is
wrong by design: no finding from the kinds rules, nor from the syntax floor
when the block names the class it expects; under a catch-all block
(`assertRaises(Exception)`) the floor speaks (expected_errors.py says why). The
same kernel launched anywhere else is judged. A `pallas_call` with
`kernel_type=pltpu.KernelType.SC_*` runs on a SparseCore, whose lowering sorts,
flips and tiles unlike the TensorCore: the TensorCore-only rules stay silent."""
import pytest

from tests.engine.conftest import codes

# A DMA that signals a whole (1,) semaphore array: JAX says "Cannot signal on a
# non-()-shaped semaphore" (PAL103).
KERNEL = '''
def kernel(x_hbm_ref, y_hbm_ref):
    def body(sem):
        pltpu.async_copy(x_hbm_ref.at[pl.ds(8), :], y_hbm_ref.at[:, pl.ds(128)], sem).wait()
    pltpu.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))

LAUNCH = dict(in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
              out_specs=pl.BlockSpec(memory_space=pl.ANY),
              out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
'''


def test_launch_outside_any_block_is_judged():
    assert codes(KERNEL + '''
class T:
    def test_it(self):
        pl.pallas_call(kernel, **LAUNCH)(jnp.zeros((8, 128)))
''') == ["PAL103"]


@pytest.mark.parametrize("block", [
    "self.assertRaisesRegex(ValueError, 'Cannot signal')",
    "self.assertRaises(ValueError)",
    "self.assertRaisesWithLiteralMatch(ValueError, 'x')",
    "pytest.raises(ValueError, match='Cannot signal')",
])
def test_launch_only_inside_an_expected_error_block_is_not(block):
    assert codes(KERNEL + f'''
import pytest

class T:
    def test_it(self):
        with {block}:
            pl.pallas_call(kernel, **LAUNCH)(jnp.zeros((8, 128)))
''') == []


def test_also_launched_outside_the_block_is_judged():
    assert codes(KERNEL + '''
class T:
    def test_error(self):
        with self.assertRaises(ValueError):
            pl.pallas_call(kernel, **LAUNCH)(jnp.zeros((8, 128)))

def main():
    pl.pallas_call(kernel, **LAUNCH)(jnp.zeros((8, 128)))
''') == ["PAL103"]


def test_a_module_helper_is_judged_even_if_only_the_block_calls_it():
    """A module-level launcher is anyone's to call: its kernel is judged."""
    assert codes(KERNEL + '''
def launch(x):
    return pl.pallas_call(kernel, **LAUNCH)(x)

class T:
    def test_it(self):
        with self.assertRaises(ValueError):
            launch(jnp.zeros((8, 128)))
''') == ["PAL103"]


def test_other_with_blocks_do_not_hide_findings():
    assert codes(KERNEL + '''
import contextlib

class T:
    def test_it(self):
        with contextlib.suppress(ValueError):
            pl.pallas_call(kernel, **LAUNCH)(jnp.zeros((8, 128)))
''') == ["PAL103"]


DECORATED = '''
class T:
    def test_it(self):
        x = jnp.zeros((8, 128))

        @functools.partial(pl.pallas_call, out_shape=x,
                           in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pl.ANY))
        def kernel(x_hbm_ref, y_hbm_ref):
            def body(sem):
                pltpu.async_copy(x_hbm_ref, y_hbm_ref, sem).wait()
            pltpu.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))

{call}
'''


def test_decorated_kernel_called_only_in_the_block():
    """The decorator launches it (outside the block); the test calls it inside."""
    inside = "        with self.assertRaisesRegex(ValueError, 'Cannot signal'):\n" \
             "            kernel(x)"
    assert codes(DECORATED.format(call=inside)) == []


def test_decorated_kernel_called_outside_the_block_too():
    both = "        with self.assertRaisesRegex(ValueError, 'Cannot signal'):\n" \
           "            kernel(x)\n" \
           "        kernel(x)"
    assert codes(DECORATED.format(call=both)) == ["PAL103"]


def test_syntax_floor_is_quiet_in_an_expected_failure_too():
    """`x_ref[...]` as a DMA source is a load (the floor reports it from the text
    alone); in a kernel that a test launches to see it fail with that class, it
    does not."""
    body = '''
class T:
    def test_it(self):
        def kernel(x_hbm_ref, y_hbm_ref, sem):
            copy = pltpu.make_async_copy(x_hbm_ref[...], y_hbm_ref, sem)
            copy.start()
            copy.wait()
        with self.assertRaises(ValueError):
            pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pl.ANY),
                           scratch_shapes=[pltpu.SemaphoreType.DMA])(jnp.zeros((8, 128)))
'''
    assert codes(body) == []
    assert codes(body.replace("        with self.assertRaises(ValueError):\n", "        if True:\n")) \
        == ["PAL101", "PAL204"]  # a load of an ANY Ref, passed where a Ref is due
    # Under a catch-all block the floor's finding is not the failure meant:
    # said (the kinds rules stay silent, so PAL204 is not).
    assert codes(body.replace("assertRaises(ValueError)", "assertRaises(Exception)")) \
        == ["PAL101"]


SPARSECORE = '''
def kernel(x_ref, o_ref):
    o_ref[...] = jnp.flip(x_ref[...], axis=-1)

x = jnp.arange(16, dtype=jnp.int32)
y = pl.pallas_call(kernel, out_shape=x{params})(x)
'''


def test_tensorcore_kernel_gets_the_lowering_finding():
    assert codes(SPARSECORE.format(params="")) == ["PAL402"]


@pytest.mark.parametrize("kind", ["SC_VECTOR_SUBCORE", "SC_SCALAR_SUBCORE"])
def test_sparsecore_kernel_type_is_not_judged_as_tensorcore(kind):
    params = f", compiler_params=pltpu.CompilerParams(kernel_type=pltpu.KernelType.{kind})"
    assert codes(SPARSECORE.format(params=params)) == []


def test_sparsecore_params_through_a_test_class_partial():
    assert codes('''
class T:
    def vector_kernel(self, **kwargs):
        return functools.partial(
            pl.pallas_call, **kwargs,
            compiler_params=pltpu.CompilerParams(
                kernel_type=pltpu.KernelType.SC_VECTOR_SUBCORE))

    def test_flip(self):
        x = jnp.arange(16, dtype=jnp.int32)

        @self.vector_kernel(out_shape=x)
        def kernel(x_ref, o_ref):
            o_ref[...] = jnp.flip(x_ref[...], axis=-1)

        kernel(x)
''') == []


FLOOR = '''
class T:
    def test_it(self):
        def kernel(x_hbm_ref, y_hbm_ref, sem):
            pltpu.async_copy(x_hbm_ref{src}, y_hbm_ref, sem.at[0]{priority}).wait()
        with {block}:
            pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pl.ANY),
                           scratch_shapes=[pltpu.SemaphoreType.DMA((1,))])(jnp.zeros((8, 128)))
'''


def test_a_block_expecting_another_message_keeps_the_floor():
    """The test expects "Cannot signal"; a `[...]` load passed as the source
    raises another error first, so the test would fail: the floor says so."""
    block = "self.assertRaisesRegex(ValueError, 'Cannot signal')"
    assert codes(FLOOR.format(src="", priority="", block=block)) == []
    assert codes(FLOOR.format(src="[...]", priority="", block=block)) == ["PAL101"]
    assert codes(FLOOR.format(src="", priority=", priority=-1", block=block)) == ["PAL108"]


@pytest.mark.parametrize("block", ["self.assertRaises(ValueError)",
                                   "pytest.raises(ValueError)",
                                   "self.assertRaisesRegex(ValueError, name_of_regex)"])
def test_a_block_taking_any_message_of_a_class_hides_the_floor_too(block):
    assert codes("import pytest\nname_of_regex = 'x'\n"
                 + FLOOR.format(src="[...]", priority="", block=block)) == []


@pytest.mark.parametrize("block", ["self.assertRaises(Exception)",
                                   "pytest.raises(Exception)",
                                   "self.assertRaises((ValueError, Exception))",
                                   "pytest.raises(expected_exception=BaseException)"])
@pytest.mark.parametrize("src,priority,code", [("[...]", "", "PAL101"),
                                               ("", ", priority=-1", "PAL108")])
def test_a_catch_all_block_keeps_the_floor(block, src, priority, code):
    """The test expects a failure it does not name; the floor's mistake is a
    plain error it would have named: the test passes for the wrong reason."""
    text = "import pytest\n" + FLOOR.format(src=src, priority=priority, block=block)
    assert codes(text) == [code]
    assert codes("import pytest\n" + FLOOR.format(src="", priority="", block=block)) == []


def test_a_block_expecting_the_floors_own_message_hides_it():
    block = "pytest.raises(ValueError, match='arguments must be Refs')"
    found = codes("import pytest\n" + FLOOR.format(src="[...]", priority="", block=block))
    assert "PAL101" not in found


def test_an_unreadable_block_shape_is_not_the_whole_array():
    """The old `BlockSpec(index_map, block_shape)` order (jax < 0.4.31) written in a
    test: the block is unknown, so no VMEM figure (it used to count the whole
    32 x 1024 x 1024 array, 128 MiB, and report PAL404)."""
    body = '''
def kernel(x_ref, y_ref):
    y_ref[...] = x_ref[...] + 1.0

x = jnp.ones((32, 1024, 1024))
y = pl.pallas_call(kernel, out_shape=x, grid=(x.shape[0],),
                   in_specs=[pl.BlockSpec({first}, {second})],
                   out_specs=pl.BlockSpec({first}, {second}))(x)
'''
    assert codes(body.format(first="lambda i: (i, 0, 0)", second="(None, 1024, 1024)")) == []
    # today's order, blocks of the whole array: the estimate is over every limit
    assert codes(body.format(first="(32, 1024, 1024)", second="lambda i: (0, 0, 0)")) \
        == ["PAL404"]


def test_a_sparsecore_gather_through_an_index_array_is_not_a_shape_mismatch():
    gather = '''
x = jnp.arange(8, dtype=jnp.int32)
idx = jax.random.permutation(jax.random.key(0), x)  # shape unknown to the engine

@functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct((2, 8), jnp.int32),
                   in_specs=(pl.BlockSpec(memory_space=pltpu.HBM),
                             pl.BlockSpec(memory_space=pltpu.VMEM)),
                   compiler_params=pltpu.CompilerParams(
                       kernel_type=pltpu.KernelType.SC_VECTOR_SUBCORE))
def kernel(x_hbm_ref, indices_ref, o_ref):
    pltpu.sync_copy(x_hbm_ref.at[indices_ref[...]], o_ref.at[0])

kernel(x, idx)
'''
    assert "PAL305" not in codes(gather)
