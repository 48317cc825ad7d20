"""Analysis cost is bounded by design: work grows linearly with the size of the
call graph (chains, DAGs with shared helpers, cycles, fan-out), a work budget
cuts what is too deep or too much to Unknown (never a false alarm, a reason in
`coverage`), and what is within reach is still judged (a DMA misuse at the end
of a chain of 300 helpers). Work is counted, not timed: the interpreter's
steps (statements and expressions evaluated) plus the calls it entered."""
from __future__ import annotations

import ast
import random
import resource
import time

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.frames import MAX_CALLS, MAX_DEPTH
from pallas_lsp.engine.interp import Interpreter
from pallas_lsp.engine.source import parse

HEADER = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
          "from jax.experimental.pallas import tpu as pltpu\n\n")
LAUNCH = '''
def run(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
'''
# A whole copy, started and waited: correct when `x` is a Ref.
COPY = "    c = pltpu.make_async_copy(x, o, sem)\n    c.start()\n    c.wait()\n"


def _helper(i: int, callees: list[int]) -> str:
    body = "".join(f"    h{j}(x, o, sem)\n" for j in callees) or COPY
    return f"def h{i}(x, o, sem):\n{body}\n"


def chain(n: int) -> list[list[int]]:
    return [[i + 1] for i in range(n - 1)] + [[]]


def dag(n: int, rng: random.Random) -> list[list[int]]:
    """Each helper calls up to three later ones: much sharing, no cycle."""
    return [sorted(rng.sample(range(i + 1, n), min(rng.randint(0, 3), n - i - 1)))
            for i in range(n)]


def cyclic(n: int, rng: random.Random) -> list[list[int]]:
    """Calls forward and, now and then, back: recursion everywhere."""
    out = dag(n, rng)
    for i in range(1, n):
        if rng.random() < 0.3:
            out[i].append(rng.randrange(0, i))
    return out


def fan_out(n: int) -> list[list[int]]:
    return [[] for _ in range(n)]


def program(graph: list[list[int]], roots: list[int], misuse: bool = False) -> str:
    """A kernel calling `roots` of the helper graph; with `misuse`, the kernel
    hands the helpers an Array (`x_ref[...]`) where a Ref is needed."""
    helpers = "".join(_helper(i, callees) for i, callees in enumerate(graph))
    first = "    x = x_ref[...]\n" if misuse else "    x = x_ref\n"
    calls = "".join(f"    h{r}(x, o_ref, sem)\n" for r in roots)
    return HEADER + helpers + f"def kernel(x_ref, o_ref, sem):\n{first}{calls}" + LAUNCH


def work(src: str) -> int:
    interp = Interpreter(parse(src), "fuzz.py", names=False)
    interp.run()
    assert interp.incomplete is None  # finished within the step budget
    return interp._steps + interp.work.calls


SHAPES = {
    "chain": lambda n, rng: (chain(n), [0]),
    "dag": lambda n, rng: (dag(n, rng), [0, 1, 2]),
    "cycles": lambda n, rng: (cyclic(n, rng), [0, 1, 2]),
    "fan-out": lambda n, rng: (fan_out(n), list(range(n))),
}


# Sizes compared in pairs (n, 4n).
SIZES = {"chain": (100, 400), "dag": (60, 240, 960), "cycles": (60, 240, 960),
         "fan-out": (60, 240, 960)}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_work_grows_linearly_with_the_call_graph(shape):
    for seed in range(3):
        counts = {}
        for n in SIZES[shape]:
            graph, roots = SHAPES[shape](n, random.Random(seed * 1000 + n))
            counts[n] = work(program(graph, roots))
        for n in SIZES[shape][:-1]:
            assert counts[4 * n] <= 4.5 * counts[n] + 2000, (shape, seed, counts)


def test_work_per_link_of_a_long_chain_stays_constant():
    """Past MAX_DEPTH a link costs more (it is also run as kernel code on its
    own), but each one the same: the cost of the second 2,000 links is about
    twice that of the first 1,000 past 1,000 (a quadratic cost: six times)."""
    w1, w2, w4 = (work(program(chain(n), [0])) for n in (1000, 2000, 4000))
    assert w4 - w2 <= 2.2 * (w2 - w1) + 500, (w1, w2, w4)


def _codes(src: str) -> list[tuple[str, int]]:
    return [(f.code, f.span.line) for f in analyze(src, "fuzz.py").findings]


def _line(src: str, text: str, nth: int = -1) -> int:
    return [i for i, line in enumerate(src.split("\n")) if text in line][nth]


def test_misuse_at_the_end_of_a_300_helper_chain_is_reported():
    src = program(chain(300), [0], misuse=True)
    assert ("PAL101", _line(src, "make_async_copy")) in _codes(src)
    assert _codes(program(chain(300), [0])) == []  # the fixed twin: nothing


