"""Constructs of real kernels that used to lose values on the way (a value
became Unknown and Unknown is silent). Each test has a buggy kernel that
must be reported and, where it matters, its fixed twin that must not."""
import ast
import textwrap
import pytest

from pallas_lsp.engine import analyze
from tests.engine.conftest import HEADER, codes, line_of, run

ANY = "pl.BlockSpec(memory_space=pltpu.ANY)"
OUT = "jax.ShapeDtypeStruct((8, 128), jnp.float32)"


def _twin(body: str, bug: str, fix: str) -> tuple[list[str], list[str]]:
    assert bug in body
    return codes(body), codes(body.replace(bug, fix))


# ---------------------------------------------------------------- binding


def test_unknown_output_pytree_binds_from_the_front_and_the_back():
    body = f'''
    def kernel(ids_ref, x_hbm, outs, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems)
        c.start()
        c.wait()

    def launch(ids, x, out_tree):
        specs = jax.tree.map(lambda s: {ANY}, out_tree)
        return pl.pallas_call(
            kernel, out_shape=out_tree,
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, in_specs=[{ANY}], out_specs=specs,
                scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((3,))]),
        )(ids, x)
    '''
    assert _twin(body, "buf, sems)", "buf, sems.at[1])") == (["PAL103"], [])


def test_back_binding_needs_a_signature_without_defaults():
    # With a default, the trailing parameters could be anything: stay silent.
    # (A name that says nothing of how many: a bare `sems` is read as several.)
    assert codes(f'''
    def kernel(x_hbm, outs, buf, sem_pool, extra=None):
        pltpu.make_async_copy(x_hbm, buf, sem_pool).start()

    def launch(x, tree):
        return pl.pallas_call(kernel, out_shape=tree, in_specs=[{ANY}],
                              out_specs=jax.tree.map(lambda _: {ANY}, tree),
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    ''') == []


def test_star_refs_kernel_unpacked_in_the_body():
    body = f'''
    def kernel(*refs):
        x_hbm, o_hbm, tmp, sem = refs
        c = pltpu.make_async_copy(x_hbm, tmp[...], sem)
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA(())])(x)
    '''
    assert _twin(body, "tmp[...]", "tmp") == (["PAL101"], [])


def test_call_with_star_of_unknown_length_binds_the_trailing_parameters():
    body = '''
    def body(x_hbm, o_hbm, stage, sem):
        pltpu.sync_copy(x_hbm, stage)
        d = pltpu.make_async_copy(stage, o_hbm, sem)
        d.start()
        d.wait()

    def make(out_type, scratch):
        def run(*operands):
            refs = jax.tree.map(jax.new_ref, operands)
            out = jax.new_ref(jnp.zeros(out_type.shape, out_type.dtype))

            @pl.core_map(pltpu.create_tensorcore_mesh("core"), scratch_shapes=scratch)
            def _(*scratch_refs):
                body(*refs, out, *scratch_refs)
            return out[...]
        return run

    def launch(x):
        return make(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                    [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((4,))])(x)
    '''
    assert _twin(body, "o_hbm, sem)", "o_hbm, sem.at[0])") == (["PAL103"], [])


def test_optional_allocation_is_the_allocation_when_present():
    body = f'''
    def kernel(x_hbm, bias_hbm, o_hbm, xb, bb, sems):
        if bias_hbm is not None:
            c = pltpu.make_async_copy(bias_hbm, bb[0], sems.at[1])
            c.start()
            c.wait()

    def launch(x, bias=None):
        return pl.pallas_call(
            kernel, out_shape={OUT},
            in_specs=[{ANY}, None if bias is None else {ANY}], out_specs={ANY},
            scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                            pltpu.VMEM((2, 8, 128), jnp.float32) if bias is not None else None,
                            pltpu.SemaphoreType.DMA((2,))])(x, bias)
    '''
    assert _twin(body, "bb[0]", "bb.at[0]") == (["PAL101"], [])


def test_optional_semaphore_keeps_its_shape():
    body = f'''
    def kernel(x_hbm, o_hbm, sems):
        if sems is not None:
            pltpu.async_copy(x_hbm, o_hbm, sems).wait()

    def launch(x, overlap):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,)) if overlap else None])(x)
    '''
    assert _twin(body, "o_hbm, sems)", "o_hbm, sems.at[0])") == (["PAL103"], [])


# ---------------------------------------------------------------- pipelines


def test_emit_pipeline_scratches_are_the_trailing_body_parameters():
    body = f'''
    def outer(x_hbm, o_hbm, stage, sems):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))

        def inner(x_blk, o_blk, stage_s, sems_s):
            c = pltpu.make_async_copy(x_hbm.at[0], stage_s.at[0], sems_s)
            c.start()
            c.wait()

        pipeline = pltpu.emit_pipeline(inner, grid=(4,), in_specs=[spec], out_specs=[spec])
        pipeline(x_hbm, o_hbm, scratches=[stage, sems])

    def launch(x):
        return pl.pallas_call(outer, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "stage_s.at[0], sems_s)", "stage_s.at[0], sems_s.at[0])") == (
        ["PAL103"], [])


def test_emit_pipeline_with_an_optional_spec():
    body = f'''
    def outer(x_hbm, w_hbm, o_hbm, sems):
        blk = pl.BlockSpec((8, 128), lambda i: (i, 0))
        w_spec = blk if w_hbm is not None else None

        def inner(x_blk, w_blk, o_blk):
            c = pltpu.make_async_copy(x_blk[...], o_blk, sems.at[0])
            c.start()
            c.wait()

        pltpu.emit_pipeline(inner, grid=(2,), in_specs=[blk, w_spec], out_specs=blk)(
            x_hbm, w_hbm, o_hbm)

    def launch(x, w):
        return pl.pallas_call(outer, out_shape={OUT}, in_specs=[{ANY}, {ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x, w)
    '''
    assert _twin(body, "x_blk[...]", "x_blk") == (["PAL101"], [])


# ---------------------------------------------------------------- Python


def test_keyword_arguments_reach_the_callee_through_double_star():
    body = f'''
    def _dma(*, src, dst, sem):
        c = pltpu.make_async_copy(src, dst, sem)
        c.start()
        c.wait()

    def dma(**kw):
        return _dma(**kw)

    def kernel(x_hbm, o_hbm, sems):
        dma(src=x_hbm, dst=o_hbm, sem=sems)

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sem=sems)", "sem=sems.at[0])") == (["PAL103"], [])


def test_forwarding_kernel_passes_its_flags_on():
    body = f'''
    def _impl(x_hbm, o_hbm, sems, *, overlap=False):
        if overlap:
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
            c.start()
            c.wait()

    def kernel(*args, **kwargs):
        return _impl(*args, **kwargs)

    def launch(x, overlap):
        return pl.pallas_call(functools.partial(kernel, overlap=overlap), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "o_hbm, sems)", "o_hbm, sems.at[1])") == (["PAL103"], [])


def test_launcher_flag_branch_not_taken_by_the_file_is_checked():
    body = f'''
    def kernel(x_hbm, o_hbm, sems, *, fused=False):
        if fused:
            c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
            c.start()
            c.wait()

    def launch(x, *, fused: bool = False):
        common = dict(out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                      scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
        if fused:
            return pl.pallas_call(functools.partial(kernel, fused=True), **common)(x)
        return pl.pallas_call(kernel, **common)(x)

    def api(x):
        return launch(x)
    '''
    assert _twin(body, "o_hbm, sems)", "o_hbm, sems.at[0])") == (["PAL103"], [])


def test_with_scoped_decorator_allocates_its_parameters():
    body = f'''
    def kernel(x_hbm, o_hbm):
        @pl.with_scoped(pltpu.VMEM((8, 128), jnp.float32), sem=pltpu.SemaphoreType.DMA((2,)))
        def body(n, stage, sem):
            c = pltpu.make_async_copy(x_hbm, stage, sem)
            c.start()
            c.wait()

        body(1)

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY})(x)
    '''
    assert _twin(body, "stage, sem)", "stage, sem.at[0])") == (["PAL103"], [])


def test_decorated_methods_of_the_files_classes():
    body = f'''
    @dataclasses.dataclass(frozen=True)
    class Mover:
        sems: object

        @jax.named_scope("move")
        def move(self, src, dst):
            c = pltpu.make_async_copy(src, dst, self.sems)
            c.start()
            c.wait()

        @staticmethod
        def make(sems):
            return Mover(sems)

        @property
        def first(self):
            return self.sems

    def kernel(x_hbm, o_hbm, sems):
        Mover.make(sems).move(x_hbm, o_hbm)
        pltpu.async_copy(x_hbm, o_hbm, Mover(sems).first).wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert codes(body, "import dataclasses\n" + HEADER) == ["PAL103", "PAL103"]


def test_gpu_kernels_are_not_judged_by_tpu_rules():
    gpu = '''
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu


def kernel(x_ref, o_ref, barrier):
    pl.semaphore_wait(barrier, 2, decrement=False)


def launch(x):
    return plgpu.kernel(kernel, out_shape=x, scratch_shapes=[plgpu.Barrier()])(x)
'''
    assert analyze(gpu, "gpu.py").findings == []
    tpu = gpu.replace("from jax.experimental.pallas import mosaic_gpu as plgpu",
                      "from jax.experimental.pallas import tpu as pltpu")
    tpu = tpu.replace("plgpu.kernel(kernel, out_shape=x, scratch_shapes=[plgpu.Barrier()])",
                      "pl.pallas_call(kernel, out_shape=x, scratch_shapes=["
                      "pltpu.SemaphoreType.REGULAR])")
    assert [f.code for f in analyze(tpu, "tpu.py").findings] == ["PAL207"]


GPU_FILE = '''
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu


def kernel(x_ref, o_ref, barrier):
    pl.semaphore_wait(barrier, 2, decrement=False)


def launch(x):
    return plgpu.kernel(kernel, out_shape=x, scratch_shapes=[plgpu.Barrier()])(x)
'''


@pytest.mark.parametrize("change, skipped", [
    ((), True),  # GPU modules only, libraries only: nothing to judge, not run
    (("import jax\n", "import jax\nfrom . import helpers\n"), False),  # the user's code
    (("import jax\n", "import jax\nimport mylib.kernels\n"), False),
    (("def launch", "# runs on TPU too\ndef launch"), False),  # names a TPU
    (("out_shape=x,", "out_shape=x, compiler_params={'mosaic': {}},"), False),
])
def test_command_line_skips_only_files_that_can_only_hold_gpu_kernels(change, skipped,
                                                                    monkeypatch):
    from pallas_lsp.engine.interp import Interpreter
    source = GPU_FILE.replace(*change) if change else GPU_FILE
    full = analyze(source, "k.py")
    runs = []
    run = Interpreter.run
    monkeypatch.setattr(Interpreter, "run", lambda self: (runs.append(1), run(self)))
    fast = analyze(source, "k.py", findings_only=True)
    assert full.findings == fast.findings
    assert (not runs) == skipped
    broken = analyze(source + "\ndef broken(:\n", "k.py", findings_only=True)
    assert broken.syntax_error  # still parsed: syntax errors are always reported



TABLE_FILE = '''
import numpy as np

TUNED = {
    (128, 8): (64, 128),
    (256, 8): (128, 128),
}


def pick(rows, cols):
    return TUNED.get((rows, cols), (8, 128)) if np.ndim(rows) == 0 else None
'''


