"""The syntax floor (engine/rules/syntax_floor.py): DMA mistakes the source
alone decides, reported in code styles where the interpreter loses track of
what names are (test-class methods, docs snippets, helpers, temporaries)."""
import pytest
from conftest import HEADER, line_of, run

from pallas_lsp.engine.events import Events
from pallas_lsp.engine.rules import FLOOR, syntax_floor
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.source import parse


def floor_only(body: str, header: str = HEADER) -> list:
    """The floor's own findings, before `analyze` dedupes them against the rules."""
    import textwrap
    return list(syntax_floor.check(Context(src=parse(header + textwrap.dedent(body)),
                                           events=Events())))


def found(body: str, header: str = HEADER):
    analysis, src = run(body, header)
    return [(f.code, f.span.line, f.span.col) for f in analysis.findings], analysis, src


def at(src: str, marker: str, text: str) -> tuple[int, int]:
    line = line_of(src, marker)
    return line, src.split("\n")[line].index(text)


def test_registered_after_the_rules():
    assert FLOOR == (syntax_floor,)


# ---------------------------------------------------------------- positives


TEST_CLASS = """
class CopyTest:
    def pallas_call(self, *args, **kwargs):
        return pl.pallas_call(*args, interpret=True, **kwargs)

    def test_copy(self):
        def kernel(x, o, scratch, sem):
            pltpu.async_copy(x, scratch[...], sem).wait()  # here
            pltpu.sync_copy(scratch, o)

        self.pallas_call(kernel, out_shape=None)(1)
"""


def test_test_class_method_launched_through_self():
    got, analysis, src = found(TEST_CLASS)
    where = at(src, "# here", "scratch[...]")
    assert ("PAL101", *where) in got
    f = next(f for f in analysis.findings if (f.span.line, f.span.col) == where)
    assert f.message == "DMA source/destination/semaphore arguments must be Refs."
    assert "`scratch[...]` reads the whole Ref into an Array" in f.detail
    (fix,) = f.fixes
    assert fix.safe and [e.new_text for e in fix.edits] == ["scratch"]


DOCS = """
def kernel(src, dst, sems, buf):
    ...
    copy = pltpu.make_async_copy(src.at[0], buf[:, ...], sems.at[0])  # here
    copy.start()
    ...
    copy.wait()
"""


def test_docs_snippet_with_placeholders():
    got, analysis, src = found(DOCS)
    where = at(src, "# here", "buf[:, ...]")
    assert ("PAL101", *where) in got
    f = next(f for f in analysis.findings if (f.span.line, f.span.col) == where)
    assert [e.new_text for e in f.fixes[0].edits] == ["buf.at[:, ...]"]
    # where JAX raises: the `.start()` line
    assert [r.span.line for r in f.related] == [line_of(src, "copy.start()")]


HELPER = """
def make(a, b, s):
    return pltpu.make_async_copy(a, b[...], s)  # here


def user(a, b, s):
    c = make(a, b, s)
    c.start()
    c.wait()
"""


def test_descriptor_returned_by_a_helper_and_started_by_its_caller():
    got, _, src = found(HELPER)
    assert ("PAL101", *at(src, "# here", "b[...]")) in got


TEMP = """
def launched_elsewhere(a, b, s):
    tmp = b[0, ...]
    pltpu.sync_copy(a, tmp)  # here
"""


def test_a_read_moved_to_a_temporary():
    got, analysis, src = found(TEMP)
    assert got == [("PAL101", *at(src, "# here", "tmp"))]
    assert "holds a read" in analysis.findings[0].detail
    assert analysis.findings[0].fixes == ()  # the edit would be on another line


WAIT_SEND = """
def make(a, b, s):
    return pltpu.make_async_copy(a, b, s)


class T:
    def test_it(self, a, b, s):
        make(a, b, s).wait_send()  # here
"""


def test_wait_send_on_a_helpers_local_descriptor():
    got, analysis, src = found(WAIT_SEND)
    where = at(src, "# here", "wait_send")
    assert got == [("PAL106", *where)]
    (fix,) = analysis.findings[0].fixes
    assert fix.safe and [e.new_text for e in fix.edits] == ["wait"]