def test_a_10000_helper_chain_is_cut_to_unknown_with_a_reason():
    """Deeper than the budget: no crash, no RecursionError, no false alarm, and
    `coverage` says why the copy is not judged as the launch reaches it."""
    assert MAX_DEPTH < 10_000
    for misuse in (False, True):
        src = program(chain(10_000), [0], misuse=misuse)
        a = analyze(src, "deep.py", coverage=True)
        assert a.internal_error is None and a.incomplete is None
        assert [f.code for f in a.findings if f.code != "PAL204"] == []
        (site,) = [s for s in a.coverage.sites if s.api == "make_async_copy"]
        assert f"nested more than {MAX_DEPTH} deep" in site.reason


def test_fan_out_of_2000_helpers_finds_the_one_misuse():
    graph = fan_out(2000)
    src = program(graph, list(range(2000))).replace(
        "def h1234(x, o, sem):\n    c = pltpu.make_async_copy(x, o, sem)",
        "def h1234(x, o, sem):\n    c = pltpu.make_async_copy(x[...], o, sem)")
    found = _codes(src)
    assert ("PAL101", _line(src, "make_async_copy(x[...]")) in found
    assert {line for _, line in found} == {_line(src, "make_async_copy(x[...]")}


RECURSIVE = HEADER + '''
def copy_n(x, o, sem, n):
    if n == 0:
        return
    c = pltpu.make_async_copy(x, o, sem)
    c.start()
    c.wait()
    copy_n(x, o, sem, n - 1)


def ping(x, o, sem, n):
    c = pltpu.make_async_copy(x, o, sem)
    c.start()
    c.wait()
    if n:
        pong(x, o, sem, n)


def pong(x, o, sem, n):
    ping(x, o, sem, n - 1)


def kernel(x_ref, o_ref, sem):
    x = x_ref
    copy_n(x, o_ref, sem, COUNT)
    ping(x, o_ref, sem, COUNT)
''' + LAUNCH


@pytest.mark.parametrize("count", ["3", "100_000", "unknown_count"])
def test_recursion_is_bounded_and_correct(count):
    """A recursive helper and mutual recursion: followed while their arguments
    differ (to the depth budget), cut to Unknown where they repeat or go too
    deep. The misuse inside is found; the correct twin gets nothing."""
    fixed = RECURSIVE.replace("COUNT", count)
    a = analyze(fixed, "rec.py")
    assert a.internal_error is None and a.incomplete is None
    assert a.findings == []
    broken = fixed.replace("    x = x_ref\n", "    x = x_ref[...]\n")
    lines = {_line(broken, "make_async_copy", 0), _line(broken, "make_async_copy", 1)}
    found = {line for code, line in _codes(broken) if code == "PAL101"}
    assert found == lines


def test_calls_budget_cuts_a_call_tree_to_unknown():
    """A binary tree of calls, each with its own arguments (no memo hits):
    more activations than the budget. The analysis ends, enters no more than
    the budget, claims nothing about the kernel and says why in coverage."""
    src = HEADER + '''
def tree(x, o, sem, n, depth):
    if depth == 0:
        c = pltpu.make_async_copy(x, o, sem)
        c.start()
        return
    tree(x, o, sem, 2 * n, depth - 1)
    tree(x, o, sem, 2 * n + 1, depth - 1)


def kernel(x_ref, o_ref, sem):
    tree(x_ref, o_ref, sem, 1, 17)
''' + LAUNCH
    interp = Interpreter(parse(src), "tree.py", names=False)
    interp.run()
    assert MAX_CALLS < interp.work.calls <= MAX_CALLS + 64  # cut calls are counted, not run
    a = analyze(src, "tree.py", coverage=True)
    # The copy is never waited, but part of the kernel was not seen: no claim.
    assert a.findings == [] and a.internal_error is None
    assert f"{MAX_CALLS:,} function calls" in a.coverage.budget


@pytest.mark.parametrize("kind", ["flat", "rows", "dict"])
def test_huge_literal_is_cheap(kind):
    """Megabytes of constants: parsed as one opaque name, whatever their shape;
    the kernel after it is still checked, on the right line."""
    rng = random.Random(7)
    if kind == "flat":
        data = "DATA = [" + ", ".join(str(rng.randint(0, 9999)) for _ in range(300_000)) + "]\n"
    elif kind == "rows":
        data = "DATA = [\n" + ",\n".join(
            "    [" + ", ".join(str(rng.randint(-99, 999)) for _ in range(16)) + "]"
            for _ in range(20_000)) + "]\n"
    else:
        data = "DATA = {\n" + ",\n".join(f"    'k{i}': ({rng.random():.3f}, None, 'v{i}')"
                                          for i in range(40_000)) + "}\n"
    bad = "def kernel(x_ref, o_ref, sem):\n    pltpu.make_async_copy(x_ref[...], o_ref, sem).start()\n"
    src = HEADER + data + bad + LAUNCH
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.process_time()
    interp = Interpreter(parse(src), "big.py", names=False)
    interp.run()
    assert interp._steps < 1000  # the data is one name, not 300,000 constants
    assert time.process_time() - t < 30  # generous: the point is the step count above
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grew_mib < 400, grew_mib
    assert ("PAL101", _line(src, "make_async_copy")) in _codes(src)


