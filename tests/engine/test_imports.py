"""Helpers and kernels imported from other files (resolved with jedi)."""
import textwrap

from pallas_lsp.engine import analyze
from pallas_lsp.resolve import ImportResolver

HELPERS = '''
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()


def bump(sem):
    pl.semaphore_signal(sem, 1)


def kernel(x_hbm, o_hbm, sems):
    pltpu.make_async_copy(x_hbm, o_hbm, sems).start()
'''

MAIN = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from {imp} import copy_in, bump
from {imp} import kernel as imported_kernel


def kernel(x_hbm, o_hbm, buf, sems, reg):
    copy_in(x_hbm, buf, sems)            # PAL103 via the helper
    copy_in(buf[...], o_hbm, sems.at[0])  # PAL101 via the helper
    copy_in(x_hbm, buf, sems.at[1])       # fine
    bump(reg)                             # fine
    bump(sems.at[0])                      # PAL203 via the helper


SCRATCH = [pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)),
           pltpu.SemaphoreType.REGULAR]
pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY), scratch_shapes=SCRATCH)
pl.pallas_call(imported_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''


def _project(tmp_path, layout):
    for rel, text in layout.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _findings(tmp_path, main_rel):
    path = tmp_path / main_rel
    a = analyze(path.read_text(), str(path), resolver=ImportResolver(tmp_path))
    return [(f.code, f.span.line + 1, f.related[0].path if f.related else None)
            for f in a.findings]


def test_absolute_import_through_a_reexport(tmp_path):
    _project(tmp_path, {"pkg/__init__.py": "from .impl import copy_in, bump, kernel\n",
                        "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg")})
    impl = str(tmp_path / "pkg" / "impl.py")
    assert _findings(tmp_path, "main.py") == [
        ("PAL103", 11, impl), ("PAL101", 12, impl), ("PAL203", 15, None), ("PAL103", 23, impl)]


def test_relative_import(tmp_path):
    _project(tmp_path, {"kernels/__init__.py": "", "kernels/helpers.py": HELPERS,
                        "kernels/main.py": MAIN.format(imp=".helpers")})
    codes = [c for c, *_ in _findings(tmp_path, "kernels/main.py")]
    assert codes == ["PAL103", "PAL101", "PAL203", "PAL103"]


def test_unresolvable_import_stays_silent(tmp_path):
    _project(tmp_path, {"main.py": MAIN.format(imp="nowhere")})
    assert _findings(tmp_path, "main.py") == []


def test_without_resolver_imports_are_unknown(tmp_path):
    _project(tmp_path, {"pkg/__init__.py": "from .impl import copy_in, bump, kernel\n",
                        "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg")})
    path = tmp_path / "main.py"
    assert analyze(path.read_text(), str(path)).findings == []
