"""Kernel test suites and their idioms: launchers reached through methods of
a test base class (`self.pallas_call`, `self.kernel`, in this file or in
another module), kernels decorated with such a method, Refs made by
`run_state`, and Pallas modules imported conditionally. A correct kernel
gets no finding; its buggy twin gets the expected one, on the right line."""
from pathlib import Path

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.project import Project


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch):
    """What the interpreter follows is under test here, not the syntax-only
    layer (which reports some of these bugs from the text alone)."""
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")

IMPORTS = '''\
import functools
from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
'''

BASE = '''
class PallasBaseTest(parameterized.TestCase):
  INTERPRET = False

  def setUp(self):
    super().setUp()
    if not jax.devices():
      self.skipTest("no device")

  def pallas_call(self, *args, **kwargs):
    return pl.pallas_call(*args, **kwargs, interpret=self.INTERPRET)

  def kernel(self, *args, **kwargs):
    return pl.kernel(*args, **kwargs, interpret=self.INTERPRET)
'''

TESTS = '''
class CopyTest(PallasBaseTest):

  def test_partial_decorated(self):
    @functools.partial(
        self.pallas_call,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
    )
    def kernel(x_ref, o_ref, sem):
      copy = pltpu.make_async_copy(x_ref, o_ref, sem)  # PARTIAL
      copy.start()
      copy.wait()

    x = jnp.ones((8, 128), jnp.float32)
    self.assertEqual(kernel(x).shape, x.shape)

  def test_kernel_decorated(self):
    mesh = pltpu.create_tensorcore_mesh("core")

    @self.kernel(out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=mesh,
                 scratch_shapes=[pltpu.SemaphoreType.DMA])
    def kernel(x_ref, o_ref, sem):
      copy = pltpu.make_async_copy(x_ref, o_ref, sem)  # KERNEL
      copy.start()
      copy.wait()

    x = jnp.ones((8, 128), jnp.float32)
    self.assertEqual(kernel(x).shape, x.shape)

  def test_launched_by_the_method(self):
    def kernel(x_ref, o_ref, sems):
      copy = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # CALL
      copy.start()
      copy.wait()

    x = jnp.ones((8, 128), jnp.float32)
    y = self.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA((2,))],
    )(x)
    self.assertEqual(y.shape, x.shape)


if __name__ == "__main__":
  absltest.main()
'''

# The bugs: a Ref read into an Array, a whole semaphore array.
BUGS = {
    "PARTIAL": ("make_async_copy(x_ref, o_ref, sem)", "make_async_copy(x_ref[...], o_ref, sem)",
                "PAL101"),
    "KERNEL": ("make_async_copy(x_ref, o_ref, sem)", "make_async_copy(x_ref[...], o_ref, sem)",
               "PAL101"),
    "CALL": ("make_async_copy(x_ref, o_ref, sems.at[0])", "make_async_copy(x_ref, o_ref, sems)",
             "PAL103"),
}


def _bug(text: str, marker: str) -> str:
    old, new, _ = BUGS[marker]
    lines = text.split("\n")
    i = next(i for i, line in enumerate(lines) if f"# {marker}" in line)
    assert old in lines[i]
    lines[i] = lines[i].replace(old, new)
    return "\n".join(lines)


def _line(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if marker in line)


def _found(analysis) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.line) for f in analysis.findings)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _analyse(root: Path, rel: str):
    path = root / rel
    return analyze(path.read_text(), str(path), project=Project([str(root)]))


SAME_FILE = IMPORTS + BASE + TESTS


def test_correct_test_suite_with_a_base_class_in_the_file_has_no_finding():
    assert _found(analyze(SAME_FILE, "tpu_test.py")) == []


@pytest.mark.parametrize("marker", sorted(BUGS))
def test_bug_in_a_kernel_launched_through_the_base_class(marker):
    text = _bug(SAME_FILE, marker)
    assert (BUGS[marker][2], _line(text, f"# {marker}")) in _found(analyze(text, "tpu_test.py"))
    # only that bug (reading an ANY Ref into an Array is PAL204 too)
    assert {line for _, line in _found(analyze(text, "tpu_test.py"))} == {_line(text, f"# {marker}")}


OTHER_MODULE = IMPORTS + "from tests_util import base\n" + TESTS.replace(
    "class CopyTest(PallasBaseTest)", "class CopyTest(base.PallasBaseTest)")


def _project(tmp_path, text: str):
    _write(tmp_path, {"tests_util/__init__.py": "", "tests_util/base.py": IMPORTS + BASE,
                      "kernels_test.py": text})
    return _analyse(tmp_path, "kernels_test.py")


def test_base_class_in_another_module(tmp_path):
    assert _found(_project(tmp_path, OTHER_MODULE)) == []


@pytest.mark.parametrize("marker", sorted(BUGS))
def test_bug_found_through_a_base_class_in_another_module(tmp_path, marker):
    text = _bug(OTHER_MODULE, marker)
    found = _found(_project(tmp_path, text))
    assert (BUGS[marker][2], _line(text, f"# {marker}")) in found
    assert {line for _, line in found} == {_line(text, f"# {marker}")}  # only that bug


# A base class the engine cannot see (jax's own test utilities, not in the
# project): `self.pallas_call` is unknown. The decorated kernel must not be
# taken for the function the test calls with arrays.
UNSEEN_BASE = IMPORTS + "from jax._src.pallas import pallas_test_util as ptu\n" + \
    TESTS.replace("class CopyTest(PallasBaseTest)", "class CopyTest(ptu.PallasTPUTest)")


