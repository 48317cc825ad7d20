"""The TPU compile rules (PAL401-PAL407) judge a kernel only where its code
says it is for a TPU (rules/_tpu.judged_launches): a generic `pl.pallas_call`
file that never names a TPU may be a GPU notebook, where a float16 load or a
(12, 128) block is fine. The trace-time rules judge it either way."""
from __future__ import annotations

import textwrap

from pallas_lsp.engine import analyze
from pallas_lsp.engine.project import Project

GENERIC = """\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
{imports}

def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1


def add_one(x):
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(4,),
        in_specs=[pl.BlockSpec((12, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((12, 128), lambda i: (i, 0)),
        {params}
    )(x)


def test_it():
    add_one(jnp.ones((48, 128), jnp.float16))
"""


def _tpu_codes(imports: str = "", params: str = "") -> list[str]:
    src = GENERIC.format(imports=imports, params=params)
    return sorted({f.code for f in analyze(src, "snippet.py").findings
                   if f.code.startswith("PAL4")})


def test_a_file_that_never_names_a_tpu_is_not_judged_by_the_compile_rules():
    assert _tpu_codes() == []


def test_a_commented_out_tpu_import_is_no_evidence():
    assert _tpu_codes("# from jax.experimental.pallas import tpu as pltpu") == []


def test_importing_pallas_tpu_makes_its_kernels_tpu_ones():
    assert _tpu_codes("from jax.experimental.pallas import tpu as pltpu") == \
        ["PAL401", "PAL405"]


def test_mosaic_compiler_params_make_the_launch_a_tpu_one():
    assert _tpu_codes(params='compiler_params={"mosaic": {}},') == ["PAL401", "PAL405"]


def test_the_kernel_file_naming_a_tpu_is_enough(tmp_path):
    """The launcher's file is generic; the kernel it launches lives in a file
    that imports Pallas' TPU module."""
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""\
        from jax.experimental.pallas import tpu as pltpu

        def kernel(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
        """))
    body = GENERIC.format(imports="from kernels import kernel", params="")
    body = body.replace("def kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...] + 1\n", "")
    main = tmp_path / "main.py"
    main.write_text(body)
    a = analyze(body, str(main), project=Project([str(tmp_path)]))
    here = {f.code for f in a.findings}
    there = {f.code for fs in a.foreign.values() for f in fs}
    assert "PAL401" in here and "PAL405" in there


def test_trace_time_rules_still_judge_a_generic_file():
    src = GENERIC.format(imports="", params="").replace(
        "o_ref[...] = x_ref[...] + 1", "o_ref[...] = pl.load(x_ref[...], (slice(None),))")
    codes = {f.code for f in analyze(src, "snippet.py").findings}
    assert "PAL206" in codes
