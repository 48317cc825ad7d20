"""Real kernels shipped with jax must come out clean (precision), and the
engine must actually find their kernels (so 'clean' is not 'blind')."""
import importlib.util
from pathlib import Path

import pytest

from pallas_lsp.engine import analyze


def _ops_dir() -> Path:
    spec = importlib.util.find_spec("jax")
    assert spec and spec.origin, "jax must be installed for the tests"
    return Path(spec.origin).parent / "experimental" / "pallas" / "ops" / "tpu"


FILES = sorted(_ops_dir().rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(_ops_dir())))
def test_jax_tpu_ops_are_clean(path):
    a = analyze(path.read_text(encoding="utf-8"), str(path))
    assert a.findings == [], [f"{f.code}:{f.span.line + 1} {f.message}" for f in a.findings]


def test_kernels_are_found_in_jax_tpu_ops():
    found = set()
    for path in FILES:
        for k in analyze(path.read_text(encoding="utf-8"), str(path)).kernels:
            found.add(f"{path.name}:{k}")
    for expected in ("all_gather.py:ag_kernel", "matmul.py:matmul_kernel",
                     "flash_attention.py:_flash_attention_kernel",
                     "kernel.py:ragged_paged_attention_kernel"):
        assert expected in found, sorted(found)


def test_injected_bug_in_real_kernel_is_found():
    path = _ops_dir() / "all_gather.py"
    text = path.read_text(encoding="utf-8")
    # Pass the whole tuple of semaphores where one is meant... then a value.
    mutated = text.replace("pltpu.async_copy(x_ref, o_ref.at[my_id], recv_sem[0]).wait()",
                           "pltpu.async_copy(x_ref[...], o_ref.at[my_id], recv_sem[0]).wait()")
    assert mutated != text
    codes = [f.code for f in analyze(mutated, str(path)).findings]
    assert codes == ["PAL101"]