@pytest.mark.parametrize("change, inert", [
    ((), True),  # names nothing Pallas, imports only libraries: only checked for syntax
    (("import numpy as np\n", "import numpy as np\nfrom . import kernels\n"), False),
    (("import numpy as np\n", "import numpy as np\nimport mylib\n"), False),
    (("def pick", "# see the pallas kernel\ndef pick"), False),
    (("import numpy as np\n", "import numpy as np\nimport importlib\n"
      "k = importlib.import_module('x')\n"), False),
])
@pytest.mark.parametrize("findings_only", [True, False])  # the command line, the editor
def test_files_that_can_reach_no_kernel_are_only_checked_for_syntax(change, inert, findings_only,
                                                          monkeypatch):
    import sys
    engine = sys.modules["pallas_lsp.engine.analyze"]  # the module, not the function
    source = TABLE_FILE.replace(*change) if change else TABLE_FILE
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda text: (parsed.append(1), real_parse(text))[1])
    fast = analyze(source, "t.py", findings_only=findings_only)
    assert fast.findings == [] and fast.syntax_error is None and fast.names == []
    assert (not parsed) == inert
    # Broken, or valid only by a parse's standards: the full path says what and where.
    text = source + "\ndef broken(:\n"
    broken = analyze(text, "t.py", findings_only=findings_only)
    assert broken.syntax_error == f"line {text.split(chr(10)).index('def broken(:') + 1}: " \
        "invalid syntax"
    for tail in ("\nreturn 1\n", "\nnonlocal x\n"):  # the compiler's / symbol table's objections
        outside = analyze(source + tail, "t.py", findings_only=findings_only)
        assert outside.syntax_error is None  # `ast.parse` accepts it; so do we, as before

def test_gpu_compiler_params_mark_one_kernel_in_a_mixed_file():
    body = f'''
    def tpu_kernel(x_ref, o_ref, sem):
        pl.semaphore_wait(sem, 1, decrement=False)

    def gpu_kernel(x_ref, o_ref, sem):
        pl.semaphore_wait(sem, 1, decrement=False)

    def on_tpu(x):
        return pl.pallas_call(tpu_kernel, out_shape={OUT},
                              scratch_shapes=[pltpu.SemaphoreType.REGULAR])(x)

    def on_gpu(x):
        return pl.pallas_call(gpu_kernel, out_shape={OUT},
                              scratch_shapes=[pltpu.SemaphoreType.REGULAR],
                              compiler_params=plgpu.CompilerParams())(x)
    '''
    header = HEADER + "from jax.experimental.pallas import mosaic_gpu as plgpu\n"
    analysis, src = run(body, header)
    lines = [src.split("\n")[f.span.line] for f in analysis.findings]
    assert [f.code for f in analysis.findings] == ["PAL207"]
    assert analysis.findings[0].span.line < src.index("def gpu_kernel") and "sem, 1" in lines[0]


def test_sparsecore_kernels_may_accumulate_with_dma():
    # SparseCore lowers some `add=True` copies; the TensorCore kernel next to
    # it is still judged.
    body = f'''
    def tc_kernel(x_hbm, o_hbm, buf, sem):
        pltpu.sync_copy(x_hbm, buf)
        pltpu.sync_copy(buf, o_hbm, add=True)

    def sc_kernel(x_hbm, o_hbm, ids, buf, shared):
        pltpu.sync_copy(x_hbm, buf)
        pltpu.sync_copy(buf, shared.at[ids], add=True)
        pltpu.sync_copy(shared, o_hbm)

    def on_tensorcore(x):
        return pl.pallas_call(tc_kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA])(x)

    def on_sparsecore(x):
        mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")
        return pl.kernel(sc_kernel, out_type={OUT}, mesh=mesh,
                         scratch_types=[pltpu.VMEM((8,), jnp.int32), pltpu.VMEM((8, 128), jnp.float32),
                                        pltpu.VMEM_SHARED((8, 128), jnp.float32)])(x)
    '''
    header = HEADER + "from jax.experimental.pallas import tpu_sc as plsc\n"
    analysis, src = run(body, header)
    assert [f.code for f in analysis.findings] == ["PAL111"]
    assert analysis.findings[0].span.line < line_of(src, "def sc_kernel")
    assert sorted(la.kernel for la in analysis.launches if la.bound) == ["sc_kernel", "tc_kernel"]


def test_sparsecore_kernel_whose_launch_is_not_bound_is_not_judged_for_add():
    """The mesh is replaced in one branch (`dataclasses.replace(mesh,
    num_cores=2)`) and the scratch is a flattened tree the engine cannot
    count: the body runs as kernel code without its launch, in a SparseCore
    file; its `add=True` copy may be SparseCore's scatter-add."""
    body = f'''
    def top_k(x, scratch_types, big):
        mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")
        if big:
            mesh = dataclasses.replace(mesh, num_cores=2)
        leaves, tree = jax.tree.flatten(scratch_types)

        @pl.kernel(out_type={OUT}, mesh=mesh, scratch_types=leaves)
        def kernel(x_hbm, o_hbm, *scratch):
            ids, buf, shared = tree.unflatten(scratch)
            pltpu.sync_copy(x_hbm, buf)
            pltpu.sync_copy(buf, shared.at[ids], add=True)
            pltpu.sync_copy(shared, o_hbm)

        return kernel(x)
    '''
    header = HEADER + "import dataclasses\nfrom jax.experimental.pallas import tpu_sc as plsc\n"
    assert run(body, header)[0].findings == []


def test_scratch_dict_entry_added_in_one_branch():
    # `scratch["stage"] = ...` under a flag: the other entries stay known, and
    # the optional one is the allocation or the parameter's None default.
    body = f'''
    def kernel(x_hbm, o_hbm, *, buf, sems, stage=None):
        if stage is not None:
            pltpu.sync_copy(x_hbm, stage)
            pltpu.sync_copy(stage, buf)
        c = pltpu.make_async_copy(x_hbm, buf, sems)
        c.start()
        c.wait()

    def launch(x):
        scratch = dict(buf=pltpu.VMEM((8, 128), jnp.float32), sems=pltpu.SemaphoreType.DMA((2,)))
        if x.shape[0] > 1024:
            scratch["stage"] = pltpu.VMEM((8, 128), jnp.float32)
        mesh = pltpu.create_tensorcore_mesh("core")
        return pl.kernel(kernel, out_type={OUT}, mesh=mesh, scratch_types=scratch)(x)
    '''
    assert _twin(body, "buf, sems)", "buf, sems.at[0])") == (["PAL103"], [])
    fixed = body.replace("buf, sems)", "buf, sems.at[0])")
    assert _twin(fixed, "sync_copy(stage, buf)", "sync_copy(stage[...], buf)") == ([], ["PAL101"])


def test_shared_vmem_and_empty_refs_are_refs():
    body = f'''
    def kernel(x_hbm, o_hbm, shared, sem):
        local = jax.empty_ref(jax.core.ShapedArray((8, 128), jnp.float32),
                              memory_space=pltpu.VMEM)
        pltpu.make_async_copy(x_hbm, shared, sem).start()
        pltpu.make_async_copy(x_hbm, shared, sem).wait()
        pltpu.sync_copy(shared, local)
        pltpu.sync_copy(local, o_hbm)

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM_SHARED((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "x_hbm, shared, sem).start()", "x_hbm, shared[...], sem).start()") \
        == ([], ["PAL101"])
    assert _twin(body, "pltpu.sync_copy(local, o_hbm)", "pltpu.sync_copy(local[...], o_hbm)") \
        == ([], ["PAL101"])


def test_pl_kernel_with_uncounted_outputs_gets_inputs_from_its_call():
    # `out_shape=x` (an array: not counted), scratch counted from the back;
    # the call's two operands are the first two parameters.
    body = f'''
    def launch(x, shift):
        @pl.kernel(out_shape=x, mesh=pltpu.create_tensorcore_mesh("core"),
                   scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SMEM((1,), jnp.int32),
                                   pltpu.SemaphoreType.DMA((2,))])
        def kernel(x_hbm, s_hbm, o_hbm, buf, s_smem, sems):
            pltpu.async_copy(s_hbm, s_smem, sems.at[0]).wait()
            pltpu.async_copy(x_hbm.at[pl.ds(s_smem[0], 8)], buf, sems.at[1]).wait()
        return kernel(x, shift)
    '''
    assert _twin(body, "x_hbm.at[pl.ds(s_smem[0], 8)]", "x_hbm[pl.ds(s_smem[0], 8)]") \
        == ([], ["PAL101"])
    # The output after them is a Ref where its name says so.
    out = body.replace("sems.at[1]).wait()", "sems.at[1]).wait()\n"
                       "            pltpu.sync_copy(buf, o_hbm.at[pl.ds(0, 8)])")
    assert _twin(out, "o_hbm.at[pl.ds(0, 8)]", "o_hbm[pl.ds(0, 8)]") == ([], ["PAL101"])


def test_kernel_launched_in_no_file_seen_is_checked_by_the_use_of_its_parameters():
    # Kernel-only code (DMA calls) whose launch is in a file not analysed:
    # parameters used as Refs are Refs; the rest of the kernel is not seen.
    body = '''
    def read_kernel(x_hbm, o_hbm, buf, sem, *, n):
        for i in range(n):
            c = pltpu.make_async_copy(x_hbm.at[i], buf, sem)
            c.start()
            c.wait()
        pltpu.make_async_copy(x_hbm.at[n], buf, sem).start()  # the caller waits for it
        pltpu.sync_copy(buf, o_hbm.at[0])

    def fill(ids, buf, sem, value):
        ids = ids.at[0].set(value)  # a jax array, not a Ref
        pltpu.make_async_copy(buf, buf, sem).wait_send()
        return ids[0]
    '''
    buggy = body.replace("x_hbm.at[i], buf", "x_hbm[i], buf")
    assert codes(body) == ["PAL106"]  # wait_send() on a local copy; no PAL302 for `.start()`
    assert codes(buggy) == ["PAL101", "PAL106"]
    assert codes(body.replace("sync_copy(buf, o_hbm.at[0])", "sync_copy(buf[...], o_hbm.at[0])")) \
        == ["PAL101", "PAL106"]


def test_kernel_body_handed_to_an_api_the_engine_does_not_model():
    # A nested body given to an API the engine does not know (a private
    # launcher): its parameters named as Refs are Refs.
    body = '''
    def run(x, mpmd_map):
        def body(x_ref, out_vmem_ref, sem):
            pltpu.make_async_copy(x_ref, out_vmem_ref, sem).wait()
        return mpmd_map([body], out_types=x)(x)
    '''
    assert codes(body) == []
    assert codes(body.replace("(x_ref, out_vmem_ref, sem).wait()",
                              "(x_ref[...], out_vmem_ref, sem).wait()")) == ["PAL112"]


def test_kernel_bound_with_a_pytree_partial():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems, *, n):
        c = pltpu.make_async_copy(x_hbm, buf, sems)
        c.start()
        c.wait()

    def launch(x, n):
        return pl.pallas_call(jax.tree_util.Partial(kernel, n=n), out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "buf, sems)", "buf, sems.at[0])") == (["PAL103"], [])


def test_builder_returning_a_tuple_with_the_launcher_runs_its_flag_variants():
    # `build(nested)` returns `(mesh, run)` and the file only builds the
    # default: each flag value's launcher is run, and the branch only
    # `nested=True` takes is checked.
    body = f'''
    def build(nested: bool = False):
        mesh = jax.make_mesh((1,), ("d",))

        def run(x):
            @pl.kernel(out_type={OUT}, mesh=pltpu.create_tensorcore_mesh("tc"),
                       scratch_types=(pltpu.VMEM((8, 128), jnp.float32),
                                      pltpu.SemaphoreType.DMA((2,))))
            def kernel(x_hbm, o_hbm, buf, sems):
                pltpu.async_copy(x_hbm, buf, sems.at[0]).wait()
                if nested:
                    pltpu.async_copy(buf, o_hbm, sems).wait()
            return kernel(x)

        return mesh, run

    def main(x, compile):
        mesh, run = build()
        compile(run, x, mesh=mesh)
    '''
    assert _twin(body, "o_hbm, sems)", "o_hbm, sems.at[1])") == (["PAL103"], [])


def test_scratch_buffers_whose_shape_a_mode_chooses():
    # `mode` is a string: no variants, the two lists of buffers are joined.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems, *, mode):
        pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sems.at[0]).start()
        pltpu.make_async_copy(x_hbm.at[0], buf.at[0], sems.at[0]).wait()

    def build(x, mode: str):
        if mode == "ring":
            bufs = [pltpu.VMEM((4, 8, 128), jnp.float32)]
        else:
            bufs = [pltpu.VMEM((2, 8, 128), jnp.float32)]
        return pl.pallas_call(functools.partial(kernel, mode=mode), out_shape={OUT},
                              in_specs=[{ANY}],
                              scratch_shapes=bufs + [pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "buf.at[0], sems.at[0]).start()", "buf[0], sems.at[0]).start()") \
        == ([], ["PAL101"])


def test_semaphores_allocated_in_the_kernel_with_empty_ref():
    # JAX (interpret mode): "Cannot signal on a non-()-shaped semaphore: (4,)".
    body = f'''
    def kernel(x_hbm, o_hbm):
        sems = jax.empty_ref(jax.ShapeDtypeStruct((4,), pltpu.SemaphoreType.DMA.dtype),
                             memory_space=pltpu.SEMAPHORE)
        pltpu.async_copy(x_hbm, o_hbm, sems).wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY})(x)
    '''
    assert _twin(body, "o_hbm, sems)", "o_hbm, sems.at[0])") == (["PAL103"], [])


def test_optional_scratch_entries_reach_a_star_refs_parameter():
    # Semaphore arrays appended under a condition arrive in `*extra`.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sem, *extra, n):
        if len(extra) >= 2:
            send, recv = extra[0], extra[1]
            c = pltpu.make_async_remote_copy(x_hbm, buf, send.at[0, 0], recv.at[0, 0],
                                             device_id=(1,))
            c.start()
            c.wait_send()
            c.wait_recv()
        pltpu.sync_copy(x_hbm, buf)

    def launch(x, n):
        scratch = [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA]
        if n > 1:
            scratch.append(pltpu.SemaphoreType.DMA((n, 2)))
            scratch.append(pltpu.SemaphoreType.DMA((n, 2)))
        return pl.pallas_call(functools.partial(kernel, n=n), out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=scratch)(x)
    '''
    assert _twin(body, "send.at[0, 0], recv", "send, recv") == ([], ["PAL104"])


