"""`pallas-lsp vmem` (text and JSON), the hover's VMEM note (once per launch)
and PAL404's threshold, all from engine/vmem.py. No libtpu needed: the figures
asserted here are the model's (test_vmem_model.py checks it against the
compiler)."""
from __future__ import annotations

import json

from pallas_lsp.cli import main
from pallas_lsp.engine.analyze import analyze

KERNEL = '''import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def acc_kernel(x_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def acc_kernel_twice(x_ref, o_ref, acc_ref):
    acc_kernel(x_ref, o_ref, acc_ref)


def run(x, twice: bool = False, rows: int = 256):
    kernel = acc_kernel_twice if twice else acc_kernel
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((4096, 1024), jnp.bfloat16),
        grid=(4096 // rows,),
        in_specs=[pl.BlockSpec((rows, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, 1024), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((rows, 1024), jnp.float32)],
    )(x)


def big(x):
    return run(x, rows=2048)


def twice(x):
    return run(x, True)
'''
LAUNCH_LINE = 22  # the pallas_call


def _write(tmp_path, text=KERNEL):
    (tmp_path / "pyproject.toml").write_text("")
    p = tmp_path / "kern.py"
    p.write_text(text)
    return p


def test_vmem_text(tmp_path, capsys):
    p = _write(tmp_path)
    assert main(["vmem", str(p)]) == 0
    out = capsys.readouterr().out
    assert f"kern.py:{LAUNCH_LINE}: acc_kernel" in out
    # the launcher's variants: 256 and 2048 rows (the kernels' variants with equal
    # figures are shown once)
    assert out.count(f"kern.py:{LAUNCH_LINE}:") == 2 and "(variant 2)" in out
    # 256 rows: out bf16 256x1024 = 512 KiB x2, scratch f32 1 MiB, input dtype unknown
    # (the accumulator is zeroed under pl.when and read in every step: kept)
    assert "bfloat16[256, 1024]" in out and "1.0 MiB  carried across steps" in out
    assert "v5e: under (so far) 16.0 MiB" in out
    # 2048 rows: out 4 MiB x2 + scratch 8 MiB + input >= 1 MiB x2 = >= 18 MiB: over v5e only,
    # at its floor too (the scratch is kept)
    assert "v5e: OVER 16.0 MiB" in out
    assert "v6e: under (so far) 32.0 MiB" in out


