"""The scoped VMEM model (engine/vmem.py) against the TPU compiler's figure
(`used_scoped_memory_configs` of the compiled executable, deviceless libtpu):

* through the engine, as the hover, PAL404 and `pallas-lsp vmem` see it: every
  launch of fixtures/vmem_cases.py, compiled by the shared compile run
  (conftest.py), with the input dtypes the run saw filled in (the engine does
  not know the caller's arrays): within 5 %, and the engine's own floor never
  above the compiler's figure;
* the model alone, fed what jax knows of a launch
  (benchmarks/vmem_vs_compiler.py), on a handful of kernels compiled here.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import FIXTURES  # noqa: E402

from pallas_lsp.engine import vmem  # noqa: E402
from pallas_lsp.engine.interp import Interpreter  # noqa: E402
from pallas_lsp.engine.rules import _tpu  # noqa: E402
from pallas_lsp.engine.source import parse  # noqa: E402

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
pytestmark = pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "vmem_vs_compiler.py"
_AVAL = re.compile(r"^(\w+)\[([\d,]*)\]")


def _launches(path: Path) -> dict[int, _tpu.LaunchVmem]:
    it = Interpreter(parse(path.read_text(encoding="utf-8")), str(path))
    it.run()
    return {lv.launch.node.lineno: lv for lv in _tpu.vmem_rows(it.events)}


def _with_input_dtypes(est: vmem.Estimate, avals: list[str], n_prefetch: int) -> vmem.Estimate:
    """The engine's estimate with the run's input arrays filled in: their dtypes,
    and whether XLA lays them out in VMEM itself (which needs the dtype)."""
    arrays = [(m.group(1), tuple(int(d) for d in m.group(2).split(",") if d))
              for m in (_AVAL.match(a) for a in avals) if m]
    needs = []
    for p in est.parts:
        dtype, moved = p.dtype, p.moved
        if p.name.startswith("in_specs[") or p.name.startswith("input #"):
            k = int(p.name.split("[" if "[" in p.name else "#")[1].rstrip("]"))
            dtype, array = arrays[n_prefetch + k]
            moved = bool(vmem.xla_moves(array, vmem.ITEMSIZE[dtype]))
        needs.append(vmem.Need(p.name, p.kind, p.shape, dtype, p.count, p.why, kept=p.kept,
                               moved=moved))
    return vmem.estimate(needs)


def test_engine_estimate_matches_the_compiler(compiled):
    launches = _launches(FIXTURES / "vmem_cases.py")
    assert len(launches) == 18
    rows = [c for c in compiled.compiles if Path(c["path"]).name == "vmem_cases.py"]
    assert {(c["line"], c["gen"]) for c in rows} == {(ln, g) for ln in launches for g in ("v5e", "v6e")}
    text = (FIXTURES / "vmem_cases.py").read_text(encoding="utf-8").splitlines()
    for c in rows:
        lv = launches[c["line"]]
        est = _with_input_dtypes(lv.estimate, c["avals"], 0)
        used = c["vmem_used"]
        assert est.exact, c["line"]
        if text[c["line"] - 1].endswith("# xla-vmem"):
            # XLA lays the narrow operands out in VMEM before the kernel (as on a v5e
            # chip): the model knows it (vmem.xla_moves), the kernel reports 0
            assert est.total == used == 0, (c["line"], c["gen"], est.total, used)
        assert abs(est.total - used) <= 0.05 * used, (c["line"], c["gen"], est.total, used)
        assert lv.estimate.floor <= used, (c["line"], lv.estimate.floor, used)


def _bench():
    spec = importlib.util.spec_from_file_location("vmem_vs_compiler", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("case", [
    "copy bf16 (24,256) x4", "copy 3-D f32 (None,256,128) x4", "whole int8 (33,130)",
    "bias add bf16, constant + Buffered(1)", "scalar prefetch gather",
    "ANY operand DMA'd into VMEM scratch", "matmul bf16 256^3",
    # padding and minimums (tests/engine/test_vmem_tiles.py has the figures)
    "squeezed rows f32 (None,1,None,128)", "one row f32 (4,1,256)", "whole f32 (1,1024)",
    "1-D f32 (128,) x4, 1 KiB a block", "Buffered(1) f32 (1,1,128), 1 KiB a block",
    "one-row scratch carried, no minimum",
])
def test_model_matches_the_compiler(case):
    bench = _bench()
    fn, args = bench.OWN[case]()
    (params, avals), = bench.launches(fn, args)
    est = vmem.estimate(bench.needs(params))
    used, xla_vmem = bench.compiled_vmem(params, avals, "v5e")
    assert isinstance(used, int) and used > 0 and not xla_vmem, used
    assert est.total == used, (case, est.total, used)


# Narrow operands that XLA relayouts into VMEM itself before the kernel when their
# layout is left free, as a call on a TPU v5e chip leaves it: there the chip reported
# the same figures as the free deviceless compile (benchmarks/vmem_vs_compiler.py
# --gen chip, benchmarks/README.md), 0 for the kernel.
@pytest.mark.parametrize("case", ["squeezed rows bf16 (4,None,128)", "two rows int8 (4,2,128)",
                                  "no BlockSpecs bf16 (300,200)"])
def test_narrow_operands_moved_into_vmem_by_xla(case):
    bench = _bench()
    fn, args = bench.OWN[case]()
    (params, avals), = bench.launches(fn, args)
    est = vmem.estimate(bench.needs(params))
    used, xla_vmem = bench.compiled_vmem(params, avals, "v5e")
    # the model knows XLA's choice (vmem.xla_moves): nothing for the moved operands
    assert xla_vmem and used == est.total == 0, (case, used, est.total)
    pinned, moved = bench.compiled_vmem(params, avals, "v5e", layouts=True)
    assert not moved and pinned == sum(p.bytes_each * p.count for p in est.parts), (case, pinned)