def test_a_plug_in_method_that_builds_a_helper_from_its_refs_is_kernel_code():
    # A method the kernel (in a file not analysed) calls: it keeps its Refs
    # in a helper object whose method does the DMAs. Neither is launched
    # here; the outer method binds the Refs, so it runs as kernel code, and
    # the helper's method sees them through `self`.
    body = '''
    class Ring:
        def __init__(self, sems, *, window_ref):
            self.sems = sems
            self.window = window_ref

        def stage(self, n):
            for b in range(n):
                lane = self.window.at[0, b]
                dst = self.window.at[1, b]
                op = pltpu.make_async_remote_copy(
                    src_ref=lane, dst_ref=dst, send_sem=self.sems.at[0],
                    recv_sem=self.sems.at[1], device_id=(1,),
                    device_id_type=pl.DeviceIdType.MESH)
                op.start()
                op.wait_recv()

    class Plugin(SomeBase):
        def fetch(self, step, extra, *, window_ref):
            (sems,) = extra
            ring = Ring(sems, window_ref=window_ref)
            ring.stage(4)
            return step
    '''
    assert codes(body) == []
    assert codes(body.replace("src_ref=lane,", "src_ref=lane[...],")) == ["PAL101"]
    assert codes(body.replace("dst_ref=dst,", "dst_ref=dst[...],")) == ["PAL101"]


def test_pl_kernel_with_uncounted_outputs_and_no_scratch_binds_from_its_call():
    # `out_shape=x` (an array the engine cannot count) and no scratch: every
    # parameter is an input or an output, and the call's two operands say
    # which.
    body = '''
    def roll(x, idx):
        @pl.kernel(out_shape=x, mesh=pltpu.create_tensorcore_mesh("core"))
        def body(x_hbm, i_hbm, o_hbm):
            pltpu.sync_copy(x_hbm.at[0], o_hbm.at[0])
            pltpu.sync_copy(i_hbm, o_hbm.at[1])

        return body(x, idx)
    '''
    assert _twin(body, "sync_copy(x_hbm.at[0], o_hbm.at[0])",
                 "sync_copy(x_hbm[0], o_hbm.at[0])") == ([], ["PAL101"])
    assert codes(body.replace("sync_copy(i_hbm, o_hbm.at[1])",
                              "sync_copy(i_hbm, o_hbm[1])")) == ["PAL101"]


def test_in_spec_list_of_unknown_length_gives_the_kernel_a_list_of_refs():
    # `[spec for _ in operands]` as one in_specs item: the parameter is a list
    # of Refs (not one Ref), so `refs[0]` is a Ref and zip pairs Refs.
    body = f'''
    def kernel(x_hbms, o_hbm, bufs, sem):
        for x_hbm, buf in zip(x_hbms, bufs):
            pltpu.async_copy(src_ref=x_hbm.at[0], dst_ref=buf, sem=sem).wait()
        pltpu.sync_copy(x_hbms[0], o_hbm)

    def run(xs):
        return pl.pallas_call(
            kernel, out_shape={OUT},
            in_specs=[[{ANY} for _ in xs]], out_specs={ANY},
            scratch_shapes=[[pltpu.VMEM((8, 128), jnp.float32) for _ in xs],
                            pltpu.SemaphoreType.DMA],
        )(xs)
    '''
    assert codes(body) == []
    # (read directly, an ANY-space Ref is also PAL204)
    assert codes(body.replace("src_ref=x_hbm.at[0]", "src_ref=x_hbm[0]")) == ["PAL101", "PAL204"]
    assert codes(body.replace("sync_copy(x_hbms[0], o_hbm)", "sync_copy(x_hbms[0][...], o_hbm)")) \
        == ["PAL101", "PAL204"]


# ---------------------------------------------------------------- ref lists shaped by flags


def test_refs_popped_from_the_front_then_unpacked_from_the_back():
    body = f'''
    def kernel(*refs, rotary=False):
        rest = list(refs)
        x_hbm = rest.pop(0)
        if rotary:
            rot_hbm = rest.pop(0)
        o_hbm = rest.pop(0)
        *stages, sems = rest
        c = pltpu.make_async_copy(x_hbm, stages[0], sems)
        c.start()
        c.wait()

    def launch(x, r, rotary):
        specs = [{ANY}, {ANY}] if rotary else [{ANY}]
        return pl.pallas_call(functools.partial(kernel, rotary=rotary), out_shape={OUT},
                              in_specs=specs, out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x, r)
    '''
    assert _twin(body, "stages[0], sems)", "stages[0], sems.at[0])") == (["PAL103"], [])