def test_decorator_of_an_unseen_base_class_gives_no_false_alarm():
    assert _found(analyze(UNSEEN_BASE, "tpu_test.py")) == []


def test_unseen_base_class_as_a_plain_import():
    text = UNSEEN_BASE.replace("from jax._src.pallas import pallas_test_util as ptu",
                               "from somewhere_else import test_base as ptu")
    assert _found(analyze(text, "tpu_test.py")) == []


@pytest.mark.parametrize("marker", ["PARTIAL", "KERNEL"])
def test_kernel_of_an_unseen_launcher_is_still_checked_by_its_use(marker):
    text = _bug(UNSEEN_BASE, marker)
    found = _found(analyze(text, "tpu_test.py"))
    assert ("PAL101", _line(text, f"# {marker}")) in found
    assert {line for _, line in found} == {_line(text, f"# {marker}")}


def test_user_decorator_factory_that_returns_a_launcher():
    text = IMPORTS + '''
def tpu_kernel(**kwargs):
  def wrap(body):
    return pl.pallas_call(body, **kwargs)
  return wrap


@tpu_kernel(out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
            out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA])
def copy(x_ref, o_ref, sem):
  c = pltpu.make_async_copy(x_ref, o_ref, sem)  # HERE
  c.start()
  c.wait()


def run(x):
  return copy(x)
'''
    assert _found(analyze(text, "k.py")) == []
    bad = text.replace("make_async_copy(x_ref, o_ref, sem)", "make_async_copy(x_ref[...], o_ref, sem)")
    found = _found(analyze(bad, "k.py"))
    assert ("PAL101", _line(bad, "# HERE")) in found
    assert {line for _, line in found} == {_line(bad, "# HERE")}  # PAL204 too: ANY read


# --- run_state -------------------------------------------------------------

RUN_STATE = IMPORTS + '''

def copy_kernel(x_ref, y_ref, sem):
  pltpu.make_async_copy(x_ref, y_ref, sem).start()  # HERE
  pltpu.make_async_copy(x_ref, y_ref, sem).wait()


def stateful(refs):
  x_ref, y_ref = refs
  pl.pallas_call(functools.partial(copy_kernel, x_ref, y_ref),
                 scratch_shapes=[pltpu.SemaphoreType.DMA], out_shape=[])()


@jax.jit
def f():
  x = jnp.ones((8, 128), jnp.float32)
  _, y = pl.run_state(stateful)((x, jnp.zeros((8, 128), jnp.float32)))
  return y
'''


@pytest.mark.parametrize("variant", ["call", "decorator", "private", "lambda"])
def test_run_state_refs(variant):
    text = RUN_STATE
    if variant == "decorator":
        text = text.replace("\ndef stateful(refs):", "\n@pl.run_state\ndef stateful(refs):") \
            .replace("pl.run_state(stateful)(", "stateful(")
    elif variant == "private":
        text = text.replace("import jax\n", "import jax\nfrom jax._src.state import discharge\n") \
            .replace("pl.run_state(stateful)", "discharge.run_state(stateful)")
    elif variant == "lambda":
        text = text.replace("pl.run_state(stateful)", "pl.run_state(lambda refs: stateful(refs))")
    assert _found(analyze(text, "k.py")) == []
    bad = text.replace("make_async_copy(x_ref, y_ref, sem).start()",
                       "make_async_copy(x_ref[...], y_ref, sem).start()")
    assert ("PAL101", _line(bad, "# HERE")) in _found(analyze(bad, "k.py"))


def test_run_state_refs_without_a_known_initial_value():
    text = RUN_STATE.replace("jax.jit\ndef f():", "jax.jit\ndef f(init):").replace(
        "((x, jnp.zeros((8, 128), jnp.float32)))", "(init)")
    assert "(init)" in text
    assert _found(analyze(text, "k.py")) == []
    bad = text.replace("make_async_copy(x_ref, y_ref, sem).start()",
                       "make_async_copy(x_ref[...], y_ref, sem).start()")
    assert ("PAL101", _line(bad, "# HERE")) in _found(analyze(bad, "k.py"))


# --- conditional imports -----------------------------------------------------

KERNEL = '''

def kernel(x_ref, o_ref, sems):
  c = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # HERE
  c.start()
  c.wait()


def run(x):
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
      in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
      out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
      scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
'''

CONDITIONAL = {
    "try": '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
try:
  from jax.experimental.pallas import tpu as pltpu
except ImportError:
  pltpu = None
''',
    "if": '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
if jax.default_backend() == "tpu":
  from jax.experimental.pallas import tpu as pltpu
else:
  pltpu = None
''',
    "try-module": '''\
import jax
import jax.numpy as jnp
try:
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import tpu as pltpu
except ImportError:
  pl = pltpu = None
''',
}


@pytest.mark.parametrize("style", sorted(CONDITIONAL))
def test_conditionally_imported_pallas_module_keeps_its_meaning(style):
    text = CONDITIONAL[style] + KERNEL
    assert _found(analyze(text, "k.py")) == []
    bad = text.replace("sems.at[0])  # HERE", "sems)  # HERE")
    assert _found(analyze(bad, "k.py")) == [("PAL103", _line(bad, "# HERE"))]
