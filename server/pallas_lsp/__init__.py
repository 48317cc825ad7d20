"""pallas-lsp: find Ref / semaphore / DMA mistakes in JAX Pallas TPU kernels."""

__version__ = "0.1.0"
