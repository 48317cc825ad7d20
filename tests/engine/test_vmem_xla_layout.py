"""engine/vmem.py's `xla_moves`: which operands XLA lays out in VMEM itself
before a kernel (layouts left free, as a real call's are), so the kernel
reserves nothing for them. Each row was compiled deviceless for v5e with
libtpu 0.0.42 (a kernel copying the array, no BlockSpecs): moved when the
kernel reported 0 and XLA's HLO put the array in memory space 1. The same
rule held for blocked operands (f32[1024,64] in (256, 64) blocks: moved;
f32[64,64] in (16, 64) blocks: kept) and for jax's flash attention with
64-wide heads (benchmarks/vmem_vs_compiler.py)."""
from __future__ import annotations

import pytest

from pallas_lsp.engine import vmem

MEASURED = [  # (shape, moved), the same for f32 and bf16
    ((16384, 200), True), ((8192, 64), True), ((4096, 100), True), ((8, 256, 64), True),
    ((64, 8, 128), False), ((4, 64, 200), False), ((3, 5, 128), True), ((128, 3, 128), True),
    ((2, 2, 128), False), ((40, 120), False), ((24, 64), False), ((32, 64), False),
    ((16, 16), False), ((1000, 8), True), ((100, 130), True), ((130, 100), False),
    ((520, 240), False), ((300, 200), True), ((256, 256), False), ((256, 64), True),
    ((64, 64), False), ((256, 96), True), ((256, 384), False), ((256, 192), True),
    ((8, 200), False), ((300, 128), False), ((2048, 200), True),
]


@pytest.mark.parametrize("shape, moved", MEASURED)
@pytest.mark.parametrize("itemsize", [4, 2])
def test_xla_moves_what_another_tiling_pads_less(shape, moved, itemsize):
    assert vmem.xla_moves(shape, itemsize) is moved


def test_the_benchmarks_narrow_cases():
    # "squeezed rows bf16 (4,None,128)": bf16[16,1,128] -> (16, 128) tiles: moved;
    # "squeezed rows f32": f32[2,16,1,128] has one-row f32 tiles already: kept
    assert vmem.xla_moves((16, 1, 128), 2) is True
    assert vmem.xla_moves((2, 16, 1, 128), 4) is False
    assert vmem.xla_moves((16, 2, 128), 1) is True  # "two rows int8 (4,2,128)"
    assert vmem.xla_moves((2, 1024), 2) is False  # "whole bf16 (2,1024)"
    assert vmem.xla_moves((200, 300), 4) is False  # a tie stays row-major


def test_unknown_is_none_and_a_moved_block_counts_nothing():
    assert vmem.xla_moves(None, 4) is None and vmem.xla_moves((8, 128), None) is None
    est = vmem.estimate([vmem.Need("in", "block", (256, 64), "float32", 2, moved=True),
                         vmem.Need("out", "block", (256, 64), "float32", 2, movable=True)])
    assert est.parts[0].bytes == 0 and est.parts[1].bytes == 2 * 256 * 128 * 4
    assert est.floor == 0 and est.total == 2 * 256 * 128 * 4 and est.ranged
