"""`run --compile` reports the scoped VMEM of the kernel it compiled, read
from the kernel's own custom-call line of the executable, not the largest
figure anywhere in it (XLA's copies around the kernel carry their own)."""
from __future__ import annotations

from pallas_lsp.runs._compile import kernel_vmem

# Shaped like libtpu 0.0.42's `as_text()`: a relayout copy before the kernel
# reports more scoped VMEM than the kernel itself (measured on bf16[300,200]).
_TEXT = "\n".join([
    '  %copy = bf16[300,200]{1,0:T(8,128)(2,1)S(1)} copy(%x.1), backend_config={"flag_configs":[],'
    '"used_scoped_memory_configs":[{"memory_space":"1","offset":"0","size":"153600"}],'
    '"scoped_memory_configs":[{"memory_space":"1","offset":"0","size":"16777216"}]}',
    '  ROOT %f.1 = bf16[300,200]{1,0:T(8,128)(2,1)} custom-call(%copy, %copy.1), '
    'custom_call_target="tpu_custom_call", backend_config={"flag_configs":[],'
    '"scoped_memory_configs":[{"memory_space":"1","offset":"0","size":"16777216"}],'
    '"used_scoped_memory_configs":[{"memory_space":"1","offset":"0","size":"98304"}]}',
])


def test_the_kernels_own_line_not_the_largest_figure():
    assert kernel_vmem(_TEXT) == (98304, 16777216)


def test_no_kernel_line_gives_nothing():
    assert kernel_vmem(_TEXT.splitlines()[0]) == (None, None)
