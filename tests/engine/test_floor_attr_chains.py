"""State kept on an object the instance keeps: `self.scratch.sems.at[slot]`
(a pipeline class handed a dataclass of scratch Refs). The floor reads
`self.scratch.sems` as it reads `self.sems`: where the class writes
`.at[slot]` on it, a bare `self.scratch.sems` given to a started DMA is a
whole semaphore array, and `self.scratch.bufs[slot]` is a read. It holds
when every method sees one object (`self.scratch` assigned once) and one
value (`self.scratch.sems` never assigned)."""
from __future__ import annotations

import textwrap

import pytest
from conftest import HEADER, jax_prints, jax_refuses, line_of, run, run_jax
from test_floor_instances import RING as INSTANCE_RING
from test_floor_instances import floor_only

# test_floor_instances' ring, its state moved onto a scratch object it keeps
RING = """
@dataclasses.dataclass(frozen=True)
class Scratch:
    bufs: jax.Array
    sems: jax.Array

""" + INSTANCE_RING.replace(
    "    def __init__(self, bufs, sems):\n        self.bufs = bufs\n        self.sems = sems\n",
    "    def __init__(self, scratch):\n        self.scratch = scratch\n").replace(
    "self.bufs", "self.scratch.bufs").replace("self.sems", "self.scratch.sems").replace(
    "ring = Ring(bufs, sems)", "ring = Ring(Scratch(bufs, sems))")
assert "self.scratch = scratch" in RING and "Ring(Scratch(" in RING

HEAD = HEADER + "import dataclasses\n"
OK = {"DST": "self.scratch.bufs.at[slot]", "SEM": "self.scratch.sems.at[slot]"}
BUGS = {
    "read": ({"DST": "self.scratch.bufs[slot]"}, "PAL101",
             "DMA source/destination/semaphore arguments must be Refs."),
    "whole array": ({"SEM": "self.scratch.sems"}, "PAL103",
                    "Cannot signal on a non-()-shaped semaphore: (2,)"),
}


def _ring(edits: dict, text: str = RING) -> str:
    for k, v in {**OK, **edits}.items():
        text = text.replace(k, v)
    return text


@pytest.mark.parametrize("case", sorted(BUGS))
def test_the_floor_reports_it(case):
    edits, code, _ = BUGS[case]
    body = _ring(edits)
    got = floor_only(body.replace("@dataclasses.dataclass(frozen=True)\n", ""))
    src = HEADER + textwrap.dedent(body.replace("@dataclasses.dataclass(frozen=True)\n", ""))
    assert [(f.code, f.span.line) for f in got] == [(code, line_of(src, "# SITE"))]


def test_the_twin_gets_nothing():
    assert floor_only(_ring({})) == []
    assert run(_ring({}), HEAD)[0].findings == []


@pytest.mark.parametrize("body", [
    # the object is replaced in another method: two objects
    _ring({"SEM": "self.scratch.sems"}).replace(
        "    def start(self):", "    def reset(self, other):\n        self.scratch = other\n\n"
                               "    def start(self):"),
    # the attribute itself is assigned: another value
    _ring({"SEM": "self.scratch.sems"}).replace(
        "    def start(self):", "    def swap(self, s):\n        self.scratch.sems = s\n\n"
                               "    def start(self):"),
    # no evidence on the chain: only on another attribute of the object
    _ring({"SEM": "self.scratch.sems"}).replace("self.scratch.sems.at[slot]).wait()",
                                                "self.scratch.other.at[slot]).wait()"),
])
def test_silent(body):
    assert floor_only(body) == []


def _jax(edits: dict):
    return run_jax(HEAD + textwrap.dedent(_ring(edits)) +
                   "\nx = jnp.ones((2, 8, 128), jnp.float32)\nprint(float(copy(x).sum()))\n")


def test_jax_runs_the_twin():
    jax_prints(_jax({}), "2048.0")


@pytest.mark.parametrize("case", sorted(BUGS))
def test_jax_refuses_the_bug(case):
    edits, _, message = BUGS[case]
    jax_refuses(_jax(edits), message)
