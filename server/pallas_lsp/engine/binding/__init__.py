"""How Pallas binds kernel parameters, one module per launcher family:
pallas_call.py (`pl.pallas_call`), kernel.py (`pl.kernel`, `core_map`),
pipeline.py (`pltpu.emit_pipeline`); what they share: specs.py (BlockSpecs,
grid specs, operand Refs), scratch.py (allocations, scratch, `run_scoped`),
shapes.py (shapes, dtypes, spaces, indexing), launch.py (parameter
segments, recording and running a launch); decorators.py (`pl.when`,
`pl.loop`, partials of launchers...).

Mirrors jax/_src/pallas/pallas_call.py and pallas/core.py as measured on jax
0.10.2 (see shared/reference/semantics.md). Written against host.LaunchHost,
never the interpreter."""
