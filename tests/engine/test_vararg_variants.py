"""A launcher whose `*args` it tests for truth, run with none of them.

`_kernel(keys, *(maybe_values if maybe_values else [None]))`: run with
unknown arguments, the test is undecided and the operand list has no length,
so the `pl.kernel` body (inputs counted by the operands) was never bound.
The call with no extra arguments is real code a user makes: it runs as one
more variant (`variants.vararg_variants`), where a call's `*args` (a tuple
the engine knows item by item) has the truth of its length."""
from __future__ import annotations

import ast

import pytest
from conftest import line_of, run

from pallas_lsp.engine import pyops, variants
from pallas_lsp.engine.model import Const, Seq
from pallas_lsp.engine.values import UNKNOWN, VARARGS

SRC = '''
def impl(keys, *maybe_values, flag: bool = False):
    @pl.kernel(out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
               scratch_types=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])
    def _kernel(keys_ref, values_ref, out_ref, *scratch):
        buf, sems = scratch
        pltpu.async_copy(keys_ref, buf, SEM).wait()  # SITE
        pltpu.sync_copy(buf, out_ref)

    return _kernel(keys, *(maybe_values if maybe_values else [None]))
'''


def test_the_kernel_binds_in_the_run_without_extra_arguments():
    analysis, text = run(SRC.replace("SEM", "sems"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(text, "# SITE"))]
    assert any(la.bound for la in analysis.launches if la.kernel == "_kernel")


def test_the_twin_is_silent():
    analysis, _ = run(SRC.replace("SEM", "sems.at[0]"))
    assert analysis.findings == []
    assert any(la.bound for la in analysis.launches if la.kernel == "_kernel")


@pytest.mark.parametrize("body, wanted", [
    ("return f(*(xs if xs else [None]))", True),
    ("if not xs:\n        return 0", True),
    ("return len(xs)", False),  # not a truth test
])
def test_which_launchers_get_the_variant(body, wanted):
    func = ast.parse(f"def f(a, *xs):\n    {body}\n").body[0]
    got = variants.vararg_variants(func)
    assert (got == [{"xs": Seq(items=(), origin=VARARGS)}]) is wanted


def test_a_calls_star_args_have_the_truth_of_their_length():
    assert pyops.truthiness(Seq(items=(), origin=VARARGS)) is False
    assert pyops.truthiness(Seq(items=(Const(value=None),), origin=VARARGS)) is True
    assert pyops.truthiness(UNKNOWN) is None


def test_a_list_appended_to_through_a_closure_keeps_both_branches():
    # `pending.append(...)` in a nested function: the engine does not follow
    # every alias, so a list's length never decides a test (the wait in the
    # flush below must be seen, or the start would look never waited).
    body = '''
def kernel(x_hbm, o_hbm, buf, sem):
    pending = []

    def flush():
        pending.pop()
        pltpu.make_async_copy(x_hbm, buf, sem).wait()

    def push():
        pltpu.make_async_copy(x_hbm, buf, sem).start()
        if pending:
            flush()
        pending.append(1)

    push()
    push()
    if pending:
        flush()
    pltpu.sync_copy(buf, o_hbm)


def copy(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA])(x)
'''
    analysis, _ = run(body)
    assert analysis.findings == []


FLAGGED = '''
def impl(keys, *maybe_values, poison: bool = False):
    @pl.kernel(out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               mesh=pltpu.create_tensorcore_mesh("core", num_cores=1),
               scratch_types=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])
    def _kernel(keys_ref, values_ref, out_ref, *scratch):
        buf, sems = scratch
        if poison:
            pltpu.async_copy(keys_ref, buf, SEM).wait()  # SITE
        pltpu.sync_copy(buf, out_ref)

    return _kernel(keys, *(maybe_values if maybe_values else [None]))
'''


def test_a_flag_tested_in_the_body_is_flipped_in_the_run_without_extra_arguments():
    # The kernel binds only in the run with no extra arguments; the path
    # under `poison` is reached when that run also flips the flag.
    analysis, text = run(FLAGGED.replace("SEM", "sems"))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(text, "# SITE"))]
    analysis, _ = run(FLAGGED.replace("SEM", "sems.at[0]"))
    assert analysis.findings == []
