"""Constructs of test suites, tutorials and applications, as classes of
Python: state kept on an instance (plain classes, `super().__init__`,
dataclasses, flax-style pytree dataclasses, NamedTuples, class attributes,
properties), `pl.kernel` with several bodies or meshes, decorator factories
that return `pl.kernel` wrappers, launchers inherited from a test base
class the engine cannot see, and scratch built by a callable parameter.

Each program is written twice: correct (no finding, every DMA site known
to coverage and reached through its launch) and with one bug on the line
marked `# BUG` (the expected code on that line)."""
from pathlib import Path

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.project import Project


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch):
    """What the interpreter follows is under test, not the syntax floor."""
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")


HEAD = '''\
import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ANY = pl.BlockSpec(memory_space=pltpu.ANY)
OUT = jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)


def launch(kernel, x):
  return pl.pallas_call(kernel, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                        scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
'''

# --- 1. state kept on an instance -------------------------------------------

PIPELINE_CLASS = HEAD + '''

class Stream:
  """Double-buffered copies; the pipeline object is built inside the kernel."""

  def __init__(self, src, dst):
    self.src = src
    self.dst = dst


class RecvStream(Stream):
  NUM_SLOTS = 2

  def __init__(self, src, dst, sems):
    super().__init__(src, dst)
    self.sem_recvs = sems

  def copy(self, slot):
    return pltpu.make_async_copy(self.src.at[slot], self.dst.at[slot],
                                 self.sem_recvs.at[slot])  # BUG PAL103

  @property
  def first_sem(self):
    return self.sem_recvs.at[0]

  def start(self, slot):
    self.copy(slot).start()

  def wait(self, slot):
    self.copy(slot).wait()


def kernel(x_ref, o_ref, sems):
  p = RecvStream(x_ref, o_ref, sems)
  for slot in range(p.NUM_SLOTS):
    p.start(slot)
  for slot in range(p.NUM_SLOTS):
    p.wait(slot)
  c = pltpu.make_async_copy(x_ref.at[0], o_ref.at[0], p.first_sem)
  c.start()
  c.wait()


def run(x):
  return launch(kernel, x)
'''

DATACLASS_STATE = HEAD + '''

@dataclasses.dataclass(frozen=True)
class Copier:
  src: jax.Array
  dst: jax.Array
  sems: jax.Array

  def descriptor(self, slot):
    return pltpu.make_async_copy(self.src.at[slot], self.dst.at[slot],
                                 self.sems.at[slot])  # BUG PAL103


def kernel(x_ref, o_ref, sems):
  c = Copier(x_ref, o_ref, sems=sems)
  c.descriptor(0).start()
  c.descriptor(0).wait()


def run(x):
  return launch(kernel, x)
'''

FLAX_STRUCT_STATE = HEAD.replace("import jax\n", "import jax\nfrom flax import struct\n") + '''

@struct.dataclass
class Buffers:
  src: jax.Array
  dst: jax.Array
  sems: jax.Array

  def start(self, slot):
    pltpu.make_async_copy(self.src.at[slot], self.dst.at[slot],
                          self.sems.at[slot]).start()  # BUG PAL103

  def wait(self, slot):
    pltpu.make_async_copy(self.src.at[slot], self.dst.at[slot], self.sems.at[slot]).wait()


def kernel(x_ref, o_ref, sems):
  b = Buffers(src=x_ref, dst=o_ref, sems=sems)
  b.start(1)
  b.wait(1)


def run(x):
  return launch(kernel, x)
'''

NAMEDTUPLE_STATE = HEAD + '''

class Slots(NamedTuple):
  buf: jax.Array
  out: jax.Array
  sem: jax.Array


def issue(s: Slots, slot):
  return pltpu.make_async_copy(s.buf.at[slot], s.out.at[slot], s.sem.at[slot])  # BUG PAL103


def kernel(x_ref, o_ref, sems):
  s = Slots(x_ref, o_ref, sems)
  cp = issue(s, 0)
  cp.start()
  cp.wait()


def run(x):
  return launch(kernel, x)
'''

