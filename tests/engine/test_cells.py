"""engine/cells.py: notebooks, Markdown and rst pages as one program, with
positions mapped back; and the engine on docs-style code with placeholders."""
from __future__ import annotations

import json
import textwrap

import pytest

from pallas_lsp.engine import analyze
from pallas_lsp.engine.cells import (MARKDOWN, NOTEBOOK, RST, DocumentError, document_kind,
                                     python_of, read_notebook, to_program)
from pallas_lsp.engine.source import parses

IMPORTS = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
           "from jax.experimental.pallas import tpu as pltpu\n")
BUGGY = ("def kernel(x_ref, o_ref, sem):\n"
         "    copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n"
         "    copy.start()\n"
         "    copy.wait()\n")
LAUNCH = ("def run(x):\n"
          "    return pl.pallas_call(\n"
          "        kernel,\n"
          "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
          "        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
          "        out_specs=pl.BlockSpec(memory_space=pl.ANY),\n"
          "        scratch_shapes=[pltpu.SemaphoreType.DMA(())],\n"
          "    )(x)\n")


def nb(*cells, language="python", **dump) -> str:
    body = {"cells": [{"cell_type": kind, "metadata": {}, "source": src,
                       **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                      for kind, src in cells],
            "metadata": {"kernelspec": {"language": language, "name": "k"}},
            "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(body, **(dump or {"indent": 1})) + "\n"


def findings_in(program):
    """(code, cell number, line, col) of each finding, 1-based, mapped back."""
    out = []
    for f in analyze(program.text, "doc").findings:
        cell, span = program.span(f.span)
        out.append((f.code, cell.number, span.line + 1, span.col + 1))
    return sorted(out)


def test_kinds_by_suffix():
    assert document_kind("a/b.ipynb") == NOTEBOOK and document_kind("R.MD") == MARKDOWN
    assert document_kind("x.rst") == RST and document_kind("k.py") is None
    assert document_kind("notes") is None


def test_cells_in_order_with_markdown_left_out_and_sources_as_list_or_string():
    text = nb(("markdown", ["# title\n", "text"]), ("code", ["a = 1\n", "b = 2"]),
              ("raw", "raw text"), ("code", "c = 3\n"))
    p = to_program(text, NOTEBOOK)
    assert p.text == "a = 1\nb = 2\nc = 3\n"
    assert [c.number for c in p.cells] == [2, 4]  # counted among all cells, 1-based
    assert p.position(2, 0).cell.number == 4 and p.position(2, 0).line == 0
    assert p.position(1, 4).line == 1 and p.position(1, 4).col == 4
    assert p.cell_at(99) is None
    got = read_notebook(text).cells
    assert [c.is_list for c in got] == [True, True, False, False]
    a, b = got[1].span
    assert json.loads(text[a:b]) == ["a = 1\n", "b = 2"]


def test_kernel_in_one_cell_launched_in_a_later_one_is_followed():
    text = nb(("code", IMPORTS), ("markdown", "between"), ("code", BUGGY),
              ("code", "x = 1"), ("code", LAUNCH + "y = run(jnp.ones((8, 128)))\n"))
    p = to_program(text, NOTEBOOK)
    assert findings_in(p) == [("PAL101", 3, 2, 34), ("PAL204", 3, 2, 34)]
    # Without the launch the kernel is still read, but its x_ref is not known to be in ANY.
    alone = to_program(nb(("code", IMPORTS), ("code", BUGGY)), NOTEBOOK)
    assert ("PAL101", 2, 2, 34) in findings_in(alone)


def test_magics_are_neutralised_in_place():
    lines = ["%matplotlib inline", "!pip install jax", "files = !ls", "%time y = f(1)",
             "%timeit -n 3 f(2)", "jnp.ones?", "for i in range(2):", "    !echo $i",
             "z = (4", "     % 3)"]
    out, error, changed = python_of(lines)
    assert error is None and len(out) == len(lines) and parses("\n".join(out))
    assert out[:3] == ["pass", "pass", "pass"]
    assert out[3] == "pass; y = f(1)" and out[3].index("y") == lines[3].index("y")
    assert out[4] == "pass" and out[5] == "pass" and out[7] == "    pass"
    assert changed == {0, 1, 2, 3, 4, 5, 7}
    # A cell that parses is left alone: `% 3` there is Python's modulo.
    assert python_of(["z = (4", "     % 3)"]) == (["z = (4", "     % 3)"], None, set())


def test_magic_like_lines_inside_strings_brackets_and_continuations_stay():
    lines = ['doc = """', "%d items", '"""', "total = (1", "         % 2)", "w = 1 \\",
             "    % 3", 's = "(" # )', "!echo done", "t = '\\'' + (", "  1)"]
    out, error, changed = python_of(lines)
    assert error is None and changed == {8} and out[8] == "pass"
    assert out[:8] == lines[:8] and out[9:] == lines[9:]


def test_a_shell_escape_continued_by_backslashes_is_the_shells_to_its_end():
    """IPython hands `!cmd \\` and its continuation lines to the shell as one
    command; their `--flag` lines are not Python (a notebook's benchmark cell)."""
    lines = ["!python run.py \\", "    --levels 1 2 \\", "    --size SMALL", "x = 1 + \\", "  2",
             "files = !ls \\", "   /tmp", "    !echo a"]
    out, error, changed = python_of(lines[:-1])
    assert error is None and out == ["pass", "", "", "x = 1 + \\", "  2", "pass", ""]
    assert changed == {0, 1, 2, 5, 6}
    # Without a backslash the next line is Python again (here a wrong indent).
    assert python_of(["!echo a", "    b = 1"])[1] is not None


def test_cell_magics():
    out, error, changed = python_of(["%%bash", "echo hi", "def f(:"])
    assert out == ["", "", ""] and error is None and changed == {0, 1, 2}
    out, _, _ = python_of(["%%timeit", "f(1)"])  # runs in its own namespace: left out
    assert out == ["", ""]
    out, _, changed = python_of(["", "%%time", "y = f(1)"])  # the body runs: kept
    assert out == ["", "", "y = f(1)"] and changed == {1}
    # Parsed, though the symbol table objects (the engine reads it as it is).
    assert python_of(["nonlocal x", "!ls"]) == (["nonlocal x", "pass"], None, {1})


def test_a_broken_cell_is_contained_and_reported_where_it_is():
    text = nb(("code", IMPORTS), ("code", "def broken(:\n    pass\nq = 1"),
              ("code", "x = (1,\n"), ("code", BUGGY), ("code", LAUNCH + "y = run(jnp.ones((8, 128)))\n"))
    p = to_program(text, NOTEBOOK)
    assert parses(p.text)
    errors = {c.number: c.error for c in p.cells if c.error}
    assert set(errors) == {2, 3}
    assert errors[2][:2] == (0, 11)
    assert p.text.split("\n")[p.cells[1].start + 2] == "q = 1"  # the rest of the cell stays
    assert ("PAL101", 4, 2, 34) in findings_in(p)


def test_a_notebook_of_another_language_is_not_read():
    p = to_program(nb(("code", "x <- 1"), language="R"), NOTEBOOK)
    assert p.text == "" and p.cells == () and "R notebook" in p.note


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ("[1, 2]", "not a JSON object"),
    ('{"cells": [', "invalid JSON at line 1 column 12"),
    ('{"cells": 3}', "`cells` is not a list"),
    ('{"metadata": {}}', "no `cells` list"),
    ('{"worksheets": [], "nbformat": 3}', "nbformat 3 or older"),
    ('{"cells": [], "nbformat": 3}', "nbformat 3"),
    ('{"cells": ["x"]}', "cell 1 is not an object"),
    ('{"cells": [{"source": "x"}]}', "cell 1 has no `cell_type`"),
    ('{"cells": [{"cell_type": "code"}]}', "cell 1 has no `source`"),
    ('{"cells": [{"cell_type": "code", "source": ["a", 1]}]}', "string or a list of strings"),
    ('{"cells": [], "metadata": []}', "`metadata` is not an object"),
    ('{"cells": []} {}', "Extra data"),
])
def test_malformed_notebooks_are_one_clear_error(text, says):
    with pytest.raises(DocumentError) as exc:
        to_program(text, NOTEBOOK)
    assert says in str(exc.value)


