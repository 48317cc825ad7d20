"""Where values come from, as source spans (what "go to the spec" jumps to),
the launch sites and the Pallas calls with their argument values."""
from __future__ import annotations

from conftest import run

from pallas_lsp.engine import analyze
from pallas_lsp.engine.project import Project

KERNEL = """
def kernel(idx_ref, x_ref, o_ref, buf, sem):
    v = x_ref[...]
    w = x_ref.at[0]
    c = pltpu.make_async_copy(buf, o_ref, sem)
    c.start()
    c.wait()

    @functools.partial(pl.run_scoped, tmp=pltpu.VMEM((8,), jnp.int32))
    def _(tmp):
        tmp[...] = v

def go(idx, x):
    spec = pl.BlockSpec((8, 128), lambda i, idx: (0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,),
            in_specs=[spec],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA]),
    )(idx, x)
"""


def decls(analysis, src):
    lines = src.split("\n")
    out = {}
    for n in analysis.names:
        if n.decl is not None:
            d = n.decl
            assert d.line == d.end_line
            out.setdefault(n.name, lines[d.line][d.col:d.end_col])
    return out


def test_parameters_and_derived_values_point_at_their_spec():
    a, src = run(KERNEL)
    got = decls(a, src)
    assert got["x_ref"] == "pl.BlockSpec((8, 128), lambda i, idx: (0, 0))"  # through a variable
    assert got["v"] == got["w"] == got["x_ref"]  # a read and a view
    assert got["o_ref"] == "pl.BlockSpec(memory_space=pl.ANY)"
    assert got["buf"] == "pltpu.VMEM((8, 128), jnp.float32)"
    assert got["sem"] == "pltpu.SemaphoreType.DMA"  # a bare allocation, no call
    assert got["idx_ref"] == "idx"  # the operand, at the call of the pallas_call
    assert got["tmp"] == "pltpu.VMEM((8,), jnp.int32)"  # run_scoped
    assert got["c"] == "pltpu.make_async_copy(buf, o_ref, sem)"


def test_prefetch_operand_without_a_call_falls_back_to_the_launch():
    a, src = run(KERNEL.replace(")(idx, x)", ")"))
    line = src.split("\n")[next(n.decl for n in a.names if n.name == "idx_ref").line]
    assert "pl.pallas_call(" in line


def test_launch_sites_and_kernel_spans():
    a, src = run(KERNEL)
    (launch,) = a.launches
    lines = src.split("\n")
    assert launch.api == "pallas_call" and launch.kernel == "kernel" and launch.bound
    assert lines[launch.span.line].strip() == "return pl.pallas_call("
    ks = launch.kernel_span
    assert lines[ks.line][ks.col:ks.end_col] == "kernel" and lines[ks.line].startswith("def kernel")
    assert launch.kernel_def.line == ks.line and launch.kernel_def.end_line > ks.line


def test_calls_record_argument_values():
    a, src = run(KERNEL)
    (copy,) = [c for c in a.calls if c.api == "pltpu.make_async_copy"]
    assert [x.value.describe() for x in copy.args] == [
        "Ref · VMEM · f32[8, 128]", "Ref · ANY · f32[8, 128]", "DMA semaphore · shape ()"]
    lines = src.split("\n")
    assert [lines[x.span.line][x.span.col:x.span.end_col] for x in copy.args] == [
        "buf", "o_ref", "sem"]


def test_a_spec_in_another_file_carries_its_path(tmp_path):
    (tmp_path / "specs.py").write_text(
        "from jax.experimental import pallas as pl\n"
        "from jax.experimental.pallas import tpu as pltpu\n"
        "import jax.numpy as jnp\n\n"
        "SCRATCH = [pltpu.VMEM((8, 128), jnp.float32)]\n")
    main = tmp_path / "main.py"
    text = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
            "from specs import SCRATCH\n\n"
            "def k(x_ref, o_ref, acc):\n    acc[...] = x_ref[...]\n\n"
            "pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),\n"
            "               in_specs=[pl.BlockSpec((8, 128))], out_specs=pl.BlockSpec((8, 128)),\n"
            "               scratch_shapes=SCRATCH)\n")
    main.write_text(text)
    a = analyze(text, str(main), project=Project([str(tmp_path)]))
    (acc,) = [n for n in a.names if n.name == "acc" and n.is_param]
    assert acc.decl.path == str((tmp_path / "specs.py").resolve())
    assert acc.decl.line == 4