PRIORITY_TEMP = """
class T:
    def test_it(self, a, b, s):
        prio = -1
        pltpu.make_async_copy(a, b, s).start(priority=prio)  # here
"""


def test_negative_priority_through_a_temporary():
    got, _, src = found(PRIORITY_TEMP)
    assert ("PAL108", *at(src, "# here", "prio)")) in got


def test_priority_literal_on_async_copy_is_reported_instead_of_the_read():
    body = """
    def k(a, b, s):
        pltpu.async_copy(a[...], b, s, priority=-1)
    """
    assert [f.code for f in floor_only(body)] == ["PAL108"]  # JAX checks the priority first


def test_wait_only_descriptor_semaphore_read():
    body = """
    def k(a, b, s):
        pltpu.make_async_copy(a, b, s[...]).wait()
    """
    (f,) = floor_only(body)
    assert f.code == "PAL110" and f.message == "Expected the destination semaphore to be a reference"


def test_remote_copy_without_device_id():
    body = """
    def k(a, b, s, r):
        pltpu.make_async_remote_copy(a, b, s.at[0], r, device_id=None).start()
    """
    (f,) = floor_only(body)
    assert f.code == "PAL105"


@pytest.mark.parametrize("imports, call", [
    ("from jax.experimental.pallas import tpu as tp", "tp.make_async_copy"),
    ("from jax.experimental.pallas.tpu import make_async_copy as mac", "mac"),
    ("import jax.experimental.pallas.tpu", "jax.experimental.pallas.tpu.make_async_copy"),
    ("from jax.experimental import pallas as P", "P.tpu.make_async_copy"),
    ("try:\n    from jax.experimental.pallas import tpu as pltpu\nexcept ImportError:\n"
     "    pltpu = None", "pltpu.make_async_copy"),
])
def test_any_import_alias(imports, call):
    body = f"""
def k(a, b, s):
    {call}(a[...], b, s).start()
"""
    assert [f.code for f in floor_only(body, imports + "\n")] == ["PAL101"]


def test_noqa_applies():
    assert found(TEMP.replace("# here", "# noqa: PAL101"))[0] == []


def test_the_engine_finding_wins_at_the_same_span():
    body = """
    def kernel(x_hbm, o_hbm, buf, sem):
        copy = pltpu.make_async_copy(buf[...], o_hbm, sem)
        copy.start()
        copy.wait()

    pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                   out_specs=pl.BlockSpec(memory_space=pl.ANY),
                   scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                   pltpu.SemaphoreType.DMA])
    """
    got, _, _ = found(body)
    assert [c for c, _, _ in got] == ["PAL101"]  # one finding, not two


def test_switched_off(monkeypatch):
    monkeypatch.setenv("PALLAS_LSP_NO_SYNTAX_FLOOR", "1")
    assert found(TEMP)[0] == []


@pytest.mark.parametrize("arg", ["a[:, 0]", "a[pl.ds(0, 8)]", "a[pl.ds(8), :]", "a[0, pl.ds(8)]",
                                 "a.at[0][1]", "a.at[pl.ds(0, 8)][0, 0]", "a[i, :, 0]"])
@pytest.mark.parametrize("call", ["pltpu.async_copy({arg}, b, s).wait()",
                                  "pltpu.sync_copy({arg}, b)",
                                  "pltpu.make_async_copy(b, {arg}, s).start()"])
def test_indexes_no_list_or_dict_takes_are_loads(arg, call):
    """A tuple index holding a slice, a `pl.ds(...)` index, or an index into an
    `.at[...]` view: only an array is indexed so, so the argument is a read
    (a list or dict would raise on it; JAX raises PAL101's error on the read)."""
    body = f"def k(a, b, s, i):\n    {call.format(arg=arg)}\n"
    assert [f.code for f in floor_only(body)] == ["PAL101"], body


# ---------------------------------------------------------------- negatives


