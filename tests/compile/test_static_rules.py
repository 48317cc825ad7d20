"""PAL401-PAL406 from source alone, proven against the compiler: the engine's
findings on the fixtures must be exactly the `# expect PALnnn` lines, where the
compile run (conftest.py, libtpu) fails; the fixed twins compile and get
nothing. Also: the shipped lowering table matches the installed jax, jax's own
TPU kernels get no PAL4xx, and the scoped VMEM estimate matches the compiler's
number on the twelve kernels of fixtures/vmem_cases.py."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import FIXTURES, expected  # noqa: E402

from pallas_lsp.engine.analyze import analyze  # noqa: E402
from pallas_lsp.engine.interp import Interpreter  # noqa: E402
from pallas_lsp.engine.rules import _tpu  # noqa: E402
from pallas_lsp.engine.source import parse  # noqa: E402
from pallas_lsp.engine.tpu import lowering_data  # noqa: E402

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
PAL4 = ("PAL401", "PAL402", "PAL403", "PAL404", "PAL405", "PAL406")


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
    """The same lines fail to compile with the rule's catalog code; every
    other pallas_call of the fixtures compiles for both generations."""
    got = {(Path(d.path).name, d.span.line + 1): d.code for d in compiled.diagnostics}
    assert got == expected()


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
    assert data["lowering"] == ex.lowering_table(), (
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


# ---------------------------------------------------------------- VMEM estimate

_AVAL = re.compile(r"^(\w+)\[")


def _estimates(path: Path) -> dict[int, _tpu.VmemEstimate]:
    it = Interpreter(parse(path.read_text(encoding="utf-8")), str(path))
    it.run()
    return {la.node.lineno: _tpu.vmem_estimate(la) for la in _tpu.tpu_launches(it.events)}


def _with_real_dtypes(est: _tpu.VmemEstimate, avals: list[str]) -> int:
    """The estimate with the input dtypes the compile run saw (the engine does
    not know the caller's arrays) and their buffer counts."""
    dtypes = [m.group(1) for m in (_AVAL.match(a) for a in avals) if m]
    total = 0
    ins = [b for b in est.buffers if b.label.startswith("in_specs")]
    for b in est.buffers:
        if not b.counted:
            continue
        if b in ins:
            dtype = dtypes[ins.index(b)]
            nbytes = _tpu._padded(b.shape, dtype)
            outs = [x for x in est.buffers if x.label.startswith("out_specs")]
            total += nbytes * (outs[0].count if outs else b.count)
        else:
            total += b.bytes * b.count
    return total


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_vmem_estimate_matches_the_compiler(compiled):
    ests = _estimates(FIXTURES / "vmem_cases.py")
    assert len(ests) == 12 and all(e is not None for e in ests.values())
    rows = []
    for c in compiled.compiles:
        if Path(c["path"]).name != "vmem_cases.py" or c["gen"] != "v5e":
            continue
        est = ests[c["line"]]
        rows.append((c["line"], _with_real_dtypes(est, c["avals"]), est.total, c["vmem_used"]))
    assert len(rows) == 12
    for line, estimate, lower_bound, used in rows:
        assert estimate == used, (line, estimate, used)  # exact once the dtypes are known
        assert lower_bound <= used, (line, lower_bound, used)  # what the engine alone says