def test_markdown_fences():
    page = textwrap.dedent("""\
        # Title

        ```python
        a = 1
        ```

        ```
        not python, no language
        ```

        ```bash
        pip install jax
        ```

        1. In a list:

           ~~~py
           b = 2
           ~~~

        ````markdown
        ```python
        shown = "as an example of Markdown, not run"
        ```
        ````

        ```pycon
        >>> d = 4
        >>> for i in range(2):
        ...     print(i)
        0
        1
        ```
        """)
    p = to_program(page, MARKDOWN)
    assert p.text.split("\n") == ["a = 1", "b = 2", "d = 4", "for i in range(2):",
                                  "    print(i)"]
    assert (p.position(1, 0).line, p.position(1, 0).col) == (17, 3)  # b, indented in the list
    assert (p.position(4, 4).line, p.position(4, 4).col) == (29, 8)  # print, after `... `
    assert p.relabel("made at line 2, col 1; line 3") == "made at line 18, col 4; line 28"


def test_a_myst_notebook_page_is_its_code_cells():
    """jupytext / MyST-NB: the {code-cell} blocks are the notebook's cells;
    its ```python fences are prose there (Markdown cells in the .ipynb)."""
    page = textwrap.dedent("""\
        ---
        jupytext:
          formats: ipynb,md:myst
        ---

        ```{code-cell} ipython3
        ---
        id: abc
        ---
        %matplotlib inline
        c = 3
        ```

        ```python
        def signature(a, b) -> None:
        ```

        ```{code-cell} ipython3
        :tags: [hide-input]
        d = c
        ```
        """)
    p = to_program(page, MARKDOWN)
    assert p.text.split("\n") == ["", "", "", "pass", "c = 3", "", "d = c"]
    assert [c.error for c in p.cells] == [None, None]
    assert (p.position(6, 0).line, p.position(6, 0).col) == (19, 0)