# The functional NamedTuple form, and a pipeline class with an abstract base.
FUNCTIONAL_RECORDS = HEAD.replace("import dataclasses\n", "import abc\nimport collections\n"
                                  "import dataclasses\n") + '''
Pair = collections.namedtuple("Pair", "src dst")
Slot = NamedTuple("Slot", [("sem", jax.Array), ("index", int)])


class Step(abc.ABC):
  @abc.abstractmethod
  def run(self, pair, slot): ...


class CopyStep(Step, metaclass=abc.ABCMeta):
  def run(self, pair, slot):
    cp = pltpu.make_async_copy(pair.src.at[slot.index], pair.dst.at[slot.index],
                               slot.sem.at[slot.index])  # BUG PAL103
    cp.start()
    cp.wait()


def kernel(x_ref, o_ref, sems):
  CopyStep().run(Pair(x_ref, o_ref), Slot(sems, 1))


def run(x):
  return launch(kernel, x)
'''

# The kernel is a method; its state is set in a method other than __init__.
METHOD_KERNEL_STATE = HEAD + '''

class AllToAll:
  def __init__(self, steps):
    self.steps = steps

  def bind(self, x_ref, o_ref, sems):
    self.x_ref = x_ref
    self.o_ref = o_ref
    self.sems = sems

  def step(self, slot):
    return pltpu.make_async_copy(self.x_ref.at[slot], self.o_ref.at[slot],
                                 self.sems.at[slot])  # BUG PAL103

  def kernel(self, x_ref, o_ref, sems):
    self.bind(x_ref, o_ref, sems)
    for slot in range(self.steps):
      cp = self.step(slot)
      cp.start()
      cp.wait()

  def __call__(self, x):
    return launch(self.kernel, x)


def run(x):
  return AllToAll(2)(x)
'''

# An application's ring collective: the semaphores live on the pipeline object.
RING_CLASS = HEAD + '''

class RingShift:
  def __init__(self, x_hbm, o_hbm, send_sems, recv_sems, n_dev):
    self.x_hbm, self.o_hbm = x_hbm, o_hbm
    self.sem_sends = send_sems
    self.sem_recvs = recv_sems
    self.n_dev = n_dev

  def step(self, slot):
    me = jax.lax.axis_index("x")
    right = jax.lax.rem(me + 1, self.n_dev)
    return pltpu.make_async_remote_copy(
        self.x_hbm.at[slot], self.o_hbm.at[slot],
        self.sem_sends.at[slot],  # BUG PAL104
        self.sem_recvs.at[slot],  # BUG2 PAL103
        device_id=(right,))


def kernel(x_hbm, o_hbm, send_sems, recv_sems):
  ring = RingShift(x_hbm, o_hbm, send_sems, recv_sems, 2)
  for slot in range(2):
    cp = ring.step(slot)
    cp.start()
    cp.wait()


def run(x):
  return pl.pallas_call(kernel, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                        scratch_shapes=[pltpu.SemaphoreType.DMA((2,)),
                                        pltpu.SemaphoreType.DMA((2,))])(x)
'''

# --- 2. pl.kernel with several bodies or meshes -----------------------------

KERNEL_BODIES = HEAD + '''
OUT1 = jax.ShapeDtypeStruct((8, 128), jnp.float32)


def copy_whole(x_ref, o_ref, sems):
  cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # BUG PAL103
  cp.start()
  cp.wait()


def copy_halves(x_ref, o_ref, sems):
  for i in range(2):
    cp = pltpu.make_async_copy(x_ref.at[pl.ds(i * 4, 4)], o_ref.at[pl.ds(i * 4, 4)], sems.at[i])
    cp.start()
    cp.wait()


def run(x, whole):
  body = copy_whole if whole else copy_halves
  mesh = pltpu.create_tensorcore_mesh("core")
  return pl.kernel(body, out_shape=OUT1, mesh=mesh,
                   scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)


def run_one_core(x):
  mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
  return pl.kernel(copy_halves, out_shape=OUT1, mesh=mesh,
                   scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)


def run_positional_out_type(x):
  mesh = pltpu.create_tensorcore_mesh("core")
  return pl.kernel(copy_halves, OUT1, mesh=mesh,
                   scratch_types=[pltpu.SemaphoreType.DMA((2,))])(x)


def run_core_map(x_hbm, o_hbm, whole):
  def by_rows(sems):
    cp = pltpu.make_async_copy(x_hbm.at[0], o_hbm.at[0], sems.at[1])  # BUG2 PAL103
    cp.start()
    cp.wait()

  def at_once(sems):
    cp = pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0])
    cp.start()
    cp.wait()

  pl.core_map(pltpu.create_tensorcore_mesh("core"),
              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(at_once if whole else by_rows)


def run_state_core_map(x, whole):
  def stateful(refs):
    x_hbm, o_hbm = refs
    run_core_map(x_hbm, o_hbm, whole)
  return pl.run_state(stateful)((x, jnp.zeros_like(x)))


@functools.partial(pl.kernel, out_shape=OUT1, mesh=pltpu.create_tensorcore_mesh("core"),
                   scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
def partial_kernel(x_ref, o_ref, sems):
  cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[1])
  cp.start()
  cp.wait()
'''