def test_opaque_displays_keep_positions_and_never_hide_code():
    from pallas_lsp.engine.literals import MIN_CHARS, OPAQUE, opaque_displays
    nums = ", ".join(str(i % 97) for i in range(MIN_CHARS // 3))
    rows = ",\n".join(f"    ({i}, -{i}.5e-3, 'r{i}', None)" for i in range(MIN_CHARS // 20))
    small = "x = [1, 2, 3]\n"
    assert opaque_displays(small) is small
    for display in (f"[{nums}]", f"{{\n{rows}\n}}".replace("(", "'k': (", 1), f"[\n{rows}\n]"):
        text = f"A = {display}; B = 1\nf(x, {display}, y)\n"
        out = opaque_displays(text)
        assert out.count(OPAQUE) == 2 and out.count("\n") == text.count("\n")
        for line_in, line_out in zip(text.split("\n"), out.split("\n")):
            if "B = 1" in line_in:  # code after the display stays at its column
                assert line_out.index("B = 1") == line_in.index("B = 1")
        tree = ast.parse(out)
        assert isinstance(tree.body[0].value, ast.Name)
    # Anything but literals inside (a name, a call, an f-string): parsed as written.
    for intruder in ("x", "f(1)", "f'{x}'", "lambda: 1", "é"):
        text = f"A = [{nums}, {intruder}, {nums}]\n"
        assert opaque_displays(text) is text
    sub = f"A = table[{nums}]\n"  # a subscript, not a display
    assert opaque_displays(sub) is sub


def test_coverage_report_names_the_budget(tmp_path):
    from pallas_lsp.check import coverage_report
    path = tmp_path / "deep.py"
    path.write_text(program(chain(600), [0]), encoding="utf-8")
    text, code = coverage_report.run([path], use_config=False)
    assert code == 0
    assert f"work budget: `h{MAX_DEPTH - 2}` not followed: calls nested more than {MAX_DEPTH}" \
        in text, text


def test_variants_past_the_budget_are_not_run(monkeypatch):
    """Launcher flag variants are run up to the budget, then no more, with a
    reason; the variants run still find what they find."""
    from pallas_lsp.engine import frames
    src = HEADER + '''
def kernel(x_ref, o_ref, sem):
    c = pltpu.make_async_copy(x_ref[...], o_ref, sem)
    c.start()
    c.wait()


def launch(x, *, a=False, b=False, c=False):
    if a:
        x = x + 1
    if b:
        x = x * 2
    if c:
        x = x - 1
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
'''
    interp = Interpreter(parse(src), "variants.py", names=False)
    interp.run()
    assert interp.work.variants >= 3 and not interp.work.cut
    monkeypatch.setattr(frames, "MAX_VARIANT_RUNS", 1)
    interp = Interpreter(parse(src), "variants.py", names=False)
    interp.run()
    assert interp.work.variants == 2  # one run, and the one refused
    assert "flag variants were not all run" in interp.work.note()
    assert ("PAL101", _line(src, "make_async_copy")) in _codes(src)


def test_tables_below_the_opaque_size_cost_no_steps_per_item():
    """Displays of thousands of constants, too short to be made opaque before
    parsing, are still not evaluated item by item: forty of them once spent
    the step budget and left the kernel after them unchecked."""
    from pallas_lsp.engine.interp.sequences import MAX_DATA_ITEMS
    n = MAX_DATA_ITEMS + 1
    tables = "".join(f"T{i} = [{', '.join(str(j % 10) for j in range(n))}]\n"
                     f"D{i} = {{{', '.join(f'{j}: {j % 7}' for j in range(n))}}}\n"
                     for i in range(40))
    bad = "def kernel(x_ref, o_ref, sem):\n    pltpu.make_async_copy(x_ref[...], o_ref, sem).start()\n"
    src = HEADER + tables + bad + LAUNCH
    interp = Interpreter(parse(src), "tables.py", names=False)
    interp.run()
    assert interp._steps < 2000 and interp.incomplete is None
    assert ("PAL101", _line(src, "make_async_copy")) in _codes(src)
    small = HEADER + "T = [1, 2, 3]\nN = len(T)\n"  # small displays keep their items
    interp = Interpreter(parse(small), "small.py", names=False)
    interp.run()
    assert interp.module_scope.vars["N"].value == 3