def test_vmem_json_and_generation(tmp_path, capsys):
    p = _write(tmp_path)
    assert main(["vmem", str(p), "--output-format", "json", "--generation", "v4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["generations"] == ["v4"]
    rows = sorted(data["launches"], key=lambda r: r["total"])
    assert [r["line"] for r in rows] == [LAUNCH_LINE, LAUNCH_LINE]
    small, big = rows
    parts = {q["name"]: q for q in big["parts"]}
    assert parts["out_specs"] == {
        "name": "out_specs", "kind": "block", "shape": [2048, 1024], "dtype": "bfloat16",
        "bytes_each": 4 << 20, "buffers": 2, "bytes": 8 << 20, "exact": True,
        "why": "double-buffered"}
    assert parts["scratch[0] acc_ref"]["bytes"] == 8 << 20  # read across steps: kept
    # the input's dtype is not known: half a byte an element (int4, the smallest), as a floor
    assert parts["in_specs[0]"]["exact"] is False and parts["in_specs[0]"]["bytes"] == 2 << 20
    assert big["total"] == sum(q["bytes"] for q in big["parts"]) == 18 << 20
    assert big["floor"] == 18 << 20 and big["exact"] is False  # the kept scratch counts
    assert big["limits"] == {"v4": {"limit": 16 << 20, "over": True}}
    assert small["limits"] == {"v4": {"limit": 16 << 20, "over": False}}


def test_vmem_usage_errors(tmp_path, capsys):
    assert main(["vmem", str(tmp_path / "missing.py")]) == 2
    assert main(["vmem", "--generation", "v9", str(tmp_path)]) == 2


def test_hover_note_once_per_launch():
    a = analyze(KERNEL, "kern.py")
    notes = [(span.line, text) for span, text in a.launch_notes]
    assert [ln for ln, _ in notes] == [LAUNCH_LINE - 1]
    text = notes[0][1]
    # the two distinct figures one after the other, each once (four launch events)
    assert text.count("**Scoped VMEM estimate**") == 2 and "(variant 2 of 2)" in text
    assert text.count("| `out_specs` |") == 2


def test_pal404_only_when_over_on_every_generation():
    codes = [f.code for f in analyze(KERNEL, "kern.py").findings]
    assert "PAL404" not in codes  # over on v5e (16 MiB), not on v6e (32 MiB)
    bigger = KERNEL.replace("rows=2048", "rows=4096")
    found = [f for f in analyze(bigger, "kern.py").findings if f.code == "PAL404"]
    # out 8 MiB x1 (one step) + input >= 2 MiB + scratch: the floor (no scratch) is
    # 10 MiB, under both limits: silent
    assert found == []
    huge = KERNEL.replace("(4096, 1024), jnp.bfloat16", "(16384, 1024), jnp.float32") \
        .replace("4096 // rows", "16384 // rows").replace("rows=2048", "rows=8192")
    (f,) = [f for f in analyze(huge, "kern.py").findings if f.code == "PAL404"]
    assert f.span.line == LAUNCH_LINE - 1
    # out 32 MiB x2 + input >= 4 MiB x2 + the kept accumulator 32 MiB (two steps: carried);
    # the compiler said 112 MiB for an int8 input (deviceless v6e, limit raised)
    assert f.message.startswith("Scoped allocation with size 104.0 MiB and limit 32.0 MiB")


def test_vmem_unknown_shapes_are_said_not_guessed(tmp_path, capsys):
    p = _write(tmp_path, KERNEL.replace("def run(x, twice: bool = False, rows: int = 256):",
                                        "def run(x, rows, twice: bool = False):")
               .replace("return run(x, rows=2048)", "return x")
               .replace("return run(x, True)", "return x"))
    assert main(["vmem", str(p), "--output-format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["launches"]
    assert row["exact"] is False and row["total"] == 0 and row["floor"] == 0
    assert all(q["shape"] is None for q in row["parts"])
    assert row["limits"]["v5e"]["over"] is False
    assert main(["vmem", str(p)]) == 0
    assert "no block or scratch shape is known here" in capsys.readouterr().out


def test_a_grid_the_engine_does_not_know_may_have_one_step(tmp_path, capsys):
    """grid=(n // 4096,): n unknown, so one step is possible and the compiler
    would then keep one buffer per block. No PAL404 from assuming two."""
    p = _write(tmp_path, '''import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def k(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def f(x, n):
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((n, 1024), jnp.float32),
                          grid=(n // 4096,),
                          in_specs=[pl.BlockSpec((4096, 1024), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((4096, 1024), lambda i: (i, 0)))(x)
''')
    assert main(["vmem", str(p), "--output-format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["launches"]
    assert [q["buffers"] for q in row["parts"]] == [None, None]
    # one f32 block + one at half a byte: 18 MiB, under v6e's 32 MiB (two of each: 36)
    assert row["floor"] == (16 << 20) + (2 << 20)
    assert "PAL404" not in [f.code for f in analyze(p.read_text(), str(p)).findings]


def test_a_kernel_that_computes_says_its_figure_is_a_floor(tmp_path, capsys):
    """A dot (or exp, a reduction...) may make the compiler spill intermediates to
    scoped VMEM, which is not modelled: the figure says `>=` and why; a plain copy
    of the same blocks stays a point figure."""
    text = KERNEL.replace("acc_ref[...] += x_ref[...]",
                          "acc_ref[...] += jnp.dot(x_ref[...], x_ref[...].T)[:, :1]")
    p = _write(tmp_path, text.replace("def big(x):\n    return run(x, rows=2048)\n", "")
               .replace("def twice(x):\n    return run(x, True)\n", ""))
    assert main(["vmem", str(p), "--output-format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["launches"]
    assert rows and all(r["spills_not_counted"] is True for r in rows)
    assert main(["vmem", str(p)]) == 0
    out = capsys.readouterr().out
    assert "may add VMEM for intermediates it spills" in out and "under (so far)" in out
    # the accumulator's `+=` is arithmetic on whole blocks too
    assert main(["vmem", str(_write(tmp_path, KERNEL)), "--output-format", "json"]) == 0
    assert all(r["spills_not_counted"] for r in json.loads(capsys.readouterr().out)["launches"])
    copy = KERNEL.replace("acc_ref[...] += x_ref[...]", "acc_ref[...] = x_ref[...]") \
        .replace("o_ref[...] = acc_ref[...].astype(o_ref.dtype)", "o_ref[...] = acc_ref[...]")
    assert main(["vmem", str(_write(tmp_path, copy)), "--output-format", "json"]) == 0
    assert not any(r["spills_not_counted"] for r in json.loads(capsys.readouterr().out)["launches"])