# --- 3. decorator factories that return pl.kernel wrappers ------------------

KERNEL_FACTORIES = HEAD + '''
OUT1 = jax.ShapeDtypeStruct((8, 128), jnp.float32)
SEMS = [pltpu.SemaphoreType.DMA((2,))]


def my_kernel(**kw):
  return functools.partial(pl.kernel, mesh=pltpu.create_tensorcore_mesh("core"), **kw)


def named_kernel(**kw):
  """Wraps the body to name it in profiles: the launcher gets the wrapper."""
  def deco(body):
    def wrapped(*refs):
      with jax.named_scope(body.__name__):
        body(*refs)
    return pl.kernel(wrapped, mesh=pltpu.create_tensorcore_mesh("core"), **kw)
  return deco


class Suite:
  def kernel(self, **kw):
    return lambda body: pl.kernel(body, mesh=pltpu.create_tensorcore_mesh("core"), **kw)

  def test_method_factory(self):
    @self.kernel(out_shape=OUT1, scratch_shapes=SEMS)
    def k(x_ref, o_ref, sems):
      cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # BUG PAL103
      cp.start()
      cp.wait()
    return k(jnp.ones((8, 128), jnp.float32))


@my_kernel(out_shape=OUT1, scratch_shapes=SEMS)
def k1(x_ref, o_ref, sems):
  cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])
  cp.start()
  cp.wait()


@named_kernel(out_shape=OUT1, scratch_shapes=SEMS)
def k2(x_ref, o_ref, sems):
  cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[1])  # BUG2 PAL103
  cp.start()
  cp.wait()


def run(x):
  return k1(x), k2(x)
'''

# --- 4. a test base class the engine cannot see ------------------------------

UNSEEN_BASE = '''\
import functools

from absl.testing import absltest
import jax
from jax._src.pallas import pallas_test_util as ptu
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp

ANY = pl.BlockSpec(memory_space=pltpu.ANY)
OUT = jax.ShapeDtypeStruct((8, 128), jnp.float32)


class DmaTest(ptu.PallasTPUTest):

  def test_call(self):
    def body(x_ref, o_ref, sems):
      cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # BUG PAL103
      cp.start()
      cp.wait()

    x = jnp.ones((8, 128), jnp.float32)
    y = self.pallas_call(body, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                         scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    self.assertEqual(y.shape, x.shape)

  def test_partial(self):
    @functools.partial(self.pallas_call, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                       scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
    def kernel(x_ref, o_ref, sems):
      cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[1])  # BUG2 PAL103
      cp.start()
      cp.wait()

    self.assertEqual(kernel(jnp.ones((8, 128), jnp.float32)).shape, (8, 128))

  def test_kernel_decorator(self):
    @self.kernel(out_shape=OUT, mesh=pltpu.create_tensorcore_mesh("core"),
                 scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
    def kernel(x_ref, o_ref, sems):
      cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # BUG3 PAL103
      cp.start()
      cp.wait()

    self.assertEqual(kernel(jnp.ones((8, 128), jnp.float32)).shape, (8, 128))


if __name__ == "__main__":
  absltest.main()
'''

