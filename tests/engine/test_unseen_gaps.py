"""Code shapes of jax's own test suites the engine lost (issue 31, the last gaps).

- A launcher built by a factory and first run with unknown arguments, then
  called from a `run_state` body with its Refs: the kernel closes over them,
  and that run is another kernel (binding/pallas_call._closed_refs).
- A function that opens `pl.run_scoped` and launches nothing is kernel code
  (traced into a jaxpr by a test, or launched from a file not read): run as
  such, its `*_ref` parameters Refs (standalone.py).
- In a kernel a test launches to see another message, a DMA argument written
  `x[i]` with `x` known to be a Ref is a read, reported like the syntax floor's
  `x[...]` (rules/expected_reads.py).

JAX's verdicts (jax 0.10.2, TPU interpret mode on CPU): a read passed to a
started copy raises "DMA source/destination/semaphore arguments must be Refs."
(also when the index is a Ref: `x_ref[idx_ref]` is a gather read); one passed to
a wait-only descriptor fails closing the jaxpr with "`JaxprInputEffect` ... does
not have a corresponding jaxpr input." (PAL112)."""
import pytest

from tests.engine.conftest import HEADER, codes

RUN_STATE_HEADER = HEADER + "from absl.testing import parameterized\n" \
    "from jax._src.state import discharge as state_discharge\n"

FACTORY = '''
def make_copies(i):
  @jax.named_call
  def copy_start(x_ref, o_ref):
    def copy_start_kernel(sem):
      pltpu.make_async_copy({start_src}, o_ref, sem).start()
    return pl.pallas_call(
        copy_start_kernel,
        out_shape=pltpu.SemaphoreType.DMA(()),
        out_specs=pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
    )()

  @jax.named_call
  def copy_done(x_ref, o_ref, sem):
    def copy_done_kernel(sem):
      pltpu.make_async_copy(x_ref.at[i], {wait_dst}, sem).wait()
    () = pl.pallas_call(
        copy_done_kernel,
        out_shape=(),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
    )(sem)

  return copy_start, copy_done


class StatefulTest(parameterized.TestCase):

  def test_slice(self):
    @jax.jit
    def f(x):
      y = jnp.zeros(x.shape[1:], x.dtype)
      def body(refs):
        copy_start, copy_done = make_copies(2)
        x_ref, y_ref = refs
        fut = copy_start(x_ref, y_ref)
        copy_done(x_ref, y_ref, fut)
      _, y = state_discharge.run_state(body)((x, y))
      return y
    f(jnp.ones((4, 8, 128), jnp.float32))
'''


@pytest.mark.parametrize("start_src, wait_dst, expected", [
    ("x_ref[i]", "o_ref", ["PAL101"]),
    ("x_ref.at[i]", "o_ref[...]", ["PAL112"]),
    ("x_ref.at[i]", "o_ref", []),
])
def test_refs_of_a_run_state_body_reach_a_factory_launcher(start_src, wait_dst, expected):
    source = FACTORY.format(start_src=start_src, wait_dst=wait_dst)
    assert codes(source, RUN_STATE_HEADER) == expected


SCOPED = '''
def body(x_hbm_ref, i):
  def inner(x_ref, sem):
    pltpu.async_copy({src}, x_ref, sem).wait()

  pl.run_scoped(inner, pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA)
  return []
'''


@pytest.mark.parametrize("src, expected", [
    ("x_hbm_ref[i]", ["PAL101"]),
    ("x_hbm_ref.at[i]", []),
])
def test_run_scoped_outside_any_launch_is_kernel_code(src, expected):
    assert codes(SCOPED.format(src=src)) == expected


GATHER = '''
class GatherTest(parameterized.TestCase):

  def test_invalid_gather(self):
    x = jnp.arange(8, dtype=jnp.int32)
    indices = jnp.arange(8, dtype=jnp.int32)

    @functools.partial(
        pl.pallas_call,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
        in_specs=(pl.BlockSpec(memory_space=pltpu.VMEM),
                  pl.BlockSpec(memory_space=pltpu.VMEM)),
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
    )
    def kernel(x_ref, indices_ref, o_ref):
      tmp = x_ref[indices_ref]
      pltpu.sync_copy({src}, o_ref)

    with self.assertRaisesRegex({expects}):
      kernel(x, indices)
'''


@pytest.mark.parametrize("src, expects, expected", [
    # The test expects another failure: the read fails first, the test with it.
    ("x_ref[indices_ref]", "NotImplementedError, 'from HBM to HBM'", ["PAL101"]),
    ("x_ref[indices_ref]", "ValueError, 'must be Refs'", []),  # the failure it means
    ("x_ref[indices_ref]", "ValueError", []),  # may be that one: not said
    ("x_ref.at[indices_ref]", "NotImplementedError, 'from HBM to HBM'", []),
    ("tmp", "NotImplementedError, 'from HBM to HBM'", ["PAL101"]),  # through a temporary
    ("tmp", "ValueError, 'must be Refs'", []),
])
def test_a_read_in_a_kernel_expected_to_fail_otherwise(src, expects, expected):
    assert codes(GATHER.format(src=src, expects=expects),
                 HEADER + "from absl.testing import parameterized\n") == expected