@pytest.mark.parametrize("body", [
    # a list of Refs indexed gives a Ref
    "def k(refs, b, s):\n    pltpu.make_async_copy(refs[0], b, s).start()\n",
    "def k(refs, b, s):\n    pltpu.sync_copy(refs[0], b)\n",
    # views
    "def k(a, b, s):\n    pltpu.make_async_copy(a.at[...], b.at[:, ...], s).start()\n",
    # a slice of a list is a list: JAX fails otherwise, or not at all
    "def k(a, b, s):\n    pltpu.sync_copy(a[:], b[0:8])\n",
    # a dict of Refs keyed by tuples, a list indexed by a computed int
    "def k(d, b, s, i, j):\n    pltpu.make_async_copy(d[i, j], b, s).start()\n",
    "def k(refs, b, s, idx):\n    pltpu.async_copy(refs[idx[0]], b, s).wait()\n",
    # a function of the user's named `ds` (an int for a list)
    "def ds(i):\n    return i\n\ndef k(refs, b, s):\n    pltpu.sync_copy(refs[ds(0)], b)\n",
    # rebound descriptor name
    "def k(a, b, s, r, c):\n    d = pltpu.make_async_copy(a, b, s)\n"
    "    if c:\n        d = pltpu.make_async_remote_copy(a, b, s, r, device_id=(1,))\n"
    "    d.wait_send()\n",
    "def k(a, b, s):\n    global d\n    d = pltpu.make_async_copy(a, b, s)\n    d.wait_send()\n",
    "def k(a, b, s):\n    for d in [pltpu.make_async_copy(a, b, s)]:\n        d.wait_send()\n",
    # a remote copy has a send side
    "def k(a, b, s, r):\n    d = pltpu.make_async_remote_copy(a, b, s, r, device_id=(1,))\n"
    "    d.start()\n    d.wait_send()\n    d.wait_recv()\n",
    # wait_recv on a local copy is allowed
    "def k(a, b, s):\n    pltpu.make_async_copy(a, b, s).wait_recv()\n",
    # priorities
    "def k(a, b, s):\n    pltpu.async_copy(a, b, s, priority=0)\n"
    "    pltpu.make_async_copy(a, b, s).start(priority=1)\n",
    "def k(a, b, s, p):\n    pltpu.make_async_copy(a, b, s).start(priority=-p)\n",
    # (a descriptor returned, never started here: now reported as handed on,
    # test_floor_instances.py)
    # a wait-only descriptor that also escapes: it may be started elsewhere first
    "def k(a, b, s, out):\n    d = pltpu.make_async_copy(a, b, s[...])\n    out.append(d)\n"
    "    d.wait()\n",
    # device_id unknown: may be None too
    "def k(a, b, s, r, dev):\n    pltpu.make_async_remote_copy(a, b, None, r, device_id=dev).start()\n",
    # the user's own make_async_copy
    "def make_async_copy(a, b, s):\n    return (a, b, s)\n\n"
    "def k(a, b, s):\n    d = make_async_copy(a[...], b, s)\n    d.start()\n    d.wait_send()\n",
    # *args / **kwargs
    "def k(args, kw):\n    pltpu.async_copy(*args, priority=-1)\n",
])
def test_silent(body):
    # Some of these are mistakes the interpreter reports (a rebound name); the
    # floor, which only reads the text, leaves them alone.
    assert floor_only(body) == []


@pytest.mark.parametrize("body", [
    "def k(refs, b, s):\n    pltpu.make_async_copy(refs[0], b, s).start()\n",
    "def k(a, b, s):\n    pltpu.make_async_copy(a.at[...], b.at[:, ...], s).start()\n",
    "def k(a, b, s):\n    pltpu.make_async_copy(a, b, s).wait_recv()\n",
    "def k(a, b, s, r):\n    d = pltpu.make_async_remote_copy(a, b, s, r, device_id=(1,))\n"
    "    d.start()\n    d.wait_send()\n    d.wait_recv()\n",
])
def test_correct_code_gets_nothing(body):
    assert floor_only(body) == []
    assert run(body)[0].findings == []