def test_refs_read_with_iter_and_next():
    body = f'''
    def kernel(*refs):
        it = iter(refs)
        x_hbm = next(it)
        o_hbm = next(it)
        stage, sems = (next(it) for _ in range(2))
        c = pltpu.make_async_copy(x_hbm, stage, sems)
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "stage, sems)", "stage, sems.at[1])") == (["PAL103"], [])


def test_launcher_flags_keep_scratch_list_and_kernel_in_step():
    body = f'''
    def kernel(x_hbm, o_hbm, *scratch, with_lse):
        if with_lse:
            stage, lse_buf, sems = scratch
        else:
            stage, sems = scratch
        c = pltpu.make_async_copy(x_hbm, stage, sems)
        c.start()
        c.wait()

    def launch(x, *, with_lse: bool = False):
        scratch = [pltpu.VMEM((8, 128), jnp.float32)]
        if with_lse:
            scratch.append(pltpu.VMEM((8, 128), jnp.float32))
        scratch.append(pltpu.SemaphoreType.DMA((2,)))
        return pl.pallas_call(functools.partial(kernel, with_lse=with_lse), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY}, scratch_shapes=scratch)(x)
    '''
    assert _twin(body, "stage, sems)", "stage, sems.at[0])") == (["PAL103"], [])


def test_tree_map_starts_and_waits_each_descriptor_of_a_list():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems):
        copies = []
        for i in range(2):
            copies.append(pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sems.at[i]))
        jax.tree.map(lambda c: c.start(), copies)
        jax.tree_util.tree_map(lambda c: c.wait(), copies)
        o_ref[...] = buf[0]

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    # Started only through tree.map: the start-time check must still run.
    assert _twin(body, "sems.at[i]))", "sems))") == ([], ["PAL103"])
    # And the waits are seen: no "started and never waited".
    assert "PAL302" not in codes(body)


def test_a_shared_launcher_runs_every_kernel_it_is_given():
    body = f'''
    def good_kernel(x_hbm, o_ref, buf, sem):
        pltpu.sync_copy(x_hbm, buf)
        o_ref[...] = buf[...]

    def bad_kernel(x_hbm, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_hbm, buf[...], sem)
        c.start()
        c.wait()
        o_ref[...] = buf[...]

    def _launch(kernel, x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA(())])(x)

    def good(x):
        return _launch(good_kernel, x)

    def bad(x):
        return _launch(bad_kernel, x)
    '''
    assert _twin(body, "buf[...], sem)", "buf, sem)") == (["PAL101"], [])


def test_a_builder_returning_its_launcher_is_followed_for_each_flag():
    """`build(*, has_scales)` defines the kernel and `make_call`, returns
    `fn`; the kernel unpacks `*refs` with `next(it)`, generator expressions
    included, in step with the flag that sized `in_specs`."""
    body = f'''
    N_TABLES = 2

    def build(*, has_scales, hidden):
        def kernel(*refs):
            it = iter(refs)
            (t0, t1) = (next(it) for _ in range(N_TABLES))
            x_hbm = next(it)
            s_hbm = next(it) if has_scales else None
            o_hbm = next(it)
            buf = next(it)
            sems = next(it)
            pltpu.make_async_copy(x_hbm, buf, sems.at[0]).start()
            pltpu.make_async_copy(x_hbm, buf, sems.at[0]).wait()
            pltpu.sync_copy(buf, o_hbm)

        def make_call():
            hbm = {ANY}
            n_inputs = 1 + (1 if has_scales else 0)
            scratch = []
            scratch.append(pltpu.VMEM((8, hidden), jnp.float32))
            scratch.append(pltpu.SemaphoreType.DMA((2,)))
            return pl.pallas_call(kernel, out_shape={OUT},
                grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=N_TABLES,
                    in_specs=[hbm] * n_inputs, out_specs=hbm,
                    scratch_shapes=tuple(scratch), grid=()))

        def fn(t0, t1, x, s=None):
            return make_call()(t0, t1, *((x,) if s is None else (x, s)))
        return fn
    '''
    assert _twin(body, "(x_hbm, buf, sems.at[0]).start()", "(x_hbm, buf[...], sems.at[0]).start()") \
        == ([], ["PAL101"])
    assert _twin(body, "(x_hbm, buf, sems.at[0]).start()", "(x_hbm, buf, sems).start()") \
        == ([], ["PAL103"])


def test_next_in_a_generator_expression_advances_the_kernels_iterator():
    # Without it, `x_hbm` below would be the first scalar-prefetch Ref again.
    assert codes(f'''
    def kernel(*refs):
        it = iter(refs)
        (i0, i1) = (next(it) for _ in range(2))
        x_hbm = next(it)
        o_ref = next(it)
        o_ref[...] = x_hbm[...]

    def launch(a, b, x):
        return pl.pallas_call(kernel, out_shape={OUT},
            grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=2, in_specs=[{ANY}],
                                                   out_specs=pl.BlockSpec(memory_space=pltpu.VMEM)))(a, b, x)
    ''') == ["PAL204"]


def test_buffered_ref_overrides_are_checked_with_jax_buffers_and_semaphores():
    """emit_pipeline calls a BufferedRef subclass's copy_in / wait_in on the
    VMEM window and the per-buffer DMA semaphores jax allocates."""
    body = '''
    import dataclasses

    class _Bypass(pltpu.BufferedRef):
        pass

    @dataclasses.dataclass(frozen=True)
    class PagedRef(_Bypass):
        def copy_in(self, src_ref, grid_indices):
            slot = self.current_copy_in_slot
            pltpu.make_async_copy(src_ref.at[grid_indices[0]], self.window_ref.at[slot],
                                  self.sem_recvs.at[slot]).start()

        def wait_in(self, src_ref, grid_indices):
            slot = self.current_wait_in_slot
            pltpu.make_async_copy(src_ref.at[0], self.window_ref.at[slot],
                                  self.sem_recvs.at[slot]).wait()
    '''
    assert _twin(body, "self.sem_recvs.at[slot]).start()", "self.sem_recvs).start()") \
        == ([], ["PAL103"])
    assert _twin(body, "self.window_ref.at[slot],\n                                  self.sem_recvs.at[slot]).start()",
                 "self.window_ref[slot],\n                                  self.sem_recvs.at[slot]).start()") \
        == ([], ["PAL101"])
    # The pipeline around the hooks is not seen: no protocol findings.
    assert codes(body.replace(".wait()", ".start()")) == []


def test_buffered_ref_operand_is_a_ref_unless_the_override_takes_a_pytree():
    body = '''
    class Paged(pltpu.BufferedRef):
        def copy_in(self, src_ref, grid_indices):
            slot = self.current_copy_in_slot
            pltpu.make_async_copy(src_ref.at[grid_indices[0]], self.window_ref.at[slot],
                                  self.sem_recvs.at[slot]).start()
    '''
    assert _twin(body, "src_ref.at[grid_indices[0]]", "src_ref[grid_indices[0]]")[1] \
        == ["PAL101", "PAL204"]
    # A tuple of operands (annotated, or indexed by position): unknown, silent.
    for variant in ("def copy_in(self, src_ref: tuple[jax.Ref, jax.Ref], grid_indices):",
                    "def copy_in(self, src_ref, grid_indices):\n            first = src_ref[0]"):
        text = body.replace("def copy_in(self, src_ref, grid_indices):", variant)
        assert codes(text.replace("src_ref.at[grid_indices[0]]", "src_ref[grid_indices[0]]")) \
            == []


def test_buffered_ref_operand_tuple_annotated_with_refs_is_unpacked_into_refs():
    # tpu-inference's overrides take `(kv_ref, page_indices_ref, schedule)`:
    # the items annotated as Refs are Refs; where they live is not said, so
    # reading one (an SMEM table) is not a direct HBM access.
    body = '''
    class Paged(pltpu.BufferedRef):
        def copy_out(self, dst_ref: tuple[jax.Ref, jax.Ref, Schedule], grid_indices):
            kv_out_ref, page_indices_ref, schedule = dst_ref
            slot = self.current_copy_out_slot
            page = page_indices_ref[schedule.first[grid_indices[0]]]
            pltpu.make_async_copy(self.window_ref.at[slot], kv_out_ref.at[page],
                                  self.sem_sends.at[slot]).start()
    '''
    assert _twin(body, "kv_out_ref.at[page]", "kv_out_ref[page]") == ([], ["PAL101"])


def test_augmented_assignment_extends_a_scratch_list_in_each_branch():
    body = f'''
    def kernel(x_hbm, o_ref, acc_ref, zero_ref, sem_ref):
        if zero_ref is not None:
            c = pltpu.make_async_copy(zero_ref, x_hbm, sem_ref.at[0])
            c.start()
            c.wait()

    def launch(x, zero_init):
        scratch_shapes = [pltpu.VMEM((8, 128), jnp.float32)]
        if zero_init:
            scratch_shapes += [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((1,))]
        else:
            scratch_shapes += [None, None]
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=scratch_shapes)(x)
    '''
    assert _twin(body, "sem_ref.at[0])", "sem_ref)") == ([], ["PAL103"])


def test_a_dataclass_of_specs_gives_the_kernel_a_dataclass_of_refs():
    body = f'''
    import dataclasses
    from typing import Any

    @dataclasses.dataclass(frozen=True)
    class WeightsRef:
        weight: Any
        scale: Any | None

    def kernel(x_hbm, rhs_ref, o_ref, buf, sem, *, quantized):
        if quantized:
            rhs_ref = dataclasses.replace(rhs_ref, weight=rhs_ref.weight.bitcast(jnp.uint32))
        c = pltpu.make_async_copy(rhs_ref.weight.at[0], buf, sem)
        c.start()
        c.wait()

    def launch(x, w, quantized):
        spec = WeightsRef(weight=pl.BlockSpec(memory_space=pltpu.HBM), scale=None)
        return pl.pallas_call(functools.partial(kernel, quantized=quantized), out_shape={OUT},
                              in_specs=[{ANY}, spec],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA(())])(x, WeightsRef(w, None))
    '''
    body = body.replace("    import dataclasses", "    import dataclasses\n    import functools")
    assert _twin(body, "rhs_ref.weight.at[0], buf", "rhs_ref.weight[0], buf") \
        == ([], ["PAL101", "PAL204"])


# ---------------------------------------------------------------- lists of copies


def test_copies_made_in_a_comprehension_of_unknown_length_are_checked():
    # One remote copy per peer; `n` is not known, so the list's length is not.
    body = f'''
    def kernel(x_hbm, o_hbm, send_sems, recv_sem, *, n):
        copies = [
            pltpu.make_async_remote_copy(x_hbm, o_hbm.at[d], send_sems.at[d], recv_sem,
                                         device_id=(d,))
            for d in range(n)
        ]
        for c in copies:
            c.start()
        for c in copies:
            c.wait()

    def launch(x, n):
        return pl.pallas_call(
            functools.partial(kernel, n=n), out_shape={OUT},
            in_specs=[{ANY}], out_specs={ANY},
            scratch_shapes=[pltpu.SemaphoreType.DMA((8,)), pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "send_sems.at[d], recv_sem", "send_sems, recv_sem") == ([], ["PAL104"])


def test_copies_added_to_an_attribute_list_are_started_there():
    # `self.copies += [...]` (the optional second list of jax's paged
    # attention): started in another method, so never "unused".
    body = f'''
    class Copies:
        def __init__(self, src, dst, sem, extra):
            self.copies = [pltpu.make_async_copy(src.at[i], dst.at[i], sem) for i in range(2)]
            if extra is not None:
                self.copies += [pltpu.make_async_copy(extra.at[i], dst.at[i], sem)
                                for i in range(2)]

        def start(self):
            for c in self.copies:
                c.start()

        def wait(self):
            for c in self.copies:
                c.wait()

    def kernel(x_hbm, e_hbm, o_ref, buf, sem):
        cp = Copies(x_hbm, buf, sem, e_hbm)
        cp.start()
        cp.wait()
        o_ref[...] = buf[0]

    def launch(x, e):
        return pl.pallas_call(
            kernel, out_shape={OUT}, in_specs=[{ANY}, {ANY}],
            scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x, e)
    '''
    assert codes(body) == []
    assert codes(body.replace("                c.start()\n", "                pass\n")) != []


# ---------------------------------------------------------------- launcher code
# The wrapper around a pallas_call decides how many Refs the kernel gets; each
# construct below used to leave that count unknown, so nothing was checked.


def test_builder_returning_a_partial_of_a_shared_launcher():
    # make_* binds the flags, a shared `common` takes the kernel as a
    # parameter; the user calls the result with the arrays only.
    body = f'''
    def kernel(x_hbm, o_hbm, *refs, lse):
        refs = list(refs)
        buf = refs.pop(0)
        lse_buf = refs.pop(0) if lse else None
        (sems,) = refs
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def common(kern, x, *, return_lse, interpret, **body):
        scratch = [pltpu.VMEM((8, 128), jnp.float32)]
        if return_lse:
            scratch.append(pltpu.VMEM((8, 128), jnp.float32))
        scratch.append(pltpu.SemaphoreType.DMA((2,)))
        return pl.pallas_call(functools.partial(kern, lse=return_lse, **body),
                              in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=scratch, interpret=interpret)(x)

    def forward(x, **body):
        return common(kernel, x, **body)

    def forward_twice(x, **body):
        return common(kernel, x, **body) + common(kernel, x, **body)

    def make_forward(*, twice: bool = False, return_lse: bool = False,
                     interpret: bool = False):
        fwd = forward_twice if twice else forward
        return functools.partial(fwd, return_lse=return_lse, interpret=interpret)
    '''
    assert _twin(body, "buf, sems.at[0])", "buf, sems)") == ([], ["PAL103"])


def test_and_or_decide_a_branch_when_their_operands_are_known():
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, return_lse: bool = False, per_seq: bool = False):
        scratch = [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
        if return_lse and per_seq:
            scratch.append(pltpu.VMEM((8, 128), jnp.float32))
        elif return_lse or per_seq:
            scratch.append(pltpu.VMEM((8, 128), jnp.float32))
        return pl.pallas_call(kernel, in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=scratch)(x)
    '''
    # With a flag on, the kernel's four parameters no longer match: those
    # variants are not bound, the all-defaults one is.
    assert _twin(body, "buf, sems.at[0])", "buf, sems)") == ([], ["PAL103"])


def test_dataclass_field_default_decides_a_branch():
    body = f'''
    @dataclasses.dataclass(frozen=True)
    class Schedule:
        num_rows: int
        q_token: object = None

    def kernel(x_hbm, o_hbm, *refs):
        schedule = Schedule(num_rows=4)
        refs = list(refs)
        bounds = refs.pop(0) if schedule.q_token is not None else None
        buf, sems, extra = refs
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,)),
                                              pltpu.VMEM((8, 128), jnp.float32)])(x)
    '''
    header = HEADER + "import dataclasses\n"
    # Without the default, `bounds` may have taken the first scratch Ref and
    # `buf` would be unknown.
    assert codes(body.replace("x_hbm, buf,", "x_hbm, buf[...],"), header) == ["PAL101"]
    assert codes(body, header) == []


def test_an_instance_is_never_none():
    body = f'''
    class Paged:
        def __init__(self, pages):
            self.pages = pages

    def kernel(x_hbm, o_hbm, buf, sems, *rest):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, y, pages):
        paged = Paged(pages)
        operands = [x] if paged is not None else [x, y]
        return pl.pallas_call(kernel, in_specs=[{ANY}] * len(operands), out_specs={ANY},
                              out_shape={OUT},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(*operands)
    '''
    assert "PAL103" not in codes(body)
    assert codes(body.replace("buf, sems.at[0])", "buf, sems)")) == ["PAL103"]


def test_launcher_loop_over_optional_operands_keeps_the_spec_count():
    body = f'''
    def kernel(x_hbm, a_hbm, b_hbm, o_hbm, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, a=None, b=None):
        operands = (x,)
        in_specs = ({ANY},)
        for extra in (a, b):
            if extra is None:
                in_specs += (None,)
            else:
                in_specs += ({ANY},)
            operands += (extra,)
        return pl.pallas_call(kernel, in_specs=in_specs, out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(*operands)
    '''
    assert "PAL103" not in codes(body)
    assert codes(body.replace("buf, sems.at[0])", "buf, sems)")) == ["PAL103"]
    # A loop that may stop early is not run item by item: how many inputs
    # there are is unknown past the first. The signature (no `*args`, no
    # defaults) still binds the outputs and scratch from the back, as any
    # call JAX traces must: the whole `sems` is still a whole array.
    early = body.replace("            operands += (extra,)\n",
                         "            operands += (extra,)\n            if extra is None:\n"
                         "                break\n")
    assert codes(early) == []
    assert codes(early.replace("buf, sems.at[0])", "buf, sems)")) == ["PAL103"]
    # ... but nothing is claimed of the inputs after the first (a may be None)
    assert codes(early.replace("make_async_copy(x_hbm, buf, sems.at[0])",
                               "make_async_copy(b_hbm, buf, sems.at[0])")) == []


def test_scratch_list_of_unknown_length_binds_its_first_entries():
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems, *rest):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, n):
        scratch = [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
        scratch += [pltpu.VMEM((8, 128), jnp.float32) for _ in range(n)]
        return pl.pallas_call(kernel, in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=scratch)(x)
    '''
    assert "PAL103" not in codes(body)
    assert codes(body.replace("buf, sems.at[0])", "buf, sems)")) == ["PAL103"]


def test_public_launcher_whose_pallas_call_is_in_a_shared_helper():
    # `flash` has the flags; the pallas_call is in `common`, which takes the
    # kernel as a parameter. `flash` is run with its flag settings too.
    body = f'''
    def kernel(x_hbm, o_hbm, *refs):
        buf, sems = refs[0], refs[-1]
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def common(kern, x, *, return_lse):
        scratch = [pltpu.VMEM((8, 128), jnp.float32)]
        if return_lse:
            scratch.append(pltpu.VMEM((8, 128), jnp.float32))
        scratch.append(pltpu.SemaphoreType.DMA((2,)))
        return pl.pallas_call(kern, in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=scratch)(x)

    def flash(x, return_lse: bool = False):
        return common(kernel, x, return_lse=return_lse)
    '''
    assert _twin(body, "buf, sems.at[0])", "buf[...], sems.at[0])") == ([], ["PAL101"])


def test_scratch_from_a_table_keyed_by_an_enum_and_counted_with_int():
    # tokamax's fused MoE: the format's record comes from a dict keyed by
    # enum members (`FORMS[Format(fmt)]`), optional buffers are spliced in
    # with `*weights`, and the operand count adds `int(flag)`.
    body = f'''
    class Format(str, enum.Enum):
        FP8 = "fp8"
        FP4 = "fp4"

    class Form(typing.NamedTuple):
        name: Format
        scale_layout: str

        @property
        def has_scales(self):
            return self.scale_layout != "none"

    FORMS = {{Format.FP8: Form(Format.FP8, "per_channel"), Format.FP4: Form(Format.FP4, "none")}}

    def buffers(n, fmt):
        form = FORMS[Format(fmt)]
        weights = [(n, 128)]
        if form.has_scales:
            weights += [(n, 8)]
        return [(2, 128), *weights]

    def build(n, *, fmt=Format.FP8, has_bias=False):
        form = FORMS[Format(fmt)]
        n_inputs = 1 + int(form.has_scales) + int(has_bias)

        def kernel(*refs):
            x_hbm, o_hbm, lhs = refs[0], refs[n_inputs], refs[n_inputs + 1]
            sems = refs[-1]
            c = pltpu.make_async_copy(x_hbm, lhs, sems.at[0])
            c.start()
            c.wait()

        scratch = [pltpu.VMEM(s, jnp.float32) for s in buffers(n, fmt)]
        scratch += [pltpu.SemaphoreType.DMA((2,))]
        return pl.pallas_call(kernel, in_specs=[{ANY}] * n_inputs, out_specs={ANY},
                              out_shape={OUT}, scratch_shapes=scratch)
    '''
    header = HEADER + "import enum\nimport typing\n"
    assert codes(body, header) == []
    assert "PAL101" in codes(body.replace("x_hbm, lhs, sems", "x_hbm[...], lhs, sems"), header)


def test_core_map_wrapper_that_makes_refs_with_new_ref():
    # tpu-inference's SparseCore helper: a drop-in `kernel(body, out_type=,
    # scratch_types={...})` that wraps the operands with `new_ref` (through
    # tree_map), checks `isinstance(out_type, (tuple, list))`, and calls the
    # body with operands, outputs and scratch by keyword.
    body = f'''
    def _empty_out_ref(out_type):
        return jax.new_ref(jnp.empty(out_type.shape, out_type.dtype))

    def kernel_via_core_map(body, *, out_type, mesh, scratch_types=()):
        single_output = not isinstance(out_type, (tuple, list))
        out_types = (out_type,) if single_output else out_type

        @jax.jit
        def run(*operands):
            arg_refs = jax.tree_util.tree_map(jax.new_ref, operands)
            out_refs = jax.tree_util.tree_map(_empty_out_ref, out_types)

            @pl.core_map(mesh, scratch_shapes=scratch_types)
            def _(*scratch_refs, **scratch_kwrefs):
                return body(*arg_refs, *out_refs, *scratch_refs, **scratch_kwrefs)

            return out_refs[0][...] if single_output else out_refs
        return run

    def main_kernel(x_hbm, idx_hbm, out_hbm, buf, sem_ref):
        c = pltpu.make_async_copy(x_hbm.at[0], buf, sem_ref.at[0])
        c.start()
        c.wait()

    def scatter(x, idx, mesh):
        x = jnp.asarray(x, jnp.float32)
        idx = jnp.asarray(idx, jnp.int32)
        return kernel_via_core_map(
            main_kernel, out_type={OUT}, mesh=mesh,
            scratch_types=dict(buf=pltpu.VMEM((128,), jnp.float32),
                               sem_ref=pltpu.SemaphoreType.DMA((2,))))(x, idx)
    '''
    assert codes(body) == []
    assert "PAL101" in codes(body.replace("(x_hbm.at[0], buf", "(x_hbm[0], buf"))
    assert codes(body.replace("buf, sem_ref.at[0])", "buf, sem_ref)")) == ["PAL103"]


def test_when_given_a_descriptor_method_starts_it():
    # flywheel: `pl.when(is_read)(copy.start)` starts the copy when the
    # condition holds; JAX checks the copy's arguments there.
    body = f'''
    def copies(x_hbm, buf, sem, n):
        return [(i > 0, pltpu.make_async_copy(x_hbm.at[i], buf.at[i], sem)) for i in range(n)]

    def kernel(x_hbm, o_hbm, buf, sem):
        for ok, c in copies(x_hbm, buf, sem, 2):
            pl.when(ok)(c.start)
        for ok, c in copies(x_hbm, buf, sem, 2):
            pl.when(ok)(c.wait)

    def launch(x):
        return pl.pallas_call(kernel, in_specs=[{ANY}], out_specs={ANY}, out_shape={OUT},
                              scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    assert codes(body) == []
    assert "PAL101" in codes(body.replace("buf.at[i], sem)", "buf[i], sem)"))


def test_one_launch_site_runs_each_config_object_it_is_given():
    # flywheel's GDN: `_call_kernel(mode)` builds `cfg = Config(mode=mode)` and
    # launches `partial(outer_kernel, cfg=cfg)`; the second mode takes the
    # kernel's other branch, which must be run too.
    body = f'''
    @dataclasses.dataclass(frozen=True)
    class Config:
        mode: str

    def kernel(x_hbm, o_hbm, buf, sems, *, cfg):
        if cfg.mode == "per_seq":
            c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
            c.start()
            c.wait()

    def launch(x):
        def call(y, mode):
            cfg = Config(mode=mode)
            return pl.pallas_call(functools.partial(kernel, cfg=cfg), in_specs=[{ANY}],
                                  out_specs={ANY}, out_shape={OUT},
                                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                                  pltpu.SemaphoreType.DMA((2,))])(y)
        return call(call(x, "batched"), "per_seq")
    '''
    header = HEADER + "import dataclasses\n"
    assert codes(body, header) == []
    assert codes(body.replace("buf, sems.at[0])", "buf, sems)"), header) == ["PAL103"]


# ---------------------------------------------------------------- unpacking by flags and pytrees


def test_a_local_flag_of_the_launcher_keeps_scratch_and_unpacking_in_step():
    # tokamax's fused MoE: `push = rows <= cap` (unknown) picks the semaphore
    # list and, inside the kernel, which semaphores are unpacked.
    body = f'''
    def build(x, cap):
        push = x.shape[0] <= cap

        def kernel(*refs):
            it = iter(refs)
            x_hbm = next(it)
            o_hbm = next(it)
            buf = next(it)
            if push:
                recv_sem, send_sems = (next(it) for _ in range(2))
                c = pltpu.make_async_copy(x_hbm, buf, recv_sem)
            else:
                commit_sems, send_sem, recv_sem = (next(it) for _ in range(3))
                c = pltpu.make_async_copy(x_hbm, buf, commit_sems.at[0])
            c.start()
            c.wait()

        sems = ([pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA((2,))] if push else
                [pltpu.SemaphoreType.DMA((2,)), pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA])
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)] + sems)(x)
    '''
    assert _twin(body, "commit_sems.at[0])", "commit_sems)") == ([], ["PAL103"])
    assert _twin(body, "buf, recv_sem)", "buf, send_sems)") == ([], ["PAL103"])


def test_an_optional_next_leaves_the_iterator_at_one_of_two_places():
    body = f'''
    def kernel(*refs, extra):
        it = iter(refs)
        x_hbm = next(it)
        o_hbm = next(it)
        first = next(it) if extra else None
        buf = next(it)
        sems = next(it)
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, cfg):
        return pl.pallas_call(functools.partial(kernel, extra=cfg.extra), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    # `buf` is one of the two VMEM buffers either way: a Ref.
    assert _twin(body, "x_hbm, buf, sems", "x_hbm, buf[...], sems") == ([], ["PAL101"])


def test_buffered_ref_operand_unpacked_into_names_of_refs():
    # tokamax's overrides: `cache_ref, positions_ref = src_ref`, or
    # `q_hbm = src_ref[0]`, with no annotation.
    body = '''
    class CosSin(pltpu.BufferedRef):
        def copy_in(self, src_ref, grid_indices):
            cache_ref, positions_ref, stride = src_ref
            slot = self.current_copy_in_slot
            pos = positions_ref[grid_indices[0]] * stride
            pltpu.make_async_copy(cache_ref.at[pos], self.window_ref.at[slot],
                                  self.sem_recvs.at[slot]).start()
    '''
    assert _twin(body, "cache_ref.at[pos]", "cache_ref[pos]") == ([], ["PAL101"])
    by_index = body.replace("cache_ref, positions_ref, stride = src_ref",
                            "cache_ref = src_ref[0]\n            positions_ref = src_ref[1]\n"
                            "            stride = src_ref[2]")
    assert _twin(by_index, "cache_ref.at[pos]", "cache_ref[pos]") == ([], ["PAL101"])
    # `stride` is not named or used as a Ref: nothing is claimed about it.
    assert codes(body.replace("* stride", "* stride[0]")) == []
    # Unpacked with another length in another branch (per mode): each is right.
    two_ways = body.replace(
        "            cache_ref, positions_ref, stride = src_ref\n",
        "            if self.mode:\n"
        "                cache_ref, positions_ref, stride = src_ref\n"
        "            else:\n"
        "                cache_ref, positions_ref = src_ref\n"
        "                stride = 1\n")
    assert two_ways != body
    assert _twin(two_ways, "cache_ref.at[pos]", "cache_ref[pos]") == ([], ["PAL101"])


def test_pipeline_body_decorated_with_a_partial_of_emit_pipeline():
    # The kernel function comes first in the file (it is run on its own
    # before its launch is seen): its pipeline must still run when launched.
    body = f'''
    def kernel(x_hbm, o_hbm, sems):
        @functools.partial(pltpu.emit_pipeline, grid=(4,),
                           in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))], out_specs=[])
        def body(x_blk, sem):
            c = pltpu.make_async_copy(x_blk, o_hbm, sem.at[0])
            c.start()
            c.wait()

        body(x_hbm, scratches=(sems,))

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sem.at[0])", "sem)") == ([], ["PAL103"])


def test_pipeline_specs_of_unknown_number_give_a_star_body_its_blocks():
    body = f'''
    def kernel(x_hbm, o_hbm, sem, *, n):
        specs = tuple(pl.BlockSpec((8, 128), lambda i, s=s: (i, s)) for s in range(n))

        def body(*refs):
            blocks = refs[:n]
            c = pltpu.make_async_copy(blocks[0], o_hbm, sem)
            c.start()
            c.wait()

        pltpu.emit_pipeline(body, grid=(4,), in_specs=specs, out_specs=())(*([x_hbm] * n))

    def launch(x, cfg):
        return pl.pallas_call(functools.partial(kernel, n=cfg.n), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "(blocks[0], o_hbm", "(blocks[0][...], o_hbm") == ([], ["PAL101"])


def test_tree_leaves_of_a_dataclass_pytree_of_refs():
    # tpu-inference's schedules: a registered dataclass of Refs (with static
    # configuration fields) as output and scratch, copied leaf by leaf.
    body = f'''
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Schedule:
        cells: object
        steps: object
        size: int = dataclasses.field(metadata=dict(static=True))

    def kernel(x_ref, out: Schedule, scratch: Schedule, sems):
        for hbm, smem in zip(jax.tree_util.tree_leaves(out), jax.tree.leaves(scratch)):
            c = pltpu.make_async_copy(smem, hbm, sems.at[0])
            c.start()
            c.wait()

    def launch(x):
        shapes = Schedule(cells=jax.ShapeDtypeStruct((64,), jnp.int32),
                          steps=jax.ShapeDtypeStruct((8,), jnp.int32), size=64)
        return pl.pallas_call(
            kernel, out_shape=shapes, in_specs=[{ANY}],
            out_specs=jax.tree.map(lambda _: pl.BlockSpec(memory_space=pltpu.ANY), shapes),
            scratch_shapes=[jax.tree.map(lambda s: pltpu.SMEM(s.shape, s.dtype), shapes),
                            pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "(smem, hbm,", "(smem[...], hbm,") == ([], ["PAL101"])
    assert _twin(body, "sems.at[0])", "sems)") == ([], ["PAL103"])
    flattened = body.replace("jax.tree.leaves(scratch)", "jax.tree_util.tree_flatten(scratch)[0]")
    assert _twin(flattened, "(smem, hbm,", "(smem[...], hbm,") == ([], ["PAL101"])


def test_pl_kernel_input_dataclass_arrives_as_a_dataclass_of_refs():
    # maxtext's SparseCore kernels take `inputs: _Inputs` (a registered
    # dataclass of arrays) and `scratch: _Scratch` (one of allocations).
    body = '''
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Inputs:
        rows: object
        x: object

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Scratch:
        buf: object
        sem: object

    def kernel(inputs: Inputs, out_ref, scratch: Scratch):
        c = pltpu.make_async_copy(inputs.x.at[pl.ds(0, 8)], scratch.buf, scratch.sem.at[0])
        c.start()
        c.wait()

    def launch(rows, x, mesh):
        return pl.kernel(
            kernel, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=mesh,
            scratch_types=(Scratch(buf=pltpu.VMEM((8, 128), jnp.float32),
                                   sem=pltpu.SemaphoreType.DMA((2,))),),
        )(Inputs(rows=rows, x=x))
    '''
    assert _twin(body, "inputs.x.at[pl.ds(0, 8)]", "inputs.x[pl.ds(0, 8)]") == ([], ["PAL101"])


def test_star_pipeline_body_takes_its_scratches_from_the_back():
    # maxtext: `def row_pipeline(*args)` over `tuple(specs) * 2` blocks, its
    # scratches unpacked with `args[-3:]`.
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems, *, n):
        specs = tuple(pl.BlockSpec((8, 128), lambda i, s=s: (i, s)) for s in range(n)) * 2

        def body(*args):
            blocks = args[:n]
            stage, out_buf, sem = args[-3:]
            c = pltpu.make_async_copy(stage, o_hbm, sem.at[0])
            c.start()
            c.wait()

        pltpu.emit_pipeline(body, grid=(4,), in_specs=specs, out_specs=())(
            *([x_hbm] * (2 * n)), scratches=(buf, buf, sems))

    def launch(x, cfg):
        return pl.pallas_call(functools.partial(kernel, n=cfg.n), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "(stage, o_hbm", "(stage[...], o_hbm") == ([], ["PAL101"])
    assert _twin(body, "sem.at[0])", "sem)") == ([], ["PAL103"])


def test_scratch_dict_binds_positional_parameters_by_name():
    # tpu-inference's GDN: `scratch_shapes=cfg.get_scratch_shape_dict()` whose
    # keys name the kernel's last positional parameters.
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=dict(buf=pltpu.VMEM((8, 128), jnp.float32),
                                                  sems=pltpu.SemaphoreType.DMA((2,))))(x)
    '''
    assert _twin(body, "sems.at[0])", "sems)") == ([], ["PAL103"])


def test_pipeline_body_gets_one_argument_per_top_level_spec():
    # A nested spec item arrives as a tuple of blocks (jax maps the spec
    # pytree per operand), and an unknown item is one argument too.
    body = f'''
    def kernel(x_hbm, y_hbm, o_hbm, sem, *, spec_of):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))

        def body(pair, other, sem):
            a, b = pair
            c = pltpu.make_async_copy(a, o_hbm, sem)
            c.start()
            c.wait()

        pltpu.emit_pipeline(body, grid=(4,), in_specs=[(spec, spec), spec_of(spec)],
                            out_specs=())((x_hbm, y_hbm), x_hbm, scratches=(sem,))

    def launch(x, y, f):
        return pl.pallas_call(functools.partial(kernel, spec_of=f), out_shape={OUT},
                              in_specs=[{ANY}, {ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.SemaphoreType.DMA])(x, y)
    '''
    assert _twin(body, "(a, o_hbm", "(a[...], o_hbm") == ([], ["PAL101"])


def test_an_optional_operand_of_the_launcher_is_analysed_given_and_absent():
    # `bias=None`: the defaults run has no bias; a variant passes one, so the
    # spec list and the kernel's unpacking agree on both sides.
    body = f'''
    def kernel(*refs, has_bias):
        if has_bias:
            x_hbm, b_hbm, o_hbm, buf, sems = refs
            c = pltpu.make_async_copy(b_hbm, buf, sems.at[1])
            c.start()
            c.wait()
        else:
            x_hbm, o_hbm, buf, sems = refs
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, bias=None):
        operands, in_specs = [x], [{ANY}]
        if bias is not None:
            operands.append(bias)
            in_specs.append({ANY})
        return pl.pallas_call(
            functools.partial(kernel, has_bias=bias is not None), out_shape={OUT},
            in_specs=in_specs, out_specs={ANY},
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA((2,))])(*operands)
    '''
    assert _twin(body, "sems.at[1])", "sems)") == ([], ["PAL103"])
    assert _twin(body, "(x_hbm, buf, sems.at[0])", "(x_hbm, buf, sems)") == ([], ["PAL103"])


def test_match_statement_cases_are_branches():
    # Each case is one branch (a known subject picks one): the copy made in
    # one case and started after the match is started, not "unused".
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems, *, mode):
        match mode:
            case "a" | "b":
                c = pltpu.make_async_copy(x_hbm, buf, sems.at[1])
            case _:
                c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, mode):
        return pl.pallas_call(functools.partial(kernel, mode=mode), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sems.at[1])", "sems)") == ([], ["PAL103"])
    # A known subject runs its case only.
    known = body.replace("mode=mode)", 'mode="c")')
    assert _twin(known, "sems.at[1])", "sems)") == ([], [])
    assert _twin(known, "sems.at[0])", "sems)") == ([], ["PAL103"])