def test_a_run_scoped_kernel_expected_to_fail_is_not_judged_by_its_own_run():
    # `kernel` is kernel code (it opens run_scoped) and runs as such before the
    # test's launch is seen; that launch expects the failure, so neither run speaks.
    assert codes('''
def kernel(x_hbm_ref, y_hbm_ref):
    def body(sem):
        pltpu.async_copy(x_hbm_ref, y_hbm_ref, sem).wait()
    pltpu.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))

class T:
    def test_it(self):
        with self.assertRaisesRegex(ValueError, 'Cannot signal'):
            pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                           out_specs=pl.BlockSpec(memory_space=pl.ANY),
                           out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           )(jnp.zeros((8, 128)))
''') == []


DOCS_SNIPPET = '''
def move_data(src_ref, dst_ref, sem):
  pltpu.async_copy({src}, dst_ref.at[0:8], sem).wait()

src_data = pltpu.VMEM((8, 128), jnp.float32)
dst_data = pltpu.VMEM((16, 128), jnp.float32)

# Inside a kernel:
pltpu.run_scoped(move_data, src_data, dst_data, pltpu.SemaphoreType.DMA)

# Or as the scratch of a launch (whose operands the snippet leaves out):
pl.pallas_call(move_data, scratch_shapes=[pltpu.SemaphoreType.DMA])()
'''


def test_a_run_scoped_outside_a_kernel_runs_its_body_as_kernel_code():
    # The launch loses what `src_ref` is; the run_scoped run knows it: the
    # site counts as known, and a read there is reported.
    from pallas_lsp.engine import analyze
    a = analyze(HEADER + DOCS_SNIPPET.format(src="src_ref"), "page.py", coverage=True)
    assert a.findings == []
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert [(s.known, s.launched) for s in dma] == [(True, True)]
    assert codes(DOCS_SNIPPET.format(src="src_ref[...]")) == ["PAL101"]


PIPELINE_BLOCKS = '''
spec = pl.BlockSpec(index_map=lambda i, j: (i, j), block_shape=(8, 128), memory_space={space})

def outer(x_ref, o_ref):
  def inner_kernel(input_ref, accum_ref):
    accum_ref[...] = input_ref[...]
  pltpu.emit_pipeline(inner_kernel, in_specs=[spec], out_specs=spec, grid=(2, 1))(x_ref, o_ref)

x = jnp.ones((16, 128), jnp.float32)
pl.pallas_call(outer, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY))(x)
'''


def test_a_pipeline_block_in_any_has_no_memory_space():
    # jax 0.10.2 stops at emit_pipeline ("ValueError: Unsupported buffer memory
    # space: any"), newer versions give the body the source window: the body's
    # loads are not judged (PAL204 was a message jax 0.10.2 never gives here).
    assert codes(PIPELINE_BLOCKS.format(space="pl.ANY")) == []
    assert codes(PIPELINE_BLOCKS.format(space="pltpu.VMEM")) == []


def test_a_test_case_that_passes_a_builtin_type_picks_its_branch():
    # `product(structure=[tuple, dict])` and `if structure is dict:` build the
    # scratch as a dict of keyword entries or as a tuple: each case binds it.
    from pallas_lsp.engine import analyze
    body = '''
class T(parameterized.TestCase):

  @parameterized.product(structure=[tuple, dict])
  def test_sub(self, structure):
    x = jnp.arange(128, dtype=jnp.int32)

    def body(x_hbm_ref, out_hbm_ref, scratch_ref, nested):
      pltpu.sync_copy(x_hbm_ref, scratch_ref)
      pltpu.sync_copy(x_hbm_ref, nested["buf"])
      pltpu.sync_copy(scratch_ref, out_hbm_ref)

    if structure is dict:
      scratch = dict(scratch_ref=pltpu.VMEM(x.shape, x.dtype),
                     nested=dict(buf=pltpu.VMEM(x.shape, x.dtype)))
    else:
      scratch = (pltpu.VMEM(x.shape, x.dtype), dict(buf=pltpu.VMEM(x.shape, x.dtype)))
    pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                   in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                   out_specs=pl.BlockSpec(memory_space=pl.ANY), scratch_shapes=scratch)(x)
'''
    header = HEADER + "from absl.testing import parameterized\n"
    a = analyze(header + body, "t.py", coverage=True)
    assert a.findings == []
    assert [s.known for s in a.coverage.sites if s.kind == "dma"] == [True, True, True]
    assert codes(body.replace('nested["buf"]', 'nested["buf"][...]'), header) == ["PAL101"]