def test_own_module_named_like_pallas_is_not_followed():
    header = "from mylib import tpu as pltpu\n"
    body = "def k(a, b, s):\n    pltpu.make_async_copy(a[...], b, s).start()\n"
    assert floor_only(body, header) == []


def test_gpu_code_is_out_of_scope():
    header = "from jax.experimental.pallas import mosaic_gpu as plgpu\n"
    body = ("def k(a, b, s):\n    plgpu.copy_gmem_to_smem(a[...], b, s)\n"
            "    plgpu.async_copy(a[...], b, s)\n")
    assert floor_only(body, header) == []


def test_relative_import_is_not_pallas():
    header = "from . import tpu as pltpu\n"
    body = "def k(a, b, s):\n    pltpu.async_copy(a[...], b, s)\n"
    assert floor_only(body, header) == []


def test_files_without_the_apis_are_not_walked():
    assert floor_only("def k(a):\n    return a[...]\n") == []


def test_code_after_a_return_is_left_alone():
    # after `return`: JAX never traces it
    body = """
    def k(a, b, s):
        pltpu.sync_copy(a, b)
        return
        pltpu.sync_copy(a[...], b)
    """
    assert floor_only(body) == []


# ---------------------------------------------------------------- what the function says of a name


@pytest.mark.parametrize("body, code", [
    # `a.at[...]` elsewhere: `a` is a Ref, so `a[i]` reads it
    ("def k(a, b, s, i):\n    pltpu.make_async_copy(a.at[0], b, s).start()\n"
     "    pltpu.make_async_copy(a[i], b, s).start()\n", "PAL101"),
    # a store `a[...] = v` shows the same
    ("def k(a, b, s, i):\n    a[...] = a[...] + 1\n    pltpu.sync_copy(a[i, 1], b)\n", "PAL101"),
    # the evidence in a `pl.when` body (a nested def): traced too
    ("def k(a, b, s, i):\n    @pl.when(i == 0)\n    def _():\n"
     "        pltpu.sync_copy(a.at[0], b)\n    pltpu.async_copy(b, a[i], s).wait()\n", "PAL101"),
    # through a temporary
    ("def k(a, b, s, i):\n    src = a[i]\n    pltpu.make_async_copy(a.at[0], b, s).start()\n"
     "    pltpu.make_async_copy(src, b, s).start()\n", "PAL101"),
    # a semaphore array given whole where `.at[i]` selects one elsewhere
    ("def k(a, b, sems):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
     "    pltpu.make_async_copy(a, b, sems).start()\n", "PAL103"),
    ("def k(a, b, ss, rs):\n"
     "    pltpu.make_async_remote_copy(a, b, ss.at[0], rs.at[0], device_id=(1,)).start()\n"
     "    pltpu.make_async_remote_copy(a, b, ss.at[1], rs, device_id=(1,)).start()\n", "PAL103"),
    ("def k(a, b, ss, rs):\n"
     "    pltpu.make_async_remote_copy(a, b, ss.at[0], rs.at[0], device_id=(1,)).start()\n"
     "    pltpu.make_async_remote_copy(a, b, ss, rs.at[1], device_id=(1,)).start()\n", "PAL104"),
    # the bare array moved to a temporary first
    ("def k(a, b, sems):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
     "    s = sems\n    pltpu.make_async_copy(a, b, s).start()\n", "PAL103"),
    # evidence before an `if` that holds the DMA: traced whenever the DMA is
    ("def k(a, b, sems, c):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
     "    if c:\n        pltpu.async_copy(a, b, sems).wait()\n", "PAL103"),
])
def test_the_function_says_the_name_is_a_ref(body, code):
    got = floor_only(body)
    assert [f.code for f in got] == [code], body
    f = got[0]
    if code == "PAL101" and "holds a read" in f.detail:
        assert not f.fixes  # the read is on another line: no edit at the argument
    elif code == "PAL101":
        assert f.fixes and ".at[" in f.fixes[0].edits[0].new_text
    else:
        assert f.message == "Cannot signal on a non-()-shaped semaphore: …"
        assert "selects one of them with" in f.detail
        assert f.fixes and not f.fixes[0].safe


