"""Kernel code no launch in the file reaches (its launcher lives in another
repository): state a pipeline object keeps on `self`, and Refs handed on
to a helper that makes the DMA, are Refs by their use.

Before, a method's `self.sems.at[slot]` and a wrapper's parameters passed
through `_copy(hbm, buf, sems, l)` were unknown, so such modules' DMA
sites were unknown to coverage."""
from __future__ import annotations

import ast

from conftest import HEADER, run

from pallas_lsp.engine import standalone

SRC = '''
@dataclasses.dataclass(frozen=True)
class Ring:
    hbm: jax.Array
    buf: jax.Array
    sems: jax.Array

    def stage(self, slot):
        pltpu.make_async_copy(self.hbm.at[slot], self.buf.at[slot], self.sems.at[slot]).start()

    def drain(self, slot):
        sem = self.sems.at[slot]
        pltpu.make_async_copy(self.hbm.at[slot], self.buf.at[slot], sem).wait()


def _copy(hbm, buf, sems, l):
    return pltpu.make_async_copy(hbm.at[l], buf.at[l % 2], sems.at[l % 2])


def prefetch(hbm, buf, sems, l):
    _copy(hbm, buf, sems, l).start()


def wait(hbm, buf, sems, l):
    _copy(hbm, buf, sems, l).wait()
'''


def _coverage(tmp_path, text: str) -> str:
    from pallas_lsp.check import coverage_report
    path = tmp_path / "ring.py"
    path.write_text(text, encoding="utf-8")
    return coverage_report.run([path], use_config=False)[0]


def test_the_sites_are_known_and_the_code_is_clean(tmp_path):
    analysis, text = run(SRC, HEADER + "import dataclasses\n")
    assert analysis.findings == []
    report = _coverage(tmp_path, text)
    assert "DMA 3/3" in report, report


def test_an_array_update_is_not_a_ref():
    func = ast.parse('''
def f(self, i):
    pltpu.sync_copy(self.src, self.dst)
    y = self.table.at[i].set(0)
    pltpu.semaphore_signal(self.sems.at[i])
''').body[0]
    assert standalone.ref_attrs(func) == ["dst", "sems", "src"]


def test_refs_by_use_pass_through_helpers_but_not_through_star_args():
    tree = ast.parse('''
def leaf(a, b):
    pltpu.sync_copy(a.at[0], b)

def mid(x, y, z):
    leaf(x, y)

def top(p, q, r):
    mid(p, q, r)

def starry(p, q):
    leaf(*(p, q))
''')
    defs = {n.name: n for n in tree.body}
    assert standalone.ref_params(defs["top"], defs) == ["p", "q"]
    assert standalone.ref_params(defs["top"]) == []  # without the file's defs: by its own use
    assert standalone.ref_params(defs["starry"], defs) == []


def test_a_helper_that_calls_itself_is_followed_once():
    tree = ast.parse('''
def loop(a, n):
    if n:
        loop(a, n - 1)
    pltpu.sync_copy(a.at[0], a.at[1])
''')
    defs = {n.name: n for n in tree.body}
    assert standalone.ref_params(defs["loop"], defs) == ["a"]


PAGE = '''# Ring reduce

The kernel's refs are `tokens_hbm`, `buf_vmem` and `sems`:

```python
def ring_step(step, carry):
    pltpu.make_async_copy(tokens_hbm.at[step], buf_vmem.at[step % 2], sems.at[step % 2]).start()
    pltpu.make_async_copy(tokens_hbm.at[step], buf_vmem.at[step % 2], sems.at[step % 2]).wait()
    return carry
```
'''


def test_a_pages_placeholders_used_as_refs_are_refs(tmp_path):
    # `tokens_hbm` and friends are the kernel's parameters, which the page
    # leaves out: used as Refs, they are Refs (shapes and spaces unknown).
    page = tmp_path / "ring.md"
    page.write_text(PAGE.replace("```python\n", "```python\n"
                                 "from jax.experimental.pallas import tpu as pltpu\n\n"),
                    encoding="utf-8")
    report = _coverage_path(page)
    assert "DMA 2/2" in report, report


def _coverage_path(path) -> str:
    from pallas_lsp.check import coverage_report
    return coverage_report.run([path], use_config=False)[0]


def test_which_names_a_module_never_binds():
    tree = ast.parse('''
import numpy as np
from x import y as z
CONST = 1
for i in range(3):
    pass
def f(a, *rest, k=1):
    b = a + placeholder + CONST + np.pi + z + i + len(rest)
    global made_global
    made_global = b
    def g(c):
        return c + inner_free
class C:
    attr = class_free
''')
    got = standalone.unbound_names(tree)
    assert {"placeholder", "inner_free", "class_free"} <= got
    # (a function's own names are in it too: `free_refs` leaves those out)
    assert not got & {"np", "z", "CONST", "i", "made_global", "f", "C", "len", "range"}
    assert standalone.unbound_names(ast.parse("from m import *\nx = placeholder\n")) == frozenset()


def test_a_placeholder_bound_in_the_function_is_not_free():
    func = ast.parse('''
def f(sems):
    buf_vmem = make()
    pltpu.sync_copy(tokens_hbm.at[0], buf_vmem)
    pltpu.semaphore_signal(sems.at[0])
''').body[0]
    assert standalone.free_refs(func, frozenset({"tokens_hbm", "buf_vmem", "sems"})) == \
        ["tokens_hbm"]