# --- 5. scratch built by a callable passed as a parameter --------------------

SCRATCH_CALLABLE = HEAD + '''

def launch_with(kernel, make_scratch, x):
  return pl.pallas_call(kernel, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                        scratch_shapes=make_scratch(2))(x)


def kernel(x_ref, o_ref, sems):
  cp = pltpu.make_async_copy(x_ref.at[0], o_ref.at[0], sems.at[0])  # BUG PAL103
  cp.start()
  cp.wait()


def run(x):
  return launch_with(kernel, lambda n: [pltpu.SemaphoreType.DMA((n,))], x)
'''

PROGRAMS = {
    "pipeline_class": PIPELINE_CLASS,
    "dataclass_state": DATACLASS_STATE,
    "flax_struct_state": FLAX_STRUCT_STATE,
    "namedtuple_state": NAMEDTUPLE_STATE,
    "functional_records": FUNCTIONAL_RECORDS,
    "method_kernel_state": METHOD_KERNEL_STATE,
    "ring_class": RING_CLASS,
    "kernel_bodies": KERNEL_BODIES,
    "kernel_factories": KERNEL_FACTORIES,
    "unseen_base": UNSEEN_BASE,
    "scratch_callable": SCRATCH_CALLABLE,
}


def _marked(text: str) -> list[tuple[int, str, str]]:
    """(line, marker, code) for each `# BUG... PALnnn` in the text (0-based lines)."""
    out = []
    for i, line in enumerate(text.split("\n")):
        if "# BUG" in line:
            marker, code = line.split("# ")[-1].split()
            out.append((i, marker, code))
    return out


def _buggy(text: str, marker: str) -> str:
    """The bug each marker stands for: the semaphore array where one is meant
    (PAL104 for a remote copy's send semaphore, else PAL103)."""
    lines = text.split("\n")
    i = next(i for i, line in enumerate(lines)
             if line.rstrip().endswith((f"# {marker} PAL103", f"# {marker} PAL104")))
    for whole in ("self.sem_recvs.at[slot]", "self.sem_sends.at[slot]", "self.sems.at[slot]",
                  "s.sem.at[slot]",
                  "slot.sem.at[slot.index]",
                  "sems.at[0]", "sems.at[1]"):
        if whole in lines[i]:
            lines[i] = lines[i].replace(whole, whole.split(".at[")[0])
            break
    else:
        raise AssertionError(lines[i])
    return "\n".join(lines)


def _analyse(text: str, path: str = "k.py"):
    return analyze(text, path, coverage=True)


def _codes(a) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.line) for f in a.findings)


@pytest.mark.parametrize("name", PROGRAMS)
def test_correct_program_has_no_finding_and_known_launched_sites(name):
    a = _analyse(PROGRAMS[name])
    assert _codes(a) == []
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known and s.launched for s in dma), \
        [(s.line + 1, s.unknown, s.reason, s.launched) for s in dma]
    # (a shared launcher run on its own has an unbound launch at the same line)
    lines = {launch.line for launch in a.coverage.launches if launch.kernel}
    assert all(any(launch.bound for launch in a.coverage.launches if launch.line == line)
               for line in lines), a.coverage.launches


@pytest.mark.parametrize("name,marker", [(n, m) for n, t in PROGRAMS.items()
                                         for _, m, _ in _marked(t)])
def test_whole_semaphore_array_is_reported_on_its_line(name, marker):
    text = _buggy(PROGRAMS[name], marker)
    line, _, code = next(m for m in _marked(text) if m[1] == marker)
    found = _codes(_analyse(text))
    assert (code, line) in found, found
    assert {c for c, _ in found} <= {code, "PAL302"}  # no other rule misled by it


def test_dma_source_read_into_an_array_through_instance_state():
    """PAL101: the pipeline object holds a Ref; `self.src[...]` is a load."""
    text = PIPELINE_CLASS.replace("pltpu.make_async_copy(self.src.at[slot]",
                                  "pltpu.make_async_copy(self.src[slot]")
    line = next(i for i, s in enumerate(text.split("\n")) if "self.src[slot]" in s)
    assert ("PAL101", line) in _codes(_analyse(text))