def test_an_instance_with_call_is_a_kernel():
    body = f'''
    class Kernel:
        def __init__(self, slot):
            self.slot = slot

        def __call__(self, x_hbm, o_hbm, buf, sems):
            c = pltpu.make_async_copy(x_hbm, buf, sems.at[self.slot])
            c.start()
            c.wait()

    def launch(x):
        return pl.pallas_call(Kernel(1), out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sems.at[self.slot])", "sems)") == ([], ["PAL103"])


def test_lax_cond_branch_may_be_a_bound_start():
    # `lax.cond(p, copy.start, lambda: None)`: the copy is started (it was
    # reported as waited without a start).
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        jax.lax.cond(pl.program_id(0) == 0, c.start, lambda: None)
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              grid=(2,), scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                                         pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sems.at[0])", "sems)") == ([], ["PAL103"])


def test_descriptors_kept_in_a_dict():
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems):
        copies = {{}}
        for k in range(2):
            copies[k] = pltpu.make_async_copy(x_hbm, buf, sems.at[k])
        for k in range(2):
            copies[k].start()
        for k in range(2):
            copies[k].wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "sems.at[k])", "sems)") == ([], ["PAL103"])


def test_method_of_a_class_never_instantiated_here_launches_its_kernel():
    # `pl.pallas_call(self._kernel, ...)` in a method: run on its own, the
    # method gets an instance of its class, so `self._kernel` is known.
    body = f'''
    class Op:
        def __init__(self, slot):
            self.slot = slot

        def _kernel(self, x_hbm, o_hbm, buf, sems):
            parts = getattr(self, "_parts")(buf, sems)
            c = pltpu.make_async_copy(x_hbm, parts[0], parts[1].at[0])
            c.start()
            c.wait()

        def _parts(self, buf, sems):
            return buf, sems

        def __call__(self, x):
            return pl.pallas_call(self._kernel, out_shape={OUT}, in_specs=[{ANY}],
                                  out_specs={ANY},
                                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                                  pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "parts[1].at[0])", "parts[1])") == ([], ["PAL103"])


