"""`pallas-lsp coverage` and whole-project `check` through the real CLI."""
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

HELPERS = '''
from jax.experimental.pallas import tpu as pltpu


def start_copy(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    return c


def never_used(src, dst, sem):
    pltpu.make_async_copy(src, dst, sem).start()


class Copier:
    def start(self):
        pltpu.make_async_copy(self.src, self.dst, self.sem).start()
'''

KERNEL = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from lib.dma import start_copy


def kernel(x_hbm, o_hbm, sems, reg):
    start_copy(x_hbm, o_hbm, sems).wait()
    pl.semaphore_signal(reg, 1)
    pl.semaphore_wait(reg, 1)


def launch(x):
    any_ = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[any_], out_specs=any_,
                          scratch_shapes=[pltpu.SemaphoreType.DMA((2,)),
                                          pltpu.SemaphoreType.REGULAR])(x)
'''


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "dma.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path


def test_coverage_counts_unreached_sites_and_sites_reached_from_other_files(tmp_path):
    root = _project(tmp_path)
    r = cli("coverage", "--output-format", "json", ".", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    files = {Path(f["path"]).name: f for f in data["files"]}
    dma = files["dma.py"]["sites"]
    # start_copy is reached from kern.py's kernel. No launch reaches never_used,
    # but it is kernel code (a DMA of its parameters): checked as such, and
    # said so. Copier.start is kernel code too; its Refs are state on `self`,
    # which nothing here builds, taken as Refs by their use the same way.
    assert [(s["line"], s["reached"], s["known"]) for s in dma] == [(6, True, True),
                                                                    (12, True, True),
                                                                    (17, True, True)]
    assert dma[0]["reason"] == ""
    for site in dma[1:]:
        assert "no kernel launch reaches it; checked as kernel code" in site["reason"]
    assert files["kern.py"]["totals"]["bound"] == 1
    assert data["totals"]["sites"] == 5 and data["totals"]["known"] == 5
    assert data["totals"]["dma_sites"] == 3 and data["totals"]["dma_known"] == 3
    text = cli("coverage", ".", cwd=root).stdout
    assert "Total: 5/5 sites known (100.0%)" in text and "lib/dma.py:17:9" not in text


def test_check_reports_in_the_helper_module_and_at_the_call(tmp_path):
    root = _project(tmp_path)
    r = cli("check", "--output-format", "json", ".", cwd=root)
    rows = json.loads(r.stdout)
    got = sorted((Path(row["path"]).name, row["line"], row["code"]) for row in rows)
    assert got == [("dma.py", 6, "PAL103"), ("kern.py", 10, "PAL103")]
    # Checking the helper alone still finds its callers in the project.
    rows = json.loads(cli("check", "--output-format", "json", "lib/dma.py", cwd=root).stdout)
    assert [(row["line"], row["code"]) for row in rows] == [(6, "PAL103")]


def test_jax_pallas_tree_tpu_and_gpu_is_clean():
    spec = importlib.util.find_spec("jax")
    tree = Path(spec.origin).parent / "experimental" / "pallas"
    r = cli("check", "--no-config", "--output-format", "json", str(tree))
    assert r.returncode == 0, r.stdout[:2000]
    assert json.loads(r.stdout) == []
    cov = json.loads(cli("coverage", "--no-config", "--output-format", "json",
                         str(tree / "ops" / "tpu")).stdout)
    assert cov["totals"]["dma_sites"] >= 6
    assert cov["totals"]["dma_known"] == cov["totals"]["dma_sites"]
    assert cov["totals"]["bound"] == cov["totals"]["launches"] >= 16


MIXED = '''
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def triton_kernel(x_ref, o_ref):
    x = pl.load(x_ref, (pl.dslice(0, 16),))
    pl.store(o_ref, (pl.dslice(0, 16),), x * 2)


def tpu_kernel(x_hbm, o_hbm, sem):
    pltpu.make_async_copy(x_hbm, o_hbm, sem).start()


def launch(x):
    out = jax.ShapeDtypeStruct((16,), jnp.float32)
    y = pl.pallas_call(triton_kernel, out_shape=out,
                       compiler_params=dict(triton=dict(num_warps=4)))(x)
    any_ = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(tpu_kernel, out_shape=out, in_specs=[any_], out_specs=any_,
                          scratch_shapes=[pltpu.SemaphoreType.DMA])(y)
'''


def test_coverage_leaves_out_gpu_kernels_it_does_not_judge(tmp_path):
    # The TPU rules do not judge a Triton kernel, so its Ref accesses and its
    # launch are neither counted nor called unreached; the TPU kernel next to
    # it in the same file is.
    (tmp_path / "mixed.py").write_text(textwrap.dedent(MIXED))
    out = cli("coverage", "--output-format", "json", "mixed.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (f,) = json.loads(out.stdout)["files"]
    assert f["totals"]["sites"] == 1 and f["totals"]["known"] == 1
    assert f["totals"]["launches"] == 1 and f["totals"]["bound"] == 1
    gpu = [s for s in f["sites"] if s["backend"] != "tpu"]
    assert sorted(s["api"] for s in gpu) == ["load", "store"]
    assert {s["backend"] for s in gpu} == {"triton"}
    text = cli("coverage", "--verbose", "mixed.py", cwd=tmp_path).stdout
    assert "load in a triton kernel (not judged, not counted)" in text
    assert "Total: 1/1 sites known" in text