@pytest.mark.parametrize("body", [
    # no evidence: `refs` may be a list of Refs
    "def k(refs, b, s):\n    pltpu.make_async_copy(refs[0], b, s).start()\n",
    # evidence in another function binds another name
    "def j(a, b, s):\n    pltpu.make_async_copy(a.at[0], b, s).start()\n\n"
    "def k(a, b, s):\n    pltpu.make_async_copy(a[0], b, s).start()\n",
    # evidence only under a branch the DMA is not in
    "def k(a, b, sems, c):\n    if c:\n        pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
    "    else:\n        pltpu.make_async_copy(a, b, sems).start()\n",
    "def k(a, b, sems, c):\n    if c:\n        pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
    "    pltpu.make_async_copy(a, b, sems).start()\n",
    "def k(a, b, s):\n    try:\n        pltpu.sync_copy(a.at[0], b)\n    except AttributeError:\n"
    "        pass\n    pltpu.sync_copy(a[0], b)\n",
    "def k(a, b, s):\n    x = [a.at[1] for _ in range(2) if s]\n    pltpu.sync_copy(a[0], b)\n",
    # the name is bound twice: two values
    "def k(a, b, s):\n    pltpu.make_async_copy(a.at[0], b, s).start()\n    a = [b, b]\n"
    "    pltpu.make_async_copy(a[0], b, s).start()\n",
    # `.at[...]` alone is taken by a scalar semaphore as well
    "def k(a, b, sem):\n    pltpu.make_async_copy(a, b, sem.at[...]).start()\n"
    "    pltpu.make_async_copy(a, b, sem).start()\n",
    # (a wait-only descriptor given the whole array: tracing accepts it, the
    # TPU lowering does not: PAL406, test_floor_instances.py)
    # a global name may be anything
    "def k(b, s):\n    global a\n    pltpu.sync_copy(a.at[0], b)\n    pltpu.sync_copy(a[0], b)\n",
])
def test_no_evidence_no_finding(body):
    assert floor_only(body) == [], body


def test_a_name_the_file_never_binds_is_one_value_in_its_function():
    """A docs page's functions use the kernel's parameters without binding
    them: within one top-level function the placeholder is one value."""
    body = ("def scatter(e):\n    def one(i):\n"
            "        pltpu.make_async_copy(src.at[i], dst.at[i], recv_sems.at[e]).start()\n"
            "        pltpu.async_remote_copy(src.at[i], dst.at[i], send_sems.at[e], recv_sems,\n"
            "                                device_id=(1,))\n    return one\n")
    got = floor_only(body)
    assert [f.code for f in got] == ["PAL103"]
    assert "recv_sems.at[e]" in got[0].detail


def test_unbound_names_are_one_value_across_the_files_functions():
    """A docs page splits one kernel into functions that use its parameters."""
    body = ("def scatter(e):\n    pltpu.make_async_copy(x, y, sems.at[e]).start()\n\n"
            "def gather(e):\n    pltpu.make_async_copy(y, x, sems).start()\n")
    assert [f.code for f in floor_only(body)] == ["PAL103"]


@pytest.mark.parametrize("body", [
    # module-level snippets: maybe different snippets' things
    "pltpu.make_async_copy(x.at[0], y, sems.at[0]).start()\n"
    "pltpu.async_copy(x, y, sems)\n"
    "pltpu.async_copy(x[0], y, s)\n",
    "pltpu.make_async_copy(x, y, sems.at[0]).start()\n\n"
    "def f():\n    pltpu.async_copy(x, y, sems)\n",
])
def test_unbound_names_at_module_level_are_left_alone(body):
    assert floor_only(body) == [], body


# ------------------------------------------------ a descriptor name bound in several loops

_LOOPS = ("def k(a, b, sends, recvs, rank):\n"
          "    with ctx():\n"
          "        for o in (1, 2):\n"
          "            dma = pltpu.make_async_remote_copy(a.at[0], b.at[o], sends.at[o], {R1},\n"
          "                                               device_id=(rank ^ o,))\n"
          "            dma.start()\n"
          "    for o in (1, 2):\n"
          "        dma = pltpu.make_async_remote_copy(a.at[1], b.at[o], sends.at[o], {R2},\n"
          "                                           device_id=(rank ^ o,))\n"
          "        dma.start()\n")


