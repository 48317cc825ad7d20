"""A scratch list grown in a loop of unknown length, then given its last
entries (`for rows in tilings: scratch += [...]`, then the guard and the
semaphores appended): the kernel's `*refs` ends as the list does, and
`guard, sems = refs[n * per:]` names those last entries.

Before, the loop made the list unknown, so the semaphore array at its end
was unknown in the kernel and a bare one went unreported."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax

from pallas_lsp.engine import pyops
from pallas_lsp.engine.model import Const, Seq
from pallas_lsp.engine.values import UNKNOWN, Partial, SeqOf, join

KERNEL = '''
def kern(x_hbm, o_hbm, *refs, tilings):
    guard, done = refs[2 * len(tilings):]
    guard[0] = 1
    copy = pltpu.make_async_copy(x_hbm, o_hbm, SEM)  # SITE
    copy.start()
    copy.wait()
'''

LAUNCHER = '''
def launch(x, tilings):
    scratch = FIRST
    for rows in tilings:
        scratch += [pltpu.VMEM((rows, 128), jnp.float32), pltpu.VMEM((rows, 128), jnp.float32)]
    scratch.append(pltpu.SMEM((1,), jnp.int32))
    scratch.append(pltpu.SemaphoreType.DMA((2,)))
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        functools.partial(kern, tilings=tilings),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[any_spec], out_specs=any_spec, scratch_shapes=scratch,
        interpret=pltpu.InterpretParams())(x)
'''

# With a leading buffer, the kernel skips it first.
FIRST = {"[]": "", "[pltpu.VMEM((8, 128), jnp.float32)]": "    lead = refs[0]\n"}


def _src(sem: str, first: str) -> str:
    kernel = KERNEL.replace("SEM", sem)
    if FIRST[first]:
        kernel = kernel.replace("    guard, done = refs[2 * len(tilings):]",
                                "    guard, done = refs[1 + 2 * len(tilings):]")
    return kernel + LAUNCHER.replace("FIRST", first)


@pytest.mark.parametrize("first", list(FIRST))
def test_a_bare_semaphore_array_from_the_end_of_the_list_is_reported(first):
    analysis, text = run(_src("done", first))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(text, "# SITE"))]


@pytest.mark.parametrize("first", list(FIRST))
def test_the_twin_is_silent_and_its_site_known(first, tmp_path):
    from pallas_lsp.check import coverage_report
    analysis, text = run(_src("done.at[0]", first))
    assert analysis.findings == []
    path = tmp_path / "grown.py"
    path.write_text(text, encoding="utf-8")
    report, _ = coverage_report.run([path], use_config=False)
    assert "DMA 1/1" in report, report


def _jax(sem: str, first: str):
    return run_jax(HEADER + textwrap.dedent(_src(sem, first)) +
                   "\nprint(float(launch(jnp.ones((8, 128), jnp.float32), (8, 16)).sum()))\n")


def test_jax_refuses_the_bare_array():
    jax_refuses(_jax("done", "[]"), "Cannot signal on a non-()-shaped semaphore: (2,)")


def test_jax_runs_the_twin():
    jax_prints(_jax("done.at[0]", "[]"), "1024.0")


def test_the_list_before_a_loop_and_after_it_join_to_items_of_that_kind():
    a = Const(value="a")
    grown = pyops.concat_partial(SeqOf(elem=a), Seq(items=(a, a)))
    assert isinstance(grown, Partial) and grown.tail == (a, a)
    assert join(Seq(items=()), grown) == SeqOf(elem=a)
    # A Partial that knows nothing of its items still joins to nothing.
    assert join(Seq(items=()), Partial(tail=(a,), elem=UNKNOWN)) is UNKNOWN


def test_appending_to_items_of_one_kind_gives_known_last_items():
    analysis, text = run('''
def launch(x, tilings):
    scratch = []
    for rows in tilings:
        scratch.append(pltpu.VMEM((rows, 128), jnp.float32))
    scratch.append(pltpu.SemaphoreType.DMA((2,)))

    def kern(x_hbm, o_hbm, *refs):
        pltpu.make_async_copy(x_hbm, o_hbm, refs[-1]).start()  # SITE

    return pl.pallas_call(kern, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=scratch)(x)
''')
    assert [(f.code, f.span.line) for f in analysis.findings if f.code == "PAL103"] == \
        [("PAL103", line_of(text, "# SITE"))]


# Each tiling's buffers picked out of `*refs` at offsets the engine cannot
# compute: every item is one of the list's, so a Ref (of a space the engine
# cannot tell); the semaphores come from its known end.
PICKED = '''
def kern(x_hbm, o_hbm, *refs, tilings):
    per = 2
    tiling_scratch = [tuple(refs[first:first + per])
                      for first in range(0, per * len(tilings), per)]
    guard, done = refs[per * len(tilings):]
    for t in range(len(tilings)):
        a, b = tiling_scratch[t]
        pltpu.make_async_copy(x_hbm, a, SEM).start()  # SITE
        pltpu.make_async_copy(x_hbm, a, done.at[t]).wait()
        b[...] = a[...]
        pltpu.sync_copy(b, o_hbm)
'''


def _picked(sem: str) -> str:
    return PICKED.replace("SEM", sem) + LAUNCHER.replace("FIRST", "[]").replace(
        "DMA((2,))", "DMA((len(tilings),))").replace("(rows, 128)", "(8, 128)")


def test_buffers_picked_at_computed_offsets_are_refs_and_the_bug_is_found(tmp_path):
    from pallas_lsp.check import coverage_report
    analysis, text = run(_picked("done"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(text, "# SITE"))]
    analysis, text = run(_picked("done.at[t]"))
    assert analysis.findings == []
    path = tmp_path / "picked.py"
    path.write_text(text, encoding="utf-8")
    report, _ = coverage_report.run([path], use_config=False)
    assert "DMA 3/3" in report, report


def test_jax_on_the_picked_buffers():
    program = HEADER + textwrap.dedent(_picked("SEMX")) + \
        "\nprint(float(launch(jnp.ones((8, 128), jnp.float32), (8, 8)).sum()))\n"
    jax_refuses(run_jax(program.replace("SEMX", "done")),
                "Cannot signal on a non-()-shaped semaphore: (2,)")
    jax_prints(run_jax(program.replace("SEMX", "done.at[t]")), "1024.0")


def test_a_star_parameter_with_an_unknown_middle_claims_nothing_of_its_items(tmp_path):
    # `*refs` bound around scratch the engine cannot count: an item taken at
    # an index it cannot compute may be any of them, so it stays unknown,
    # where joining only the known ends would call it an ANY-space Ref.
    from pallas_lsp.check import coverage_report
    analysis, text = run('''
def kern(*refs):
    x_hbm, o_hbm = refs[0], refs[1]
    i = len(refs) - 1
    sem = refs[i]
    pltpu.make_async_copy(x_hbm, o_hbm, sem).start()
    pltpu.make_async_copy(x_hbm, o_hbm, sem).wait()


def launch(x, scratch):
    return pl.pallas_call(kern, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=scratch)(x)
''')
    assert analysis.findings == []
    path = tmp_path / "middle.py"
    path.write_text(text, encoding="utf-8")
    report, _ = coverage_report.run([path], use_config=False)
    assert "DMA 0/2" in report and "could not tell what `sem` is" in report, report
