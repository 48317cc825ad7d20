"""Values of test suites and documentation the engine used to lose, as
classes of Python: a choice between allocation constructors
(`(pltpu.SMEM if c else pltpu.VMEM)(shape, dtype)`), Refs made from an
allocation (`pl.get_global`, `pl.empty_ref_like`), `jax.jit` of a
`run_state` function, a `pl.kernel` called with a tuple operand, a
`pl.kernel` with no outputs, a `core_map(mesh)` decorator factory applied
twice, MyST `{code-cell}` blocks without a language; and `coverage` saying
where an Unknown argument came from, and listing two kernels of one name
launched from one line as two.

Each program is correct (no finding, every DMA site known) and has a twin
with one Ref read into an array on the line marked `# BUG` (PAL101 there,
which the engine can only say when it knows the Ref)."""
import textwrap

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.cells import MARKDOWN, to_program


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch):
    """What the interpreter knows is under test, not the syntax floor."""
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")


HEAD = '''\
import jax
import jax.numpy as jnp
from jax._src.state import discharge as state_discharge
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import tpu_sc as plsc

MESH = pltpu.create_tensorcore_mesh("core")
'''

CHOSEN_SPACE = HEAD + '''

def run(x, small):
  x_ref = jax.new_ref(x)
  o_ref = jax.empty_ref(jax.typeof(x))
  mem = pltpu.SMEM if small else pltpu.VMEM

  @pl.kernel(mesh=MESH, scratch_types=(mem(x.shape, x.dtype),))
  def copy_through(scratch_ref):
    pltpu.sync_copy(x_ref, scratch_ref.at[...])  # BUG
    pltpu.sync_copy(scratch_ref, o_ref)
  copy_through()
  return jax.freeze(o_ref)
'''

ALLOCATED_REFS = HEAD + '''

def run(x):
  mesh = plsc.VectorSubcoreMesh(core_axis_name="c", subcore_axis_name="s", num_cores=1)

  @pl.kernel(out_shape=x, mesh=mesh)
  def kernel(x_ref, o_ref):
    shared = pl.get_global(pltpu.VMEM_SHARED(x.shape[1:], x.dtype))
    pltpu.sync_copy(x_ref.at[0], shared.at[...])  # BUG
    pltpu.sync_copy(shared, o_ref.at[0])
  return kernel(x)


def two_kernels(x, sem):
  mesh = plsc.ScalarSubcoreMesh(axis_name="core", num_cores=1)
  sem_ref = jax.new_ref(sem, memory_space=pltpu.SEMAPHORE)
  y_ref = pl.empty_ref_like(pltpu.HBM(x.shape, x.dtype))
  x_ref = jax.new_ref(x)
  on_cores = pl.core_map(mesh=mesh)

  @on_cores
  def _():
    pltpu.make_async_copy(x_ref, y_ref.at[...], sem_ref).start()  # BUG

  @on_cores
  def _():
    pltpu.make_async_copy(x_ref, y_ref, sem_ref).wait()
  return y_ref[...]
'''

JIT_RUN_STATE = HEAD + '''

def run(x):
  mesh = plsc.VectorSubcoreMesh(core_axis_name="c", subcore_axis_name="s", num_cores=1)

  def stateful(refs):
    def body(x_ref, o_ref):
      def with_scratch(scratch_ref):
        pltpu.sync_copy(x_ref.at[...], scratch_ref)  # BUG
        pltpu.sync_copy(scratch_ref, o_ref)
      pl.run_scoped(with_scratch, pltpu.VMEM(x.shape, x.dtype))
    pl.core_map(mesh)(lambda: body(*refs))

  _, out = jax.jit(state_discharge.run_state(stateful))((x, jnp.empty_like(x)))
  return out
'''

TUPLE_OPERAND = HEAD + '''

def kernel(in_refs, out_ref, i_smem):
  (x_hbm, i_hbm), o_hbm = in_refs, out_ref
  pltpu.sync_copy(i_hbm.at[...], i_smem)  # BUG
  pltpu.sync_copy(x_hbm, o_hbm)


def run(x, index):
  return pl.kernel(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=MESH,
                   scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])((x, index))


def no_outputs(x):
  x_ref = jax.new_ref(x)
  o_ref = jax.empty_ref(jax.typeof(x))

  @pl.kernel(mesh=MESH)
  def copy():
    pltpu.sync_copy(x_ref, o_ref)
  copy()
  return jax.freeze(o_ref)
'''

PROGRAMS = {
    "chosen_space": CHOSEN_SPACE,
    "allocated_refs": ALLOCATED_REFS,
    "jit_run_state": JIT_RUN_STATE,
    "tuple_operand": TUPLE_OPERAND,
}


def _correct(text: str) -> str:
    """The program without its bugs: `.at[...]` on a `# BUG` line is the whole Ref."""
    return "\n".join(line.replace(".at[...]", "") if "# BUG" in line else line
                     for line in text.split("\n"))