def test_a_pages_block_that_does_not_parse_is_left_out_whole():
    page = "```python\ndef kernel(...):\n    x = 1\n```\n\n```python\ny = 2\n```\n"
    p = to_program(page, MARKDOWN)
    assert p.text.split("\n") == ["", "", "y = 2"]
    assert p.cells[0].error is not None and p.cells[1].error is None


def test_rst_code_blocks_and_doctests():
    page = textwrap.dedent("""\
        Title
        =====

        .. code-block:: python
           :linenos:

           a = 1
           def f():
               return a

        .. code-block:: bash

           >>> not python
        Plain literal block::

            b = unknown_language_maybe

        A doctest block:

        >>> c = 3
        >>> c
        3

        .. testcode::

           d = 4

        .. code:: py

            e = 5
        """)
    p = to_program(page, RST)
    assert p.text.split("\n") == ["a = 1", "def f():", "    return a", "c = 3", "c", "d = 4",
                                  "e = 5"]
    assert (p.position(2, 4).line, p.position(2, 4).col) == (8, 7)
    assert (p.position(4, 0).line, p.position(4, 0).col) == (20, 4)
    assert (p.position(6, 0).line, p.position(6, 0).col) == (29, 4)


def test_fences_with_a_kernel_map_findings_to_the_page():
    page = ("Intro.\n\n```python\n" + IMPORTS + "```\n\nThe kernel:\n\n```python\n" + BUGGY
            + "```\n\n```python\n" + LAUNCH + "```\n")
    p = to_program(page, MARKDOWN)
    found = analyze(p.text, "page").findings
    assert {f.code for f in found} == {"PAL101", "PAL204"}
    spans = {p.span(f.span)[1] for f in found}
    assert {(s.line, s.col) for s in spans} == {(13, 33)}
    assert page.split("\n")[13][33:43] == "x_ref[...]"


