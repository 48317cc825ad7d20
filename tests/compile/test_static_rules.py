"""PAL401-PAL406 from source alone, proven against the compiler: the engine's
findings on the fixtures must be exactly the `# expect PALnnn` lines, where the
compile run (conftest.py, libtpu) fails; the fixed twins compile and get
nothing. Also: the shipped lowering table matches the installed jax, jax's own
TPU kernels get no PAL4xx. The scoped VMEM estimate against the compiler's
figure: test_vmem_model.py."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import FIXTURES, compile_expected, expected  # noqa: E402

from pallas_lsp.engine.analyze import analyze  # noqa: E402
from pallas_lsp.engine.rules import _tpu  # noqa: E402
from pallas_lsp.engine.tpu import lowering_data  # noqa: E402

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
PAL4 = ("PAL401", "PAL402", "PAL403", "PAL404", "PAL405", "PAL406", "PAL407")


def _findings(path: Path):
    a = analyze(path.read_text(encoding="utf-8"), str(path))
    return [f for f in a.findings if f.code.startswith("PAL4")]


def test_static_findings_are_the_expected_lines():
    want = expected()
    got = {}
    for path in sorted(FIXTURES.glob("pal4*.py")) + [FIXTURES / "vmem_cases.py"]:
        for f in _findings(path):
            got[(path.name, f.span.line + 1)] = f.code
    assert got == want
    assert set(want.values()) == set(PAL4)


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_the_compiler_agrees(compiled):
    """The same lines fail to compile with the rule's catalog code (and the
    `# compile` lines, which only the compiler sees); every other
    pallas_call of the fixtures compiles for both generations."""
    got = {(Path(d.path).name, d.span.line + 1): d.code for d in compiled.diagnostics}
    assert got == compile_expected()


def test_messages_start_with_the_compilers_text():
    from pallas_lsp import catalog

    for path in sorted(FIXTURES.glob("pal4*.py")):
        for f in _findings(path):
            entry = catalog.match_message(f.message)
            assert entry is not None and entry.code == f.code, f.message


def test_jax_tpu_kernels_get_no_pal4xx():
    spec = importlib.util.find_spec("jax")
    if spec is None:
        pytest.skip("jax is not installed")
    ops = Path(next(iter(spec.submodule_search_locations))) / "experimental/pallas/ops/tpu"
    files = sorted(ops.rglob("*.py"))
    assert len(files) > 10
    bad = [(p.name, f.span.line + 1, f.code) for p in files for f in _findings(p)]
    assert bad == []


def test_gpu_kernels_are_not_judged(tmp_path):
    p = tmp_path / "gpu.py"
    p.write_text('''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

def kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...])

def f(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
                          grid=(2, 4), out_specs=pl.BlockSpec((128, 64), lambda i, j: (i, j)),
                          compiler_params=plgpu.CompilerParams())(x)
''')
    assert _findings(p) == []


def test_unknown_shapes_and_dtypes_are_not_judged(tmp_path):
    p = tmp_path / "unknown.py"
    p.write_text('''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]          # dtype unknown: not PAL403

def f(x, block):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(2,), in_specs=[pl.BlockSpec(block, lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((100, 100), lambda i: (i, 0)))(x)
''')
    assert _findings(p) == []


# ---------------------------------------------------------------- lowering table


def test_shipped_lowering_table_matches_the_installed_jax():
    pytest.importorskip("jax")
    from pallas_lsp.extract import tpu_lowering as ex

    data = lowering_data()
    # In a fresh Python: a deviceless compile earlier in this process (the VMEM
    # tests) initialises the TPU backend, which registers more SparseCore rules.
    fresh = subprocess.run([sys.executable, "-c", "import json; from pallas_lsp.extract import "
                            "tpu_lowering as ex; print(json.dumps(ex.lowering_table()))"],
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert data["lowering"] == json.loads(fresh.stdout), (
        "the installed jax's Pallas TPU lowering rules changed: run "
        "`python -m pallas_lsp.extract.tpu_lowering --write`")
    import jax

    assert data["jax_version"] == jax.__version__
    tc = set(data["lowering"]["tc"])
    for name in ("jnp.sort", "jnp.cumsum", "lax.sort", "jnp.flip"):
        assert name in data["apis"], name
    # Each listed API still binds its primitives, and they still have no rule.
    import importlib

    for name, prims in data["apis"].items():
        prefix, _, attr = name.rpartition(".")
        mod = importlib.import_module(dict(ex.MODULES)[prefix])
        fn = getattr(mod, attr)
        seen = set()
        for arrays, static, kwargs in ex._attempts(fn):
            try:
                jaxpr = jax.make_jaxpr(lambda *a: fn(*a, *static, **kwargs))(*arrays)
            except Exception:  # noqa: BLE001
                continue
            seen |= ex._primitives(jaxpr.jaxpr, set())
            if set(prims) <= seen:
                break
        assert set(prims) <= seen - tc, (name, prims, sorted(seen - tc))


def test_lowering_table_is_package_data():
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"pallas_lsp.engine" = ["data/*.json"]' in text
    data = json.loads((Path(_tpu.__file__).resolve().parents[1] / "data" /
                       "tpu_lowering.json").read_text())
    assert len(data["lowering"]["tc"]) > 100