def test_refs_named_with_dict_of_zip_and_a_classmethod_launcher():
    body = f'''
    NAMES = ("x", "o", "buf", "sems")

    class Op:
        @staticmethod
        def _kernel(*refs):
            r = dict(zip(NAMES, refs))
            c = pltpu.make_async_copy(r["x"], r["buf"], r["sems"].at[0])
            c.start()
            c.wait()

        @classmethod
        def launch(cls, x):
            return pl.pallas_call(cls._kernel, out_shape={OUT}, in_specs=[{ANY}],
                                  out_specs={ANY},
                                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                                  pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, 'r["sems"].at[0])', 'r["sems"])') == ([], ["PAL103"])


def test_options_and_filled_in_defaults_are_not_optional_operands():
    # `soft_cap: float | None = None` is an option and `offset=None` is
    # filled in right away: neither doubles the launcher's runs. `bias=None`
    # (unannotated, tested) does.
    body = f'''
    def kernel(x_hbm, o_hbm, buf, sems, *, soft_cap):
        c = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()

    def launch(x, offset=None, soft_cap: float | None = None):
        if offset is None:
            offset = jnp.zeros((1,), jnp.int32)
        cap = 0.0 if soft_cap is None else soft_cap
        return pl.pallas_call(functools.partial(kernel, soft_cap=cap), out_shape={OUT},
                              in_specs=[{ANY}], out_specs={ANY},
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert len(run(body)[0].kernels) == 1
    with_bias = body.replace("offset=None,", "offset=None, bias=None,").replace(
        "cap = 0.0", "x = x if bias is None else x + bias\n        cap = 0.0")
    assert len(run(with_bias)[0].kernels) == 3  # run on its own, bias absent, bias given


# ------------------------------------------------- constructs of unseen libraries


def test_launcher_branch_that_raises_does_not_merge_into_the_launch():
    # Only the `if` side reaches pallas_call: the scratch list has its entry.
    body = f'''
    def kernel(x_hbm, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_hbm, buf, sem)
        c.start()
        c.wait()

    def launch(x, n, m):
        scratch = [pltpu.VMEM((8, 128), jnp.float32)]
        if n != m:
            scratch += [pltpu.SemaphoreType.DMA((2,))]
        else:
            raise ValueError("unsupported")
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=scratch)(x)
    '''
    assert _twin(body, "buf, sem)", "buf, sem.at[0])") == (["PAL103"], [])


def test_branch_that_asserts_false_is_dead_code():
    # `assert False` marks the branch as unfinished: its kernel name need
    # not even exist, and the other branch's kernel is the one that runs.
    body = f'''
    def _impl(i, x_hbm, o_ref, buf, sems, *, block, seq):
        c = pltpu.make_async_copy(x_hbm, buf, sems)
        c.start()
        c.wait()

    def kernel(x_hbm, *refs, **options):
        if options["block"] == options["seq"]:
            assert False, "not written yet"
            body = _impl_single_step
        else:
            body = _impl
        for i in range(2):
            body(i, x_hbm, *refs, **options)

    def launch(x, block, seq):
        return pl.pallas_call(
            functools.partial(kernel, block=block, seq=seq), out_shape={OUT}, in_specs=[{ANY}],
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "buf, sems)", "buf, sems.at[1])") == (["PAL103"], [])
    # A failing assertion on a path the engine decided goes on, as `raise` does
    # (under a name that says nothing of how many: a bare `sems` is read as several).
    decided = body.replace('options["block"] == options["seq"]', "True").replace("sems", "sem_pool")
    assert codes(decided) == []


def test_optional_callback_is_run_where_it_is_called():
    # `hook if cond else None` handed to a helper that calls it: the call is
    # the hook's (the None side could never be called), with its arguments.
    body = f'''
    def tile(buf, sems, on_flush):
        buf[...] = buf[...] * 2
        on_flush(sems)

    def kernel(x_hbm, o_ref, buf, sems, *, mode):
        def flush(sem):
            c = pltpu.make_async_copy(x_hbm, buf, sem)
            c.start()
            c.wait()
        tile(buf, sems, flush if mode == "replay" else None)

    def launch(x, mode):
        return pl.pallas_call(
            functools.partial(kernel, mode=mode), out_shape={OUT}, in_specs=[{ANY}],
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    assert _twin(body, "on_flush(sems)", "on_flush(sems.at[1])") == (["PAL103"], [])
    # Tested against None first, it stays undecided.
    guarded = body.replace("        on_flush(sems)", "        if on_flush is not None:\n"
                           "            on_flush(sems)")
    assert codes(guarded) == ["PAL103"]


def test_branch_that_returns_early_leaves_the_other_side_after_the_if():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sems):
        c = pltpu.make_async_copy(x_hbm, buf, sems)
        c.start()
        c.wait()

    def launch(x, fast):
        sems = pltpu.SemaphoreType.DMA((2,))
        if fast:
            sems = [pltpu.SemaphoreType.REGULAR]
            return x
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), sems])(x)
    '''
    assert _twin(body, "buf, sems)", "buf, sems.at[1])") == (["PAL103"], [])


def test_kernel_given_to_pallas_call_by_keyword():
    for keyword in ("kernel", "f"):
        body = f'''
        def body(x_hbm, o_ref, buf, sem):
            c = pltpu.make_async_copy(x_hbm, buf[...], sem)
            c.start()
            c.wait()

        def launch(x):
            return pl.pallas_call(
                {keyword}=body, out_shape={OUT}, in_specs=[{ANY}],
                scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x)
        '''
        assert _twin(body, "buf[...], sem)", "buf, sem)") == (["PAL101"], []), keyword


def test_partial_fori_loop_decorator_runs_its_body():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sem):
        @functools.partial(lax.fori_loop, 0, 4, init_val=None)
        def step(i, carry):
            c = pltpu.make_async_copy(x_hbm.at[i], buf[...], sem)
            c.start()
            c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    a = analyze(HEADER + "from jax import lax\n" + body.replace("\n    ", "\n"), "k.py",
                coverage=True)
    assert [f.code for f in a.findings] == ["PAL101"]
    assert all(s.known for s in a.coverage.sites if s.kind == "dma")


# A registered dataclass pytree of two tables (indented like the bodies).
TABLES = """
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Tables:
        lo: jax.Array
        hi: jax.Array
"""


def test_run_scoped_allocations_given_as_a_dataclass_pytree():
    body = f'''{TABLES}
    def kernel(lo_hbm, hi_hbm, o_ref, sem):
        def body(tables):
            for h, s in zip((lo_hbm, hi_hbm), jax.tree.leaves(tables)):
                c = pltpu.make_async_copy(h.at[pl.ds(0, 64)], s[pl.ds(0, 64)], sem)
                c.start()
                c.wait()
        pltpu.run_scoped(body, Tables(pltpu.SMEM((64,), jnp.int32), pltpu.SMEM((128,), jnp.int32)))

    def launch(lo, hi):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}, {ANY}],
                              scratch_shapes=[pltpu.SemaphoreType.DMA])(lo, hi)
    '''
    assert _twin(body, "s[pl.ds(0, 64)], sem)",
                 "s.at[pl.ds(0, 64)], sem)") == (["PAL101"], [])


def test_operand_made_by_another_pallas_call_keeps_its_dataclass_structure():
    # The first pallas_call's result is a Tables of arrays; its method maps the
    # fields to HBM BlockSpecs, and the second kernel gets a Tables of Refs.
    body = f'''{TABLES}
        def specs(self):
            return jax.tree.map(lambda _: pl.BlockSpec(memory_space=pltpu.ANY), self)

    def make(o_lo, o_hi):
        pass

    def use(tables, o_ref, lo_smem, sem):
        c = pltpu.make_async_copy(tables.lo[pl.ds(0, 64)], lo_smem, sem)
        c.start()
        c.wait()

    def launch():
        shapes = Tables(jax.ShapeDtypeStruct((64,), jnp.int32), jax.ShapeDtypeStruct((128,), jnp.int32))
        tables = pl.pallas_call(make, out_shape=shapes, out_specs=shapes.specs())()
        return pl.pallas_call(use, in_specs=[tables.specs()], out_shape={OUT},
                              scratch_shapes=[pltpu.SMEM((64,), jnp.int32),
                                              pltpu.SemaphoreType.DMA])(tables)
    '''
    bug, fix = _twin(body, "tables.lo[pl.ds(0, 64)]",
                     "tables.lo.at[pl.ds(0, 64)]")
    assert "PAL101" in bug and fix == []


@pytest.mark.parametrize("guard", ["scales is not None",
                                   "x_hbm is not None and scales is not None"])
def test_a_none_scratch_entry_is_none_in_the_kernel(guard):
    # JAX passes None for it (an empty pytree), so the guarded copy is dead
    # code; `unknown and False` is false on every path as well.
    body = f'''
    def kernel(x_hbm, o_ref, buf, scales, sem):
        if {guard}:
            pltpu.make_async_copy(x_hbm, scales[...], sem).start()
        c = pltpu.make_async_copy(x_hbm, buf, sem)
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), None,
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    a = analyze(HEADER + body.replace("\n    ", "\n"), "k.py", coverage=True)
    dead = [s for s in a.coverage.sites if s.kind == "dma" and not s.known]
    assert a.findings == [] and len(dead) == 1 and not dead[0].reached