def test_each_start_reads_the_assignment_just_above_it():
    """A collective builds `dma` in each of its loops: the name has several
    bindings, but each `dma.start()` follows its own."""
    got = floor_only(_LOOPS.format(R1="recvs", R2="recvs.at[o]"))
    assert [(f.code, f.span.line) for f in got] == [("PAL103", HEADER.count("\n") + 3)]
    assert floor_only(_LOOPS.format(R1="recvs.at[o]", R2="recvs.at[o]")) == []


@pytest.mark.parametrize("body", [
    # the start comes after branches that bind the name two ways: either one
    "def k(a, b, sems, c):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
    "    if c:\n        dma = pltpu.make_async_copy(a, b, sems)\n"
    "    else:\n        dma = pltpu.make_async_copy(a, b, sems.at[1])\n    dma.start()\n",
    # the name is rebound between the assignment and the start
    "def k(a, b, sems, other):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
    "    dma = pltpu.make_async_copy(a, b, sems)\n    dma = other\n    dma.start()\n"
    "    dma = pltpu.make_async_copy(a, b, sems.at[1])\n",
])
def test_a_start_no_single_assignment_explains_is_not_followed(body):
    assert floor_only(body) == [], body


def test_a_parameter_rebound_to_a_descriptor_just_above_its_use():
    """`d` is a parameter and is assigned: two bindings, but the wait reads
    the assignment on the line above (a local copy has no send side)."""
    body = "def k(a, b, s, d):\n    d = pltpu.make_async_copy(a, b, s)\n    d.wait_send()\n"
    assert [f.code for f in floor_only(body)] == ["PAL106"]


# ------------------------------------------------ evidence handed between the file's functions

_HANDED = ("def ring(a, b, recvs, step):\n"
           "    pltpu.make_async_copy(a, b, {INNER}).start()\n\n"
           "def reduce(a, b, recvs, step):\n"
           "{GUARD}    ring(a, b, recvs=recvs, step=step)\n"
           "    pltpu.make_async_copy(a, b, {OUTER}).start()\n")


@pytest.mark.parametrize("inner, outer, line", [
    # the caller indexes the array it hands over: the callee's bare use is the whole array
    ("recvs", "recvs.at[step]", 2),
    # the callee indexes what it is always handed: the caller's bare use is too
    ("recvs.at[step]", "recvs", 6),
])
def test_a_name_handed_to_a_function_of_the_file_carries_its_evidence(inner, outer, line):
    got = floor_only(_HANDED.format(INNER=inner, OUTER=outer, GUARD=""))
    # (`line`: 1-based in the body; spans are 0-based)
    assert [(f.code, f.span.line) for f in got] == [("PAL103", HEADER.count("\n") + line - 1)]
    assert "handed on by the call on line" in got[0].detail


@pytest.mark.parametrize("inner, outer, guard", [
    # the call only under a branch the caller's DMA is not in
    ("recvs.at[step]", "recvs", "    if step:\n    "),
    # the caller's evidence under a branch the call is not in
    ("recvs", "recvs.at[step] if step else recvs.at[0]", ""),
    # both fine
    ("recvs.at[step]", "recvs.at[step]", ""),
])
def test_handed_evidence_keeps_its_branch_conditions(inner, outer, guard):
    body = _HANDED.format(INNER=inner, OUTER=outer, GUARD=guard)
    assert floor_only(body) == [], body


def test_evidence_in_a_callee_under_a_branch_does_not_travel():
    body = ("def ring(a, b, recvs, step):\n    if step:\n"
            "        pltpu.make_async_copy(a, b, recvs.at[step]).start()\n\n"
            "def reduce(a, b, recvs, step):\n    ring(a, b, recvs, step)\n"
            "    pltpu.make_async_copy(a, b, recvs).start()\n")
    assert floor_only(body) == []