# ---------------------------------------------------------------- placeholders

PLACEHOLDERS = IMPORTS + textwrap.dedent("""\

    def kernel(x_ref, o_ref, sem):
        # ... set up the buffers ...
        prepare(...)
        copy = pltpu.make_async_copy(x_ref.at[...], o_ref, sem)
        copy.start()
        ...
        copy.wait()

    def elided(x_ref, o_ref, buf, sem):
        ...

    def helper(x_ref, o_ref, sem): ...

    def body(x_ref, o_ref, buf, sem):
        src = select(x_ref, ...)
        pltpu.make_async_copy(src, buf, sem).start()
        pltpu.make_async_copy(buf, o_ref, sem).wait()
        helper(x_ref, o_ref, sem)

    def run(x):
        pl.pallas_call(kernel, out_shape=..., in_specs=[...],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[pltpu.SemaphoreType.DMA(...)])(x)
        pl.pallas_call(elided, out_shape=..., in_specs=..., out_specs=...,
                       scratch_shapes=(...))(...)
        pl.pallas_call(body, out_shape=..., grid=(...,),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       scratch_shapes=[..., pltpu.SemaphoreType.DMA(())])(x)
    """)


def test_placeholders_make_values_unknown_never_wrong():
    assert analyze(PLACEHOLDERS, "docs.py").findings == []


def test_a_real_bug_next_to_placeholders_is_still_reported():
    buggy = PLACEHOLDERS.replace("pltpu.make_async_copy(src, buf, sem).start()",
                                 "pltpu.make_async_copy(x_ref[...], buf, sem).start()")
    found = analyze(buggy, "docs.py").findings
    line = buggy.split("\n").index("    pltpu.make_async_copy(x_ref[...], buf, sem).start()")
    assert "PAL101" in {f.code for f in found}
    assert {f.span.line for f in found} == {line}
    # The same, as a page whose code blocks hold it.
    page = "Docs.\n\n```python\n" + buggy + "```\n"
    p = to_program(page, MARKDOWN)
    got = {(f.code, p.span(f.span)[1].line) for f in analyze(p.text, "page").findings}
    assert ("PAL101", line + 3) in got and {ln for _, ln in got} == {line + 3}


def test_noqa_in_a_cell_applies_to_its_line():
    quiet = BUGGY.replace("o_ref, sem)\n", "o_ref, sem)  # noqa: PAL101, PAL204\n", 1)
    text = nb(("code", IMPORTS), ("code", quiet),
              ("code", LAUNCH + "y = run(jnp.ones((8, 128)))\n"))
    assert findings_in(to_program(text, NOTEBOOK)) == []


LATE_IMPORTS_PAGE = """# Remote copies

The core call:

```python
copy = pltpu.make_async_remote_copy(
    src_ref=local_ref, dst_ref=remote_ref, send_sem=send_sem, recv_sem=recv_sem,
    device_id=DEVICE, device_id_type=pl.DeviceIdType.MESH)
copy.start()
copy.wait()
```

The whole program:

```python
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
```
"""


@pytest.mark.parametrize("path, expected", [("page.md", ["PAL105"]), ("page.rst.txt", [])])
def test_a_pages_imports_are_bound_before_its_snippets(path, expected):
    # A page shows the API before the program that imports it; a Python file
    # (or a notebook, whose cells ran in order) that does so raises NameError.
    p = to_program(LATE_IMPORTS_PAGE.replace("DEVICE", "None"), MARKDOWN)
    assert [f.code for f in analyze(p.text, path).findings] == expected
    assert analyze(to_program(LATE_IMPORTS_PAGE.replace("DEVICE", "(peer,)"), MARKDOWN).text,
                   path).findings == []
