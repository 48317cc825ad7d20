"""The syntax floor on descriptors handed on and on state kept on an instance.

- A descriptor a function returns, stores or passes on is started or waited
  where the function cannot see (a pipeline class's list of copies, a
  caller in another file). A read among its Refs (`x[...]`, or `x[i]` where
  the file shows `x` is a Ref) is wrong either way: JAX refuses it at the
  start, or at the wait.
- `self.x` of a class that assigns it once is one value in all its methods:
  `self.bufs.at[slot]` in one method shows that `self.bufs[slot]` handed to
  a DMA in another is a read, and `self.sems.at[slot]` that a bare
  `self.sems` is a whole array of semaphores.
JAX, in TPU interpret mode, rejects each bug and runs each twin."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, line_of, run, run_jax

from pallas_lsp.engine.events import Events
from pallas_lsp.engine.rules import syntax_floor
from pallas_lsp.engine.rules._base import Context
from pallas_lsp.engine.source import parse


def floor_only(body: str) -> list:
    return list(syntax_floor.check(Context(src=parse(HEADER + textwrap.dedent(body)),
                                           events=Events())))


RING = '''
class Ring:
    def __init__(self, bufs, sems):
        self.bufs = bufs
        self.sems = sems
        self.copies = []

    def fetch(self, src, slot):
        self.copies.append(pltpu.make_async_copy(src.at[slot], DST, SEM))  # SITE

    def start(self):
        for c in self.copies:
            c.start()

    def drain(self, slot):
        pltpu.make_async_copy(self.bufs.at[slot], self.bufs.at[slot], self.sems.at[slot]).wait()


def kernel(x_hbm, o_hbm, bufs, sems):
    ring = Ring(bufs, sems)
    for slot in range(2):
        ring.fetch(x_hbm, slot)
    ring.start()
    for slot in range(2):
        ring.drain(slot)
    pltpu.sync_copy(bufs, o_hbm)


def copy(x):
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA((2,))],
        interpret=pltpu.InterpretParams())(x)
'''

OK = {"DST": "self.bufs.at[slot]", "SEM": "self.sems.at[slot]"}
BUGS = {
    "read of an attribute": ({"DST": "self.bufs[slot]"}, "PAL101"),
    "whole semaphore array on an attribute": ({"SEM": "self.sems"}, "PAL103"),
    "read of a parameter": ({"DST": "self.bufs.at[slot]", "src.at[slot]": "src[slot]"}, "PAL101"),
}


def _ring(edits: dict) -> str:
    text = RING
    for k, v in {**OK, **edits}.items():
        text = text.replace(k, v)
    return text


# (the third is the interpreter's: nothing in the text shows `src` is a Ref)
@pytest.mark.parametrize("case", ["read of an attribute", "whole semaphore array on an attribute"])
def test_the_floor_reports_it(case):
    edits, code = BUGS[case]
    got = floor_only(_ring(edits))
    src = HEADER + textwrap.dedent(_ring(edits))
    assert [(f.code, f.span.line) for f in got] == [(code, line_of(src, "# SITE"))]


@pytest.mark.parametrize("case", sorted(BUGS))
def test_the_checker_reports_it(case):
    edits, code = BUGS[case]
    analysis, src = run(_ring(edits))
    assert (code, line_of(src, "# SITE")) in [(f.code, f.span.line) for f in analysis.findings]


def test_the_twin_gets_nothing():
    assert floor_only(_ring({})) == []
    assert run(_ring({}))[0].findings == []


@pytest.mark.parametrize("body", [
    # assigned twice: which value a method sees depends on the order of calls
    _ring({"DST": "self.bufs[slot]"}).replace(
        "    def start(self):", "    def reset(self, other):\n        self.bufs = other\n\n"
                               "    def start(self):"),
    # rebound by `+=` (a value set somewhere else first): two values
    _ring({"DST": "self.bufs[slot]"}).replace("        self.bufs = bufs\n", "").replace(
        "    def start(self):", "    def grow(self, more):\n        self.bufs += more\n\n"
                               "    def start(self):"),
    # another class's attribute of the same name is another value
    _ring({"DST": "self.bufs[slot]"}).replace(
        "pltpu.make_async_copy(self.bufs.at[slot], self.bufs.at[slot], self.sems.at[slot]).wait()",
        "pass").replace("class Ring:", "class Other:\n    def f(self):\n"
                        "        pltpu.sync_copy(self.bufs.at[0], self.bufs.at[1])\n\n\nclass Ring:"),
    # no evidence: `self.bufs` may be a list of Refs
    _ring({"DST": "self.bufs[slot]"}).replace(
        "pltpu.make_async_copy(self.bufs.at[slot], self.bufs.at[slot], self.sems.at[slot]).wait()",
        "pass"),
    # `self` rebound by a closure's own parameter
    '''
class Ring:
    def __init__(self, bufs):
        self.bufs = bufs

    def use(self):
        pltpu.sync_copy(self.bufs.at[0], self.bufs.at[1])

        def inner(self, s):
            return pltpu.make_async_copy(self.bufs[0], self.bufs[1], s)
        return inner
''',
])
def test_silent(body):
    assert floor_only(body) == []


HANDED_ON = {
    "returned": "def k(a, b, s):\n    return pltpu.make_async_copy(a[...], b, s)  # SITE\n",
    "stored": "def k(a, b, s, out):\n    out.append(pltpu.make_async_copy(a, b[0, :], s))  # SITE\n",
    "passed": "def k(a, b, s, run):\n    run(pltpu.make_async_copy(a, b, s[...]))  # SITE\n",
}


@pytest.mark.parametrize("case", sorted(HANDED_ON))
def test_a_descriptor_handed_on_with_a_read(case):
    body = HANDED_ON[case]
    got = floor_only(body)
    assert [(f.code, f.span.line) for f in got] == \
        [("PAL101", line_of(HEADER + body, "# SITE"))]
    assert "handed on" in got[0].detail


def _jax(edits: dict):
    return run_jax(HEADER + _ring(edits) + "\nx = jnp.ones((2, 8, 128), jnp.float32)\n"
                   "print(float(copy(x).sum()))\n")


def test_jax_runs_the_twin():
    p = _jax({})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "2048.0"


@pytest.mark.parametrize("case, message", [
    ("read of an attribute", "DMA source/destination/semaphore arguments must be Refs."),
    ("whole semaphore array on an attribute", "Cannot signal on a non-()-shaped semaphore: (2,)"),
    ("read of a parameter", "DMA source/destination/semaphore arguments must be Refs."),
])
def test_jax_refuses_the_bug(case, message):
    p = _jax(BUGS[case][0])
    assert p.returncode != 0
    assert message in p.stderr, p.stderr[-2000:]


# A wait-only descriptor given the whole array: PAL406 (the TPU lowering
# refuses it; tests/compile proves PAL406 itself against a deviceless compile).
WAITED = {
    "a name": "def k(a, b, sems):\n    pltpu.make_async_copy(a, b, sems.at[0]).start()\n"
              "    pltpu.make_async_copy(a, b, sems).wait()  # WAIT\n",
    "an attribute": RING.replace("SEM", "self.sems.at[slot]").replace("DST", "self.bufs.at[slot]")
    .replace("self.bufs.at[slot], self.sems.at[slot]).wait()",
             "self.bufs.at[slot], self.sems).wait()  # WAIT"),
}


@pytest.mark.parametrize("case", sorted(WAITED))
def test_a_wait_on_a_whole_array(case):
    body = WAITED[case]
    got = floor_only(body)
    assert [(f.code, f.span.line) for f in got] == \
        [("PAL406", line_of(HEADER + textwrap.dedent(body), "# WAIT"))]
    assert [f.code for f in run(body)[0].findings] == ["PAL406"]


def test_a_wait_on_one_semaphore_is_silent():
    body = WAITED["a name"].replace("b, sems).wait()", "b, sems.at[1]).wait()")
    assert floor_only(body) == []


def test_an_attribute_named_as_a_ref_is_one():
    # `self.pages_hbm_ref` assigned three ways (a view, None, a parameter): its
    # name is the evidence, as for a kernel parameter named so
    body = '''
class Copier:
    def __init__(self, pages_hbm_ref, buf, sem, head):
        if head is not None:
            self.pages_hbm_ref = pages_hbm_ref.at[head]
        elif buf is None:
            self.pages_hbm_ref = None
        else:
            self.pages_hbm_ref = pages_hbm_ref
        self.buf, self.sem = buf, sem

    def copy(self, page):
        return pltpu.make_async_copy(self.pages_hbm_ref[page], self.buf, self.sem)  # SITE
'''
    got = floor_only(body)
    assert [(f.code, f.span.line) for f in got] == \
        [("PAL101", line_of(HEADER + textwrap.dedent(body), "# SITE"))]
    assert floor_only(body.replace("self.pages_hbm_ref[page]", "self.pages_hbm_ref.at[page]")) == []
    assert floor_only(body.replace("pages_hbm_ref", "pages")) == []


# Flags: a name bound to None on the path that does not use it, and two
# `if` statements on the same flag, one in the DMA's function and one in
# the evidence's. A None has no `.at`, so the evidence speaks of the other
# binding; two `if not fused:` read one flag, so they take the same arm.
FLAGS = '''
def build(fused):
    def kernel(x_hbm, o_hbm, *refs):
        if fused:
            buf, sems = refs
            extra = None
        else:
            buf, extra, sems = refs

        def issue():
            if not fused:
                pltpu.make_async_copy(x_hbm, DST, sems.at[0]).start()  # SITE

        def ready():
            if not fused:
                pltpu.make_async_copy(x_hbm, extra.at[0], sems.at[0]).wait()

        issue()
        ready()
        pltpu.sync_copy(buf, o_hbm)
    return kernel
'''


def test_evidence_across_a_none_binding_and_one_flag():
    body = FLAGS.replace("DST", "extra[0]")
    got = floor_only(body)
    src = HEADER + textwrap.dedent(body)
    assert [(f.code, f.span.line) for f in got] == [("PAL101", line_of(src, "# SITE"))]
    assert floor_only(FLAGS.replace("DST", "extra.at[0]")) == []


@pytest.mark.parametrize("change", [
    # another flag: the evidence's arm may not run when the DMA's does
    ("            if not fused:\n                pltpu.make_async_copy(x_hbm, extra.at[0]",
     "            if not other:\n                pltpu.make_async_copy(x_hbm, extra.at[0]"),
    # a second binding in a loop: which one the DMA reads is not known
    ("            extra = None", "            for extra in refs:\n                pass"),
    # a test that calls: each evaluation is its own decision
    ("            if not fused:\n                pltpu.make_async_copy(x_hbm, DST",
     "            if not fused():\n                pltpu.make_async_copy(x_hbm, DST"),
])
def test_evidence_needs_the_same_decision_and_one_binding(change):
    old, new = change
    body = FLAGS.replace(old, new)
    assert old in FLAGS
    assert floor_only(body.replace("DST", "extra[0]")) == []


# A name bound in both arms of an `if` (a builder's flags choose how the
# refs unpack): after the last binding, each call reads one value, so
# `bufs.at[0]` there shows the `bufs[0]` handed to a DMA there is a read.
ARMS = '''
def kernel(x_hbm, o_hbm, *refs):
    if len(refs) == 2:
        bufs, sems = refs
    else:
        bufs, extra, sems = refs
    pltpu.make_async_copy(x_hbm, DST, sems.at[0]).start()  # SITE
    pltpu.make_async_copy(x_hbm, bufs.at[0], sems.at[0]).wait()
    pltpu.sync_copy(bufs.at[0], o_hbm)
'''


def test_evidence_after_every_binding_counts():
    body = ARMS.replace("DST", "bufs[0]")
    src = HEADER + textwrap.dedent(body)
    assert [(f.code, f.span.line) for f in floor_only(body)] == [("PAL101", line_of(src, "# SITE"))]
    assert floor_only(ARMS.replace("DST", "bufs.at[0]")) == []


@pytest.mark.parametrize("old, new", [
    # bound in a loop: each pass may bind another value
    ("    if len(refs) == 2:\n        bufs, sems = refs\n",
     "    for bufs in refs[:1]:\n        pass\n    if len(refs) == 2:\n        sems = refs[1]\n"),
    # bound again after the DMA: the DMA may read the first value
    ("    pltpu.sync_copy(bufs.at[0], o_hbm)", "    bufs = refs\n    pltpu.sync_copy(bufs.at[0], o_hbm)"),
    # a parameter of the same name: what the caller passed is not settled
    ("def kernel(x_hbm, o_hbm, *refs):", "def kernel(x_hbm, o_hbm, bufs, *refs):"),
])
def test_evidence_needs_settled_bindings(old, new):
    assert old in ARMS
    assert floor_only(ARMS.replace(old, new).replace("DST", "bufs[0]")) == []


# A nested def runs where it is called: evidence in a helper the kernel
# only calls under `if pipelined:` says nothing of a DMA in the `else` arm
# (there `sem` is one semaphore; with pipelining, an array).
CALLED = '''
def build(pipelined):
    def kernel(x_hbm, o_hbm, buf, sem):
        def descriptor(i):
            return pltpu.make_async_copy(x_hbm.at[i], buf, sem.at[i])

        if pipelined:
            descriptor(0).start()
            descriptor(0).wait()
        else:
            pltpu.async_copy(x_hbm.at[0], buf, sem).wait()  # SITE
        pltpu.sync_copy(buf, o_hbm)
    return kernel
'''


def test_evidence_in_a_helper_called_under_a_branch_stays_there():
    assert floor_only(CALLED) == []


def test_evidence_in_a_helper_called_on_every_path_counts():
    body = CALLED.replace("        if pipelined:\n", "        descriptor(1).start()\n"
                          "        descriptor(1).wait()\n        if pipelined:\n")
    src = HEADER + textwrap.dedent(body)
    assert [(f.code, f.span.line) for f in floor_only(body)] == [("PAL103", line_of(src, "# SITE"))]
