"""NamedTuples as the tuples they are: scratch given as a NamedTuple of
allocations (JAX flattens it by field, so the kernel receives the fields in
their declared order), and operands kept in a NamedTuple that the launcher
iterates (`[spec(a) for a in ops]`) and spreads (`call(*ops)`). Before, the
kernel's scratch was Unknown and a read passed to a DMA was silent (an
application's message-passing kernel, fourth held-out set). JAX, in TPU
interpret mode, rejects the bug and runs the twin."""
from __future__ import annotations

import subprocess

from tests.engine.conftest import HEADER, line_of, run, run_jax

SOURCE = '''
from typing import NamedTuple


class Operands(NamedTuple):
    x: jax.Array
    y: jax.Array


class Scratch(NamedTuple):
    stage: pl.MemoryRef
    sem: pltpu.SemaphoreType


def scratch_for(rows):
    # by keyword, not in field order: the class decides the order
    return Scratch(sem=pltpu.SemaphoreType.DMA((2,)), stage=pltpu.VMEM((rows, 128), jnp.float32))


def kernel(x_hbm, y_hbm, o_ref, stage, sem):
    copy = pltpu.make_async_copy(x_hbm, stage, SEM)  # COPY
    copy.start()
    copy.wait()
    o_ref[...] = stage[...] + 1.0


def launch(x, y):
    ops = Operands(x, y)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY) for _ in ops],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        scratch_shapes=scratch_for(x.shape[0]),
        interpret=pltpu.InterpretParams(),
    )(*ops)
'''

OK, BUG = "sem.at[1]", "sem"


def test_the_fields_arrive_in_declared_order_with_their_shapes():
    analysis, src = run(SOURCE.replace("SEM", BUG))
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(src, "# COPY"))]
    assert analysis.findings[0].message.endswith("(2,)")


def test_the_twin_is_silent():
    analysis, _ = run(SOURCE.replace("SEM", OK))
    assert analysis.findings == []


def test_unpacking_and_spreading_a_namedtuple_instance():
    body = SOURCE.replace("SEM", BUG).replace(
        "    )(*ops)", "    )(*ops)\n\n\ndef other(x, y):\n    a, b = Operands(x, y)\n"
        "    return launch(*Operands(a, b))")
    analysis, src = run(body)
    assert [(f.code, f.span.line) for f in analysis.findings] == \
        [("PAL103", line_of(src, "# COPY"))]


def _interpret(sem: str) -> subprocess.CompletedProcess:
    text = HEADER + SOURCE.replace("SEM", sem) + (
        "\nx = jnp.ones((8, 128), jnp.float32)\n"
        "print(float(launch(x, x).sum()))\n")
    return run_jax(text)


def test_jax_runs_the_twin():
    p = _interpret(OK)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "2048.0"


def test_jax_refuses_the_bug():
    p = _interpret(BUG)
    assert p.returncode != 0
    assert "Cannot signal on a non-()-shaped semaphore: (2,)" in p.stderr, \
        p.stderr[-2000:]