def _bug_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if "# BUG" in line]


def _buggy(text: str, line: int) -> str:
    """That one line's Ref read into an array (`r.at[...]` -> `r[...]`)."""
    lines = _correct(text).split("\n")
    original = text.split("\n")[line]
    lines[line] = original.replace(".at[...]", "[...]")
    return "\n".join(lines)


@pytest.mark.parametrize("name", PROGRAMS)
def test_correct_program_is_clean_and_its_sites_known(name):
    a = analyze(_correct(PROGRAMS[name]), "k.py", coverage=True)
    assert [f.code for f in a.findings] == []
    dma = [s for s in a.coverage.sites if s.kind == "dma"]
    assert dma and all(s.known for s in dma), [(s.line + 1, s.reason) for s in dma]
    assert all(launch.bound for launch in a.coverage.launches), a.coverage.launches


@pytest.mark.parametrize("name,line", [(n, i) for n, t in PROGRAMS.items()
                                       for i in _bug_lines(t)])
def test_ref_read_into_an_array_is_reported(name, line):
    found = {(f.code, f.span.line) for f in analyze(_buggy(PROGRAMS[name], line), "k.py").findings}
    assert ("PAL101", line) in found, found


def test_an_unknown_argument_says_where_it_came_from():
    text = HEAD + '''

def run(x, make):
  def kernel(x_ref, o_ref, buf):
    pltpu.sync_copy(x_ref, buf)
    other = make(x_ref)
    pltpu.sync_copy(other, o_ref)
  return pl.kernel(kernel, out_shape=x, mesh=MESH, scratch_shapes=[make()])(x)
'''
    lines = text.split("\n")
    at = {s.line: s for s in analyze(text, "k.py", coverage=True).coverage.sites}
    first = at[lines.index("    pltpu.sync_copy(x_ref, buf)")]
    second = at[lines.index("    pltpu.sync_copy(other, o_ref)")]
    made = lines.index("    other = make(x_ref)") + 1
    assert "`dst` comes from parameter `buf` of kernel `kernel`" in first.reason, first.reason
    assert f"`src` is `other`, the result of `make(...)` (line {made})" in second.reason, \
        second.reason


def test_an_unknown_loop_variable_and_attribute_are_named():
    text = HEAD + '''

def run(x, pairs, holder):
  def kernel(x_ref, o_ref, sem):
    for src, dst in pairs:
      pltpu.make_async_copy(src, dst, sem).start()
    pltpu.make_async_copy(x_ref, o_ref, holder.sems.at[0]).start()
  return pl.pallas_call(kernel, out_shape=x, in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
                        out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
                        scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)
'''
    lines = text.split("\n")
    at = {s.line: s for s in analyze(text, "k.py", coverage=True).coverage.sites}
    loop = at[lines.index("      pltpu.make_async_copy(src, dst, sem).start()")]
    held = at[lines.index("    pltpu.make_async_copy(x_ref, o_ref, holder.sems.at[0]).start()")]
    line = lines.index("    for src, dst in pairs:") + 1
    assert f"`src` is `src`, a loop variable (line {line})" in loop.reason, loop.reason
    assert "`sem` (`holder.sems.at[0]`) is `holder`, bound outside `kernel`" in held.reason, \
        held.reason


def test_two_kernels_of_one_name_launched_from_one_line_are_two_launches():
    text = HEAD + '''

def run(x, fast):
  if fast:
    def kernel(x_ref, o_ref):
      pltpu.sync_copy(x_ref, o_ref)
  else:
    def kernel(x_ref, o_ref):
      pltpu.sync_copy(x_ref.at[0], o_ref.at[0])
  return pl.pallas_call(kernel, out_shape=x, in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
                        out_specs=pl.BlockSpec(memory_space=pltpu.ANY))(x)
'''
    launches = analyze(text, "k.py", coverage=True).coverage.launches
    assert [(la.kernel, la.bound) for la in launches] == [("kernel", True), ("kernel", True)]


def test_myst_code_cell_without_a_language_runs_in_the_page_kernel():
    cell = ("```{code-cell}\n:id: abc\n\n" + HEAD + "\n"
            "def kernel(x_ref, o_ref):\n"
            "  pltpu.sync_copy(x_ref[...], o_ref)\n```\n")

    def page(language: str) -> str:
        return textwrap.dedent(f"""\
            ---
            jupytext:
              formats: ipynb,md:myst
            kernelspec:
              display_name: Kernel
              language: {language}
              name: k
            ---

            # Title

            """) + cell

    program = to_program(page("python"), MARKDOWN)
    assert "pltpu.sync_copy(x_ref[...], o_ref)" in program.text
    assert to_program(page("julia"), MARKDOWN).text.strip() == ""