@pytest.mark.parametrize("wait,code", [
    ("pltpu.make_async_copy(self.src.at[slot], self.dst.at[slot], self.sem_recvs{}).wait()",
     "PAL110"),
    ("pltpu.semaphore_wait(self.sem_recvs{})", "PAL201"),
])
def test_wait_on_a_loaded_semaphore_value_through_instance_state(wait, code):
    """A wait given a value read from the semaphore Ref kept on `self`."""
    def program(sem: str) -> str:
        text = PIPELINE_CLASS.replace(
            "  def wait(self, slot):\n    self.copy(slot).wait()",
            "  def wait(self, slot):\n    " + wait.format(sem) + "  # VALUE")
        return text
    text = program("[slot]")
    line = next(i for i, s in enumerate(text.split("\n")) if "# VALUE" in s)
    assert (code, line) in _codes(_analyse(text))
    # (`semaphore_wait` on a DMA semaphore has a rule of its own, PAL203)
    assert (code, line) not in _codes(_analyse(program(".at[slot]")))


@pytest.mark.parametrize("sem_shape,expect", [("(SLOTS,)", ["PAL103"]), ("()", [])])
def test_class_attribute_gives_the_scratch_its_shape(sem_shape, expect):
    """`self.SEM_SHAPE` is the class's (computed from an earlier class attribute)."""
    text = HEAD + f'''

class Ring:
  SLOTS = 4
  BUF = (SLOTS, 8, 128)
  SEM_SHAPE = {sem_shape}

  def scratch(self):
    return [pltpu.VMEM(self.BUF, jnp.float32), pltpu.SemaphoreType.DMA(self.SEM_SHAPE)]

  def kernel(self, x_ref, o_ref, buf, sem):
    cp = pltpu.make_async_copy(x_ref.at[0], buf.at[0], sem)  # HERE
    cp.start()
    cp.wait()

  def __call__(self, x):
    return pl.pallas_call(self.kernel, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                          scratch_shapes=self.scratch())(x)


def run(x):
  return Ring()(x)
'''
    line = next(i for i, s in enumerate(text.split("\n")) if "# HERE" in s)
    a = _analyse(text)
    assert [c for c, ln in _codes(a) if ln == line] == expect
    site = next(s for s in a.coverage.sites if s.kind == "dma")
    assert site.known and site.launched


def test_unseen_base_binds_only_kernel_like_functions():
    """A method `pallas_call` of an unseen base given a function that names
    no Pallas API and writes no parameter is not taken for a launch."""
    text = UNSEEN_BASE + '''

class Other(ptu.PallasTPUTest):
  def test_not_a_kernel(self):
    def host_side(x, y):
      return x + y
    self.pallas_call(host_side, out_shape=OUT)(1, 2)
'''
    a = _analyse(text)
    assert _codes(a) == []
    kernels = {launch.kernel for launch in a.coverage.launches}
    assert "host_side" not in kernels
    assert {"body", "kernel"} <= kernels


def test_unseen_base_kernel_that_only_writes_its_output_is_bound():
    text = UNSEEN_BASE + '''

class Plain(ptu.PallasTPUTest):
  def test_add(self):
    def add(x_ref, o_ref):
      o_ref[...] = x_ref[...] + 1
    self.pallas_call(add, out_shape=OUT)(jnp.ones((8, 128), jnp.float32))
'''
    a = _analyse(text)
    assert any(launch.kernel == "add" and launch.bound for launch in a.coverage.launches)


def test_a_method_of_the_file_is_not_replaced_by_the_inherited_launcher():
    """The class defines `pallas_call` itself (with another meaning): its own method runs."""
    text = UNSEEN_BASE.replace(
        "class DmaTest(ptu.PallasTPUTest):\n",
        "class DmaTest(ptu.PallasTPUTest):\n\n"
        "  def pallas_call(self, kernel, **kw):\n"
        "    return lambda *args: None\n")
    a = _analyse(_buggy(text, "BUG"))
    assert not any(launch.kernel == "body" and launch.bound for launch in a.coverage.launches)


