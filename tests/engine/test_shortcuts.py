"""The analysis skips work that cannot change what it reports (a loop pass on
values it has already seen, a kernel bound again with equal values, a
function that names nothing Pallas). Each test is a case where a careless
shortcut would be wrong, or checks that the work is in fact skipped."""
import textwrap

from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.source import parse
from pallas_lsp.engine.values import instance_writes
from tests.engine.conftest import HEADER, codes

ANY = "pl.BlockSpec(memory_space=pltpu.ANY)"
OUT = "jax.ShapeDtypeStruct((8, 128), jnp.float32)"
SCRATCH = "[pltpu.VMEM((4, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((4,))]"


def _interp(body: str) -> tuple[Interpreter, object]:
    src = parse(HEADER + textwrap.dedent(body))
    interp = Interpreter(src, "snippet.py")
    interp.run()
    return interp, src.tree


def _def(tree, name: str):
    import ast
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_a_loop_still_sees_the_descriptor_carried_from_the_previous_iteration():
    # `prev` is None on the first pass: only the second pass waits on it.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems):
        prev = None
        for i in range(4):
            if prev is not None:
                prev.wait_send()
            prev = pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sems.at[i])
            prev.start()
        prev.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)
    '''
    assert "PAL106" in codes(body)
    assert "PAL106" not in codes(body.replace("prev.wait_send()", "prev.wait()"))


def test_a_name_rebound_in_only_one_branch_of_the_body_is_carried():
    # `cp` is assigned under an `if`: a later read may see the previous
    # iteration's descriptor, so the loop needs its second pass.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems):
        cp = None
        for i in range(4):
            if cp is not None:
                cp.wait_send()
            if i % 2 == 0:
                cp = pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sems.at[i])
                cp.start()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)
    '''
    assert "PAL106" in codes(body)


def test_a_loop_that_changes_nothing_it_reads_runs_once():
    interp, tree = _interp(f'''
    def kernel(x_hbm, o_ref, buf, sems):
        for i in range(4):
            c = pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sems.at[i])
            c.start()
            c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)
    ''')
    assert len(interp.events.dmas) == 1


def test_a_flag_that_changes_only_the_wrapper_does_not_rerun_the_kernel():
    interp, _ = _interp(f'''
    def kernel(x_hbm, o_ref, buf, sems):
        c = pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sems.at[0])
        c.start()
        c.wait()

    def launch(x, debug: bool = False):
        name = "dbg" if debug else "k"
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH}, name=name)(x)
    ''')
    assert len(interp.events.dmas) == 1
    assert len(interp.events.launches) >= 2  # each variant's launch is still recorded


def test_a_bug_under_one_of_three_flags_is_found():
    # Three flags run as the defaults plus each flag flipped alone.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems, *, a, b, c):
        sem = sems if c else sems.at[0]
        cp = pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sem)
        cp.start()
        cp.wait()

    def launch(x, a: bool = False, b: bool = False, c: bool = False):
        k = functools.partial(kernel, a=a, b=b, c=c)
        return pl.pallas_call(k, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)
    '''
    assert "PAL103" in codes(body)
    assert "PAL103" not in codes(body.replace("sems if c else sems.at[0]", "sems.at[0]"))


def test_a_caller_that_names_only_user_functions_is_still_run():
    # `entry` mentions nothing Pallas, but it calls the launcher with the
    # value that makes the bug: it must be run.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems, *, whole):
        sem = sems if whole else sems.at[0]
        cp = pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sem)
        cp.start()
        cp.wait()

    def launch(x, whole):
        k = functools.partial(kernel, whole=whole)
        return pl.pallas_call(k, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)

    step = functools.partial(launch, whole=True)

    def entry(x):
        return step(x)
    '''
    assert "PAL103" in codes(body)


def test_a_function_that_names_nothing_pallas_is_not_run_on_its_own():
    interp, tree = _interp(f'''
    import numpy as np

    def reference(q, k):
        s = np.einsum("qd,kd->qk", q, k)
        return s / s.sum(axis=-1, keepdims=True)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT})(x)
    ''')
    assert id(_def(tree, "reference")) not in interp._entered
    assert id(_def(tree, "launch")) in interp._entered


def test_a_caller_that_picks_the_launcher_from_a_registry_is_still_run():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems, *, whole):
        sem = sems if whole else sems.at[0]
        cp = pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sem)
        cp.start()
        cp.wait()

    def launch(x, whole):
        k = functools.partial(kernel, whole=whole)
        return pl.pallas_call(k, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)

    LAUNCHERS = {{"copy": launch}}

    def entry(x):
        return LAUNCHERS["copy"](x, whole=True)
    '''
    assert "PAL103" in codes(body)


def test_a_reference_implementation_handed_to_jax_is_not_run():
    # custom_vjp / jit take functions the engine does not model, so they run
    # later with unknown arguments; one that names nothing Pallas (a NumPy
    # reference and its backward pass) cannot produce an event and is
    # skipped, the jitted launcher is not.
    interp, tree = _interp(f'''
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    @jax.jit
    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT})(x)

    @jax.custom_vjp
    def reference(x):
        return jnp.tanh(x) * 2

    def reference_fwd(x):
        return reference(x), x

    def reference_bwd(res, g):
        return (g * (1 - jnp.tanh(res) ** 2),)

    reference.defvjp(reference_fwd, reference_bwd)
    ''')
    for name in ("reference", "reference_fwd", "reference_bwd"):
        assert id(_def(tree, name)) not in interp._entered, name
    assert id(_def(tree, "launch")) in interp._entered


def test_recording_names_for_hover_does_not_change_the_analysis():
    # A name seen with several values (`c`, one config per pass) shows their
    # join on hover, made only when asked for. Joining two dataclass
    # instances makes a new one, which counts as an instance write, and a
    # loop pass that wrote an instance is run again: joined during the run,
    # the hover record used to make the engine do more work.
    body = f'''
    @dataclasses.dataclass
    class Cfg:
        n: int
        sem: object

    def kernel(x_hbm, o_ref, buf, sems):
        cfgs = (Cfg(0, sems.at[0]), Cfg(1, sems.at[1]))
        for i in range(x_hbm.shape[0]):
            for c in cfgs:
                pltpu.make_async_copy(x_hbm.at[i], buf.at[c.n], c.sem).start()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes={SCRATCH})(x)
    '''
    src = HEADER + "import dataclasses\n" + textwrap.dedent(body)
    runs = []
    for names in (True, False):
        interp = Interpreter(parse(src), "snippet.py", names=names)
        before = instance_writes()
        interp.run()
        runs.append((interp._steps, instance_writes() - before))
        if names:
            [c] = {n.value.describe() for n in interp.name_infos() if n.name == "c"}
            assert "Cfg" in c  # the two configs, joined field by field
    assert runs[0] == runs[1]


def test_a_launch_cost_estimate_is_not_worked_out():
    # The engine models nothing of `cost_estimate=`: the user's estimator
    # called for it is not run (the launch's other arguments still are).
    interp, tree = _interp(f'''
    def estimate(x):
        flops = 2 * x.size
        return CostEstimate(flops=flops, transcendentals=0, bytes_accessed=x.nbytes)

    def spec(x):
        return pl.BlockSpec((8, 128), lambda i: (i, 0))

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[spec(x)],
                              cost_estimate=estimate(x))(x)
    ''')
    assert id(_def(tree, "estimate")) not in interp._entered
    assert id(_def(tree, "spec")) in interp._entered
    assert id(_def(tree, "kernel")) in interp._entered