def test_code_after_a_return_is_not_traced_by_jax_and_not_judged():
    # JAX never traces what follows `return`: a bug there is no bug.
    body = f'''
    def copy(src, dst, sem, skip):
        if skip:
            return None
        c = pltpu.make_async_copy(src, dst[...], sem)
        c.start()
        return c

    def kernel(x_hbm, o_ref, buf, sem):
        copy(x_hbm, buf, sem, skip=True)
        c = pltpu.make_async_copy(x_hbm, buf, sem)
        c.start()
        c.wait()
        return
        pltpu.make_async_copy(x_hbm, buf[...], sem).start()

    def launch(x):
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    assert codes(body) == []
    assert codes(body.replace("skip=True", "skip=False")) == ["PAL101"]


def test_partial_of_an_allocation_called_later_makes_the_allocation():
    body = f'''
    def kernel(x_hbm, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_hbm, buf[...], sem)
        c.start()
        c.wait()

    def launch(x):
        f32 = functools.partial(pltpu.VMEM, dtype=jnp.float32)
        shape = functools.partial(jax.ShapeDtypeStruct, dtype=jnp.float32)
        return pl.pallas_call(kernel, out_shape=shape((8, 128)), in_specs=[{ANY}],
                              scratch_shapes=[f32((8, 128)), pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "buf[...], sem)", "buf, sem)") == (["PAL101"], [])


def test_block_spec_chosen_by_a_test_the_engine_cannot_decide_is_still_a_ref():
    body = f'''
    def kernel(table, o_ref, smem, sem):
        c = pltpu.make_async_copy(table[pl.ds(0, 64)], smem.at[pl.ds(0, 64)], sem)
        c.start()
        c.wait()

    def launch(x):
        if x.size == 1:
            spec = pl.BlockSpec(memory_space=pltpu.SMEM)
        else:
            spec = pl.BlockSpec(memory_space=pltpu.ANY)
        return pl.pallas_call(kernel, in_specs=[spec], out_shape={OUT},
                              scratch_shapes=[pltpu.SMEM((64,), jnp.int32),
                                              pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "table[pl.ds(0, 64)]", "table.at[pl.ds(0, 64)]") == (["PAL101"], [])


def test_launch_bound_by_a_caller_defined_above_the_launcher():
    # Run on its own, the launcher cannot count its outputs (a flag adds two);
    # the caller above it passes the flag, and that run binds the kernel.
    body = f'''
    def with_stats(x):
        return launch(x, True)

    def kernel(x_ref, o_ref, lo_ref, hi_ref, sem):
        pltpu.make_async_copy(x_ref, lo_ref[...], sem).start()

    def launch(x, stats):
        specs = [pl.BlockSpec((8, 128), lambda: (0, 0))]
        shapes = [{OUT}]
        if stats:
            specs = [*specs, {ANY}, {ANY}]
            shapes = [*shapes, {OUT}, {OUT}]
        return pl.pallas_call(kernel, out_shape=shapes, out_specs=specs, in_specs=[{ANY}],
                              scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
    '''
    assert "PAL101" in codes(body)


def test_subclass_of_block_spec_with_its_own_init():
    body = f'''
    class Spec(pl.BlockSpec):
        def __init__(self, index_map, block_shape):
            super().__init__(block_shape=block_shape, index_map=index_map)

    class Plain(pl.BlockSpec):
        pass

    def kernel(x_ref, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_ref, o_ref[...], sem)
        c.start()
        c.wait()

    def launch(x):
        return pl.pallas_call(
            kernel, grid=(4,), in_specs=[Spec(lambda i: (i, 0), (8, 128))],
            out_specs=Plain((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])(x)
    '''
    assert _twin(body, "o_ref[...], sem)", "o_ref, sem)") == (["PAL101"], [])


def test_spec_list_repeated_with_the_count_first():
    # `1 * [spec] + 2 * [spec]`: the count on the left repeats the list too.
    body = f'''
    def kernel(x_hbm, a_smem, b_smem, o_ref, sems):
        c = pltpu.make_async_copy(x_hbm.at[pl.ds(a_smem[0], 8)], o_ref, sems.at[0])
        c.start()
        c.wait()

    def launch(x, a, b):
        return pl.pallas_call(
            kernel, out_shape={OUT},
            in_specs=1 * [{ANY}] + 2 * [pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs={ANY}, scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x, a, b)
    '''
    assert _twin(body, "x_hbm.at[pl.ds(a_smem[0], 8)]", "x_hbm[pl.ds(a_smem[0], 8)]") \
        == ([], ["PAL101", "PAL204"])
    assert _twin(body, "sems.at[0])", "sems)") == ([], ["PAL103"])


def test_operands_made_refs_with_a_tree_map_and_captured_by_the_kernel(monkeypatch):
    # `jax.tree.map(jax.new_ref, (x, out))` over operands written out in a
    # tuple: each is a Ref in HBM, which the kernel body closes over.
    body = '''
    def gather(x, n):
        out = jnp.zeros((8, 128), x.dtype)
        x_ref, o_ref = jax.tree.map(jax.new_ref, (x, out))

        @pl.kernel(out_shape=(), mesh=pltpu.create_tensorcore_mesh("core"),
                   scratch_shapes=(pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))))
        def kernel(buf, sems):
            pltpu.async_copy(x_ref.at[pl.ds(n, 8)], buf, sems.at[0]).wait()
            pltpu.async_copy(buf, o_ref, sems.at[1]).wait()

        kernel()
        return o_ref[...]
    '''
    assert _twin(body, "x_ref.at[pl.ds(n, 8)]", "x_ref[pl.ds(n, 8)]") == ([], ["PAL101", "PAL204"])
    assert _twin(body, "sems.at[0]).wait()", "sems).wait()") == ([], ["PAL103"])
    # A tree handed over whole may be a subtree of Refs: the engine makes no
    # claim about it. The syntax floor does, from the text alone: no list,
    # tuple or dict of Refs takes a `pl.ds(...)` index, so `x_ref[pl.ds(n, 8)]`
    # is a read of a Ref whenever the line runs at all.
    whole = body.replace("jax.tree.map(jax.new_ref, (x, out))", "jax.tree.map(jax.new_ref, x), None")
    read = whole.replace("x_ref.at[pl.ds(n, 8)]", "x_ref[pl.ds(n, 8)]")
    assert codes(read) == ["PAL101"]
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")
    assert codes(read) == []


@pytest.mark.parametrize("count", ["2", "n"])
@pytest.mark.parametrize("sem", ["pltpu.SemaphoreType.DMA((2,))", "pltpu.SemaphoreType.DMA"])
def test_scratch_dict_keys_built_with_f_strings(count, sem):
    # `scratch[f"send_{i}"]`: with `i` known the key is known; with `i`
    # unknown, the entries whose keys start with "send_" are all semaphores.
    # A bare semaphore kind stored in the dict is one semaphore.
    body = f'''
    def specs():
        s = {{"buf": pltpu.VMEM((8, 128), jnp.float32)}}
        for i in range(2):
            s[f"send_{{i}}"] = {sem}
        return s

    def kernel(x_hbm, o_ref, scratch, *, n):
        for i in range({count}):
            c = pltpu.make_async_copy(x_hbm, scratch["buf"], scratch[f"send_{{i}}"].at[0])
            c.start()
            c.wait()

    def launch(x, n):
        return pl.pallas_call(functools.partial(kernel, n=n), out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[specs()])(x)
    '''
    if sem.endswith("((2,))"):
        assert _twin(body, 'scratch[f"send_{i}"].at[0]', 'scratch[f"send_{i}"]') == ([], ["PAL103"])
    else:  # one semaphore, used whole; a regular one would be the bug
        whole = body.replace('scratch[f"send_{i}"].at[0]', 'scratch[f"send_{i}"]')
        assert _twin(whole, sem, sem.replace("DMA", "REGULAR")) == ([], ["PAL109"])


def test_scratch_dict_merged_from_other_dicts():
    # `{"buf": ..., **recv_specs(), **send_specs()}`: the entries of each,
    # a later key replacing an earlier one as in Python.
    body = f'''
    def send_specs():
        return {{"sem": pltpu.SemaphoreType.DMA((2,))}}

    def kernel(x_hbm, o_ref, scratch):
        c = pltpu.make_async_copy(x_hbm, scratch["buf"], scratch["sem"].at[0])
        c.start()
        c.wait()

    def launch(x):
        scratch = {{"buf": pltpu.VMEM((8, 128), jnp.float32), "sem": pltpu.SemaphoreType.REGULAR,
                   **send_specs()}}
        return pl.pallas_call(kernel, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[scratch])(x)
    '''
    assert _twin(body, 'scratch["sem"].at[0]', 'scratch["sem"]') == ([], ["PAL103"])


def test_shared_launcher_wrapping_each_kernel_in_its_own_closure():
    # One `launch(kernel=...)` for every kernel of the file: its nested
    # `wrapper` calls the kernel it closes over. Each launcher's kernel runs,
    # not only the first one's.
    body = f'''
    def first_kernel(x_ref, o_ref, scratch):
        pltpu.sync_copy(x_ref, o_ref)

    def second_kernel(x_ref, o_ref, scratch):
        c = pltpu.make_async_copy(x_ref, scratch["buf"], scratch["sems"].at[0])
        c.start()
        c.wait()

    def launch(*, kernel, scratch_shapes, x):
        def wrapper(x_ref, o_ref, scratch_refs):
            kernel(x_ref, o_ref, scratch_refs)
        return pl.pallas_call(wrapper, out_shape={OUT}, in_specs=[{ANY}],
                              scratch_shapes=[scratch_shapes])(x)

    def run_first(x):
        return launch(kernel=first_kernel, scratch_shapes={{}}, x=x)

    def run_second(x):
        return launch(kernel=second_kernel, x=x,
                      scratch_shapes={{"buf": pltpu.VMEM((8, 128), jnp.float32),
                                      "sems": pltpu.SemaphoreType.DMA((2,))}})

    def main(x):
        run_first(x)
        run_second(x)
    '''
    assert _twin(body, 'scratch["sems"].at[0]', 'scratch["sems"]') == ([], ["PAL103"])


def test_remote_wait_only_descriptor_checks_its_send_semaphore_too():
    # A remote descriptor's `.wait()` is `wait_send()` then `wait_recv()`
    # (jax 0.10.2), so a whole send-semaphore array in a descriptor rebuilt
    # only to wait fails as the receive side does (TPU interpret mode:
    # "Only scalar arrays can be converted to Python scalars"; lowering:
    # the rank-0 check of the DMA wait).
    body = '''
    def kernel(x_hbm, o_hbm, send_sems, recv_sems):
        right = jax.lax.rem(jax.lax.axis_index("x") + 1, 2)
        pltpu.make_async_remote_copy(x_hbm, o_hbm, send_sems.at[0], recv_sems.at[0],
                                     device_id=(right,)).start()
        pltpu.make_async_remote_copy(x_hbm, o_hbm, send_sems.at[0], recv_sems.at[0],
                                     device_id=(right,)).wait()

    def launch(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY),
                              scratch_shapes=[pltpu.SemaphoreType.DMA((2,)),
                                              pltpu.SemaphoreType.DMA((2,))])(x)
    '''
    waited = "recv_sems.at[0],\n                                     device_id=(right,)).wait()"
    send_whole = body.replace("send_sems.at[0], " + waited, "send_sems, " + waited)
    assert send_whole != body
    assert codes(body) == []
    assert codes(send_whole) == ["PAL406"]


def test_dataclass_fields_annotated_as_arrays_are_single_leaves():
    # `jax.tree.map(jax.new_ref, meta)` over a registered dataclass whose
    # fields are typed `jax.Array`: each field is one leaf, so each becomes a
    # Ref even when the array's value is unknown, and `tree.leaves` keeps
    # their number. The SMEM specs mapped from it flatten to a list of
    # allocations that `run_scoped` turns into Refs.
    body = '''
    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Meta:
        starts: jax.Array
        sizes: jax.Array

    def make_meta(n):
        return Meta(jnp.cumsum(n), n * 2)

    def run(n, x):
        meta = make_meta(n)
        meta_hbm = jax.tree.map(jax.new_ref, meta)
        specs = jax.tree.map(lambda a: pltpu.SMEM(a.shape, a.dtype), meta)
        specs_flat, _ = jax.tree.flatten(specs)
        sem = pltpu.SemaphoreType.DMA((len(specs_flat),))

        @pl.core_map(mesh=pltpu.create_tensorcore_mesh("core"))
        def _():
            @functools.partial(pl.run_scoped, smem=specs_flat, sems=sem)
            def _(smem, sems):
                copies = [pltpu.async_copy(src, dst, sems.at[i])
                          for i, (src, dst) in enumerate(zip(jax.tree.leaves(meta_hbm), smem))]
                for c in copies:
                    c.wait()
        return x
    '''
    body = "import dataclasses, functools\n" + textwrap.dedent(body)
    assert codes(body) == []
    # (the HBM Ref read directly is also PAL204)
    assert codes(body.replace("async_copy(src, dst,", "async_copy(src[...], dst,")) \
        == ["PAL101", "PAL204"]
    assert codes(body.replace("async_copy(src, dst,", "async_copy(src, dst[...],")) == ["PAL101"]
    assert codes(body.replace("sems.at[i])", "sems)")) == ["PAL103"]


@pytest.mark.parametrize("ann, one_leaf", [
    ("jax.Array", True), ("Array", True), ("jnp.ndarray", True),
    ('Float[Array, "m n"]', True), ("Int[jax.Array, '']", True),
    ("tuple[jax.Array, jax.Array]", False),  # two leaves
    ("jax.Array | None", False), ("Optional[jax.Array]", False),
    ("list[jax.Array]", False), ("int", False),
])
def test_which_annotations_mean_one_array(ann, one_leaf):
    from pallas_lsp.engine.apis.pytrees import array_annotation
    assert array_annotation(ast.parse(ann, mode="eval").body) is one_leaf


def test_items_of_a_star_args_tuple_are_single_operands():
    # A pl.kernel look-alike: `run(*operands)` maps jax.new_ref over its
    # positional arguments and splats the Refs into the body. Each item is one
    # argument, so each becomes one Ref even when the array passed is unknown.
    body = '''
    def my_kernel(body, *, out_type, mesh, scratch_types=()):
        @jax.jit
        def run(*operands):
            arg_refs = jax.tree.map(jax.new_ref, operands)
            out_ref = jax.new_ref(jnp.zeros(out_type.shape, out_type.dtype))

            @pl.core_map(mesh, scratch_shapes=scratch_types)
            def _(*scratch_refs):
                body(*arg_refs, out_ref, *scratch_refs)

            return out_ref[...]
        return run

    def body(x_hbm_ref, o_hbm_ref, buf_ref, sem):
        wide = x_hbm_ref.bitcast(jnp.uint32)
        c = pltpu.make_async_copy(wide.at[0], buf_ref.at[0], sem)
        c.start()
        c.wait()

    def launch(x):
        return my_kernel(body, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                         mesh=pltpu.create_tensorcore_mesh("core"),
                         scratch_types=[pltpu.VMEM((8, 128), jnp.uint32),
                                        pltpu.SemaphoreType.DMA])(x)
    '''
    assert codes(body) == []
    # (the new Ref lives in HBM: reading it is also PAL204)
    assert codes(body.replace("make_async_copy(wide.at[0],", "make_async_copy(wide[0],")) \
        == ["PAL101", "PAL204"]


def test_a_slice_of_a_known_list_keeps_its_items():
    """`refs[1:]`, `refs[:n]` with `n` known: Python's slice of the list the
    engine knows item by item (before, any slice of a list was Unknown)."""
    analysis, src = run('''
def kernel(x_hbm, o_hbm, buf, sems):
    refs = [x_hbm, o_hbm, buf, sems]
    n = len(refs) - 2
    src_ref, dst_ref = refs[:n]
    scratch, sem = refs[2:][::1]
    pltpu.make_async_copy(src_ref, scratch, sem).start()  # SITE
    pltpu.make_async_copy(src_ref, scratch, sem.at[0]).wait()
    pltpu.sync_copy(scratch, dst_ref)


def launch(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                          pltpu.SemaphoreType.DMA((2,))])(x)
''')
    assert [(f.code, f.span.line) for f in analysis.findings if f.code == "PAL103"] == \
        [("PAL103", line_of(src, "# SITE"))]