def test_base_class_in_another_file_of_the_project(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "base_util.py").write_text('''\
from jax.experimental import pallas as pl


class LocalBase:
  INTERPRET = True

  def pallas_call(self, *args, **kwargs):
    return pl.pallas_call(*args, interpret=self.INTERPRET, **kwargs)
''')
    test = UNSEEN_BASE.replace("from jax._src.pallas import pallas_test_util as ptu\n",
                               "from tests import base_util\n") \
        .replace("ptu.PallasTPUTest", "base_util.LocalBase")
    test = "\n".join(line for line in test.split("\n"))  # the same program
    path = tmp_path / "tests" / "dma_test.py"
    for text, expect in ((test, []), (_buggy(test, "BUG"), ["PAL103"])):
        path.write_text(text)
        a = analyze(text, str(path), project=Project([str(tmp_path)]), coverage=True)
        assert [f.code for f in a.findings if f.span.line == _marked(test)[0][0]] == expect


def test_code_a_test_expects_to_raise_is_not_judged():
    """`with self.assertRaises(...)`: the launch inside is there to fail."""
    text = _buggy(UNSEEN_BASE, "BUG").replace(
        "    y = self.pallas_call(", "    with self.assertRaisesRegex(ValueError, 'semaphore'):\n"
        "      y = self.pallas_call(").replace(
        "    self.assertEqual(y.shape, x.shape)\n", "")
    lines = text.split("\n")
    i = next(i for i, line in enumerate(lines) if "      y = self.pallas_call(" in line)
    lines[i + 1] = "  " + lines[i + 1]  # the call's continuation line
    text = "\n".join(lines)
    line = _marked(UNSEEN_BASE)[0][0]
    assert not [c for c, ln in _codes(_analyse(text)) if ln == line]
    # Outside the block, the same bug is reported.
    assert ("PAL103", line) in _codes(_analyse(_buggy(UNSEEN_BASE, "BUG")))


def test_class_attribute_set_after_the_class_is_unknown():
    """`Ring.SEM_SHAPE = ...` elsewhere: the class body's value is no longer certain."""
    text = HEAD + '''

class Ring:
  SEM_SHAPE = (2,)

  def kernel(self, x_ref, o_ref, sem):
    cp = pltpu.make_async_copy(x_ref, o_ref, sem)  # HERE
    cp.start()
    cp.wait()

  def __call__(self, x):
    return pl.pallas_call(self.kernel, out_shape=OUT, in_specs=[ANY], out_specs=ANY,
                          scratch_shapes=[pltpu.SemaphoreType.DMA(self.SEM_SHAPE)])(x)


def run(x):
  return Ring()(x)


def configure():  # after the launcher: the order of defs decides nothing
  Ring.SEM_SHAPE = ()
'''
    assert _codes(_analyse(text)) == []


def test_unseen_base_launcher_overridden_and_reached_through_a_helper_method():
    """The suite's own `pallas_call` adds a flag and calls the base's through
    `super()`; tests launch through a helper method of the class."""
    text = UNSEEN_BASE.replace(
        "class DmaTest(ptu.PallasTPUTest):\n",
        "class DmaTest(ptu.PallasTPUTest):\n\n"
        "  def pallas_call(self, *args, **kwargs):\n"
        "    return super().pallas_call(*args, interpret=True, **kwargs)\n\n"
        "  def copy_with(self, body, x):\n"
        "    return self.pallas_call(body, out_shape=OUT, in_specs=[ANY], out_specs=ANY,\n"
        "                            scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)\n\n"
        "  def test_helper(self):\n"
        "    def body(x_ref, o_ref, sems):\n"
        "      cp = pltpu.make_async_copy(x_ref, o_ref, sems.at[0])  # BUG4 PAL103\n"
        "      cp.start()\n"
        "      cp.wait()\n"
        "    self.copy_with(body, jnp.ones((8, 128), jnp.float32))\n")
    a = _analyse(text)
    assert _codes(a) == []
    assert all(s.known and s.launched for s in a.coverage.sites if s.kind == "dma")
    for _, marker, code in _marked(text):
        buggy = _buggy(text, marker)
        line = next(m[0] for m in _marked(buggy) if m[1] == marker)
        assert (code, line) in _codes(_analyse(buggy)), marker
