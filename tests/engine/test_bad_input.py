"""Bad input: no exception, bounded time, and the rest of the file checked."""
import time

from pallas_lsp.engine import analyze

KERNEL = '''
def kernel{n}(x_hbm, o_hbm, sems):
    pltpu.make_async_copy(x_hbm, o_hbm, sems).start()
    pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).wait()

pl.pallas_call(kernel{n}, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''
HEADER = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
          "from jax.experimental.pallas import tpu as pltpu\n")


def test_empty_and_whitespace():
    for text in ("", "\n", "   ", "\x00\x00", "\ufeff"):
        assert analyze(text).findings == []


def test_syntax_error_keeps_other_functions():
    broken = "\ndef half_typed(x_ref:\n    pltpu.make_async_copy(x_ref[\n"
    src = HEADER + KERNEL.format(n=1) + broken + KERNEL.format(n=2)
    a = analyze(src)
    assert a.syntax_error
    assert [f.code for f in a.findings] == ["PAL103", "PAL103"]


def test_half_typed_line_inside_kernel():
    src = HEADER + KERNEL.format(n=1).replace(
        "    pltpu.make_async_copy", "    x = pltpu.make_async_copy(x_hbm,\n    pltpu.make_async_copy", 1)
    a = analyze(src)
    assert a.syntax_error is not None
    assert "PAL103" in [f.code for f in a.findings]


def test_deep_nesting_does_not_crash():
    deep = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"
    nested = "".join("    " * i + f"def f{i}():\n" for i in range(80)) + "    " * 80 + "pass\n"
    for text in (deep, nested, "[" * 5000):
        analyze(text)


def test_generated_20k_line_file_is_bounded():
    body = "".join(KERNEL.format(n=i) for i in range(2500))  # ~20,000 lines
    src = HEADER + body
    assert src.count("\n") >= 20_000
    t = time.perf_counter()
    a = analyze(src)
    elapsed = time.perf_counter() - t
    assert elapsed < 10, elapsed
    assert len(a.findings) >= 1


def test_odd_unicode_columns_are_code_points():
    src = HEADER + KERNEL.format(n=1).replace(
        "    pltpu.make_async_copy(x_hbm, o_hbm, sems)",
        "    s = '🙂中文'; pltpu.make_async_copy(x_hbm, o_hbm, sems)")
    a = analyze(src)
    (f,) = a.findings
    line = src.split("\n")[f.span.line]
    assert line[f.span.col:f.span.end_col] == "sems"


def test_newer_python_syntax_is_not_a_syntax_error():
    src = HEADER + KERNEL.format(n=1).replace("def kernel1(", "def kernel1[T: (int, str)](") \
        + "\ntype Pair[T] = tuple[T, T]\nclass Box[T]:\n    pass\n"
    a = analyze(src)
    assert a.syntax_error is None
    assert [f.code for f in a.findings] == ["PAL103"]


def test_type_parameters_over_several_lines():
    """`def f[\n  Rows: IntVar,\n](x)` (a typed test suite): blanked, the lines
    of the list are joined with backslashes, as the brackets joined them."""
    src = HEADER + KERNEL.format(n=1).replace(
        "def kernel1(", "def kernel1[\n    Rows: IntVar,\n    Cols: IntVar,\n](")
    a = analyze(src)
    assert a.syntax_error is None
    got = [(f.code, f.span.line) for f in a.findings]
    assert [c for c, _ in got] == ["PAL103"]
    line = src.split("\n")[got[0][1]]
    assert line[a.findings[0].span.col:a.findings[0].span.end_col] == "sems"


def test_fstrings_that_reuse_their_quote_inside():
    """`f"{d["key"]}"` is Python 3.12 (PEP 701): on an older Python the inner
    quotes are swapped for the other kind (same length), so the file parses
    and the columns after it stay right."""
    src = HEADER + KERNEL.format(n=1).replace(
        "    pltpu.make_async_copy(x_hbm, o_hbm, sems)",
        '    s = f"{ {"a": 1}["a"]:>{3}} {{x}}"; pltpu.make_async_copy(x_hbm, o_hbm, sems)')
    a = analyze(src)
    assert a.syntax_error is None
    (f,) = a.findings
    line = src.split("\n")[f.span.line]
    assert line[f.span.col:f.span.end_col] == "sems"


def test_an_engine_bug_costs_one_file_not_the_caller(monkeypatch):
    import sys
    import types

    analyze_mod = sys.modules["pallas_lsp.engine.analyze"]  # the module, not the function

    def broken(ctx):
        raise IndexError("simulated engine bug")
        yield  # pragma: no cover

    monkeypatch.setattr(analyze_mod, "RULES", (types.SimpleNamespace(CODE="PAL999", check=broken),))
    a = analyze(HEADER + KERNEL.format(n=1))
    assert a.findings == [] and "simulated engine bug" in a.internal_error

