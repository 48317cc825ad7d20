"""`pallas-lsp check` and `coverage` on notebooks and docs pages, through the
real CLI in a subprocess: cell positions in every format, --fix / --diff
written into the cell (the rest of the file byte for byte), malformed
notebooks, discovery, Markdown and rst pages."""
from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "notebooks"

# Seeded in tests/data/notebooks (make_fixtures.py): the kernel in cell 3 is
# launched in cell 8; cell 4 is a %%bash cell, cell 5 does not parse.
EXPECTED = [
    "seeded.ipynb:cell 3:4:34: PAL101",
    "seeded.ipynb:cell 3:4:34: PAL204",
    "seeded.ipynb:cell 7:4:7: PAL106",
    "seeded.ipynb:cell 5:1:12: E999",
]
BAD_LINE = '    "    copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\\n",\n'
GOOD_LINE = '    "    copy = pltpu.make_async_copy(x_ref, o_ref, sem)\\n",\n'


def cli(*args: str, cwd: Path, stdin: str | None = None, command: str = "check"):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", command, *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=180)


def heads(stdout: str) -> list[str]:
    """`path:cell N:line:col: CODE` of each concise line."""
    return [_head(line) for line in stdout.splitlines() if ": PAL" in line or ": E9" in line]


def _head(line: str) -> str:
    where, rest = line.split(": ", 1)
    return f"{where}: {rest.split()[0]}"


@pytest.fixture
def work(tmp_path) -> Path:
    for name in ("seeded.ipynb", "compact.ipynb"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def test_concise_names_the_cell_and_the_line_in_it(work):
    r = cli("--no-config", "seeded.ipynb", cwd=work)
    assert r.returncode == 1, r.stderr
    assert heads(r.stdout) == EXPECTED
    assert "(cell 7, line 2)" in r.stdout  # the engine's own line mentions are moved too
    assert "the other cells were still checked" in r.stdout


def test_full_shows_the_cells_own_lines(work):
    r = cli("--no-config", "--output-format", "full", "seeded.ipynb", cwd=work)
    assert " --> seeded.ipynb:cell 3:4:34" in r.stdout
    assert "4 |     copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)" in r.stdout
    assert "4 | +     copy = pltpu.make_async_copy(x_ref, o_ref, sem)" in r.stdout
    assert "1 | def broken(:" in r.stdout  # the broken cell's source, not the JSON
    assert '"cells"' not in r.stdout


def test_machine_formats_carry_the_cell(work):
    rows = json.loads(cli("--no-config", "--output-format", "json", "seeded.ipynb",
                          cwd=work).stdout)
    assert [(r["code"], r["cell"], r["line"], r["column"]) for r in rows] == [
        ("PAL101", 3, 4, 34), ("PAL204", 3, 4, 34), ("PAL106", 7, 4, 7), ("E999", 5, 1, 12)]
    assert rows[0]["fix"]["edits"][0] == {"content": "x_ref", "line": 4, "column": 34,
                                          "end_line": 4, "end_column": 44}
    assert rows[0]["related"][0]["cell"] == 3 and rows[0]["related"][0]["line"] == 5

    gh = cli("--no-config", "--output-format", "github", "seeded.ipynb", cwd=work).stdout
    first = gh.splitlines()[0]
    assert first.startswith("::error title=pallas-lsp (PAL101) cell 3,file=seeded.ipynb,"
                            "line=4,col=34,")
    assert "::seeded.ipynb:cell 3:4:34: PAL101 " in first

    sarif = json.loads(cli("--no-config", "--output-format", "sarif", "seeded.ipynb",
                           cwd=work).stdout)
    import jsonschema
    jsonschema.validate(sarif, json.loads((DATA.parent / "sarif-schema-2.1.0.json").read_text()))
    results = sarif["runs"][0]["results"]
    region = results[0]["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 4 and region["properties"] == {"cell": 3}
    assert [r["locations"][0]["physicalLocation"]["region"]["properties"]["cell"]
            for r in results] == [3, 3, 7, 5]

    junit = cli("--no-config", "--output-format", "junit", "seeded.ipynb", cwd=work).stdout
    assert "cell 3, line 4, col 34, DMA source/destination/semaphore" in junit


def test_fix_writes_into_the_cell_and_nothing_else(work):
    path = work / "seeded.ipynb"
    before = path.read_text(encoding="utf-8")
    r = cli("--no-config", "--fix", "seeded.ipynb", cwd=work)
    assert "(2 fixed, 1 remaining)" in r.stdout, r.stdout + r.stderr
    after = path.read_text(encoding="utf-8")
    # Byte for byte, but for the two fixed lines of cells 3 and 7 (the broken cell stays).
    changed = [line for line in difflib.ndiff(before.splitlines(True), after.splitlines(True))
               if line[:1] in "+-"]
    assert changed == ["- " + BAD_LINE, "+ " + GOOD_LINE,
                       '-     "    d.wait_send()"\n', '+     "    d.wait()"\n']
    assert after.endswith("}\n")
    old, new = json.loads(before), json.loads(after)
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"])):
        if i not in (2, 6):
            assert a == b
        else:
            assert a["outputs"] == b["outputs"] and a["metadata"] == b["metadata"]
    assert (old["metadata"], old["nbformat"]) == (new["metadata"], new["nbformat"])
    assert heads(cli("--no-config", "seeded.ipynb", cwd=work).stdout) == [
        "seeded.ipynb:cell 5:1:12: E999"]


def test_fix_keeps_another_layout_byte_for_byte(work):
    """Indent 2, \\uXXXX escapes, sources as one string, no trailing newline."""
    path = work / "compact.ipynb"
    before = path.read_text(encoding="utf-8")
    assert "\\u2014" in before and not before.endswith("\n")
    r = cli("--no-config", "--fix", "compact.ipynb", cwd=work)
    assert "(2 fixed, 1 remaining)" in r.stdout, r.stdout + r.stderr
    after = path.read_text(encoding="utf-8")
    expected = before.replace("make_async_copy(x_ref[...], o_ref, sem)",
                              "make_async_copy(x_ref, o_ref, sem)")
    expected = expected.replace("d.wait_send()", "d.wait()")
    assert after == expected


def test_diff_is_per_cell_and_changes_nothing(work):
    path = work / "seeded.ipynb"
    before = path.read_bytes()
    r = cli("--no-config", "--diff", "seeded.ipynb", cwd=work)
    assert r.returncode == 1 and path.read_bytes() == before
    assert r.stdout.startswith("--- a/seeded.ipynb:cell 3\n+++ b/seeded.ipynb:cell 3\n")
    assert "-    copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n" \
           "+    copy = pltpu.make_async_copy(x_ref, o_ref, sem)\n" in r.stdout
    assert "--- a/seeded.ipynb:cell 7\n" in r.stdout and "+    d.wait()" in r.stdout
    assert '"source"' not in r.stdout
    assert "Would fix 2 problems." in r.stderr


def test_fix_on_stdin_prints_the_fixed_notebook(work):
    text = (work / "compact.ipynb").read_text(encoding="utf-8")
    r = cli("--no-config", "--fix", "--stdin-filename", "compact.ipynb", "-", cwd=work,
            stdin=text)
    assert r.stdout == text.replace("x_ref[...], o_ref", "x_ref, o_ref").replace(
        "d.wait_send()", "d.wait()")


@pytest.mark.parametrize("text, says", [
    ('{"cells": [', "invalid JSON at line 1 column 12"),
    ('{"nbformat": 4, "metadata": {}}', "no `cells` list"),
    ('{"cells": {"a": 1}}', "`cells` is not a list"),
    ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1: `source` must be"),
    ("", "the file is empty"),
])
def test_a_malformed_notebook_is_one_error_never_a_crash_nor_a_rewrite(tmp_path, text, says):
    bad = tmp_path / "bad.ipynb"
    bad.write_text(text)
    (tmp_path / "ok.py").write_text("x = 1\n")
    for args in (["."], ["--fix", "."], ["--output-format", "json", "."]):
        r = cli("--no-config", *args, cwd=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert bad.read_text() == text
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and rows[0]["code"] == "E902" and rows[0]["path"] == "bad.ipynb"
    assert says in rows[0]["message"] and "cell" not in rows[0]
    r = cli("--no-config", "bad.ipynb", cwd=tmp_path)
    assert r.stdout.splitlines()[0].startswith("bad.ipynb:1:1: E902 error: not a")


def write_page(folder: Path) -> None:
    fence = "```"
    (folder / "docs").mkdir()
    (folder / "docs" / "guide.md").write_text(textwrap.dedent(f"""\
        # Guide

        {fence}python
        import jax
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import tpu as pltpu
        {fence}

        {fence}python
        def kernel(x_ref, o_ref, sem):
            copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)
            copy.start()
            copy.wait()

        def run(x):
            return pl.pallas_call(kernel, out_shape=...,
                                  in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                                  out_specs=pl.BlockSpec(memory_space=pl.ANY),
                                  scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)
        {fence}
        """))
    (folder / "docs" / "guide.rst").write_text(textwrap.dedent("""\
        Guide
        =====

        .. code-block:: python

           from jax.experimental import pallas as pl
           from jax.experimental.pallas import tpu as pltpu

           def kernel(x_ref, o_ref, sem):
               copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)
               copy.start()
               copy.wait()

        Launched:

        An illustration, not code:

        .. code-block:: python

           def kernel(...):
               ...

        >>> def run(x):
        ...     return pl.pallas_call(kernel, out_shape=...,
        ...         in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        ...         out_specs=pl.BlockSpec(memory_space=pl.ANY),
        ...         scratch_shapes=[pltpu.SemaphoreType.DMA(())])(x)
        """))


def test_pages_report_their_own_lines_when_named(tmp_path):
    write_page(tmp_path)
    r = cli("--no-config", "docs/guide.md", "docs/guide.rst", cwd=tmp_path)
    assert heads(r.stdout) == ["docs/guide.md:11:34: PAL101", "docs/guide.md:11:34: PAL204",
                               "docs/guide.rst:10:37: PAL101", "docs/guide.rst:10:37: PAL204"]
    r = cli("--no-config", "-v", "docs/guide.rst", cwd=tmp_path)
    assert "E999" not in r.stdout
    assert "guide.rst:20: a code block that does not parse was left out" in r.stderr
    r = cli("--no-config", "--diff", "docs/guide.rst", cwd=tmp_path)
    assert "-       copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)\n" \
           "+       copy = pltpu.make_async_copy(x_ref, o_ref, sem)\n" in r.stdout
    before = (tmp_path / "docs" / "guide.md").read_text()
    cli("--no-config", "--fix", "docs/guide.md", cwd=tmp_path)
    assert (tmp_path / "docs" / "guide.md").read_text() == before.replace("x_ref[...], o_ref",
                                                                          "x_ref, o_ref")


def test_discovery_takes_notebooks_and_pages_only_when_included(tmp_path):
    write_page(tmp_path)
    shutil.copy(DATA / "seeded.ipynb", tmp_path / "docs" / "nb.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    shutil.copy(DATA / "seeded.ipynb", tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    files = {line.split(":")[0] for line in cli(".", cwd=tmp_path).stdout.splitlines()
             if ": PAL" in line}
    assert files == {"docs/nb.ipynb"}  # pages are prose first: not by default
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n[tool.pallas-lsp]\nextend-include = ['docs/*.md']\n")
    files = {line.split(":")[0] for line in cli(".", cwd=tmp_path).stdout.splitlines()
             if ": PAL" in line}
    assert files == {"docs/nb.ipynb", "docs/guide.md"}
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n[tool.pallas-lsp]\ninclude = ['*.py', '*.rst']\n"
        "extend-exclude = ['*.ipynb']\n")
    files = {line.split(":")[0] for line in cli(".", cwd=tmp_path).stdout.splitlines()
             if ": PAL" in line}
    assert files == {"docs/guide.rst"}


def test_a_notebook_of_another_language_is_skipped(tmp_path):
    nb = json.loads((DATA / "seeded.ipynb").read_text())
    nb["metadata"]["kernelspec"]["language"] = "julia"
    (tmp_path / "j.ipynb").write_text(json.dumps(nb))
    r = cli("--no-config", "-v", "j.ipynb", cwd=tmp_path)
    assert r.returncode == 0 and "All checks passed!" in r.stdout
    assert "a julia notebook: not analysed" in r.stderr


def test_coverage_places_sites_in_cells(work):
    r = cli("--no-config", "--verbose", "seeded.ipynb", cwd=work, command="coverage")
    assert r.returncode == 0, r.stderr
    assert "seeded.ipynb: 2/2 sites known (100.0%), DMA 2/2, kernels bound 2/2" in r.stdout
    assert "  seeded.ipynb:cell 3:4:12: dma make_async_copy known" in r.stdout
    assert "  seeded.ipynb:cell 8:2: pallas_call kernel bound" in r.stdout
    data = json.loads(cli("--no-config", "--output-format", "json", "seeded.ipynb", cwd=work,
                          command="coverage").stdout)
    sites = data["files"][0]["sites"]
    assert [(s["cell"], s["line"], s["col"]) for s in sites] == [(3, 4, 12), (7, 2, 9)]


RUN_CELLS = """\
import sys
from pallas_lsp.engine.cells import to_program
for path in sys.argv[1:]:
    program = to_program(open(path, encoding="utf-8").read(), "notebook").text
    try:
        exec(compile(program, path, "exec"), {"__name__": "__main__"})
        print(path, "ran")
    except Exception as exc:
        print(path, "raised", str(exc).splitlines()[0])
"""


def test_jax_agrees_the_cells_are_buggy_and_the_fixed_notebook_runs(work, tmp_path):
    """The oracle: the notebook's cells as one program (what the engine read),
    run in TPU interpret mode, raise JAX's own messages; once fixed, they run."""
    half = work / "half.ipynb"  # only the PAL101 bug fixed: the PAL106 one is met
    half.write_text((work / "seeded.ipynb").read_text().replace(BAD_LINE, GOOD_LINE))
    fixed = tmp_path / "fixed" / "seeded.ipynb"
    fixed.parent.mkdir()
    shutil.copy(DATA / "seeded.ipynb", fixed)
    cli("--no-config", "--fix", str(fixed), cwd=tmp_path)
    r = subprocess.run([sys.executable, "-c", RUN_CELLS, "seeded.ipynb", "half.ipynb",
                        str(fixed)], cwd=work, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert r.stdout.splitlines() == [
        "seeded.ipynb raised DMA source/destination/semaphore arguments must be Refs.",
        "half.ipynb raised Cannot `wait_send` on a local copy.",
        f"{fixed} ran"], r.stderr[-3000:]


@pytest.mark.parametrize("dump", [dict(indent=1, ensure_ascii=False),
                                  dict(indent=2, ensure_ascii=True), dict()])
def test_sources_are_replaced_in_place_in_the_files_layout(dump):
    from pallas_lsp.check.notebook_edit import replace_sources

    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# é — title"]},
             {"cell_type": "code", "metadata": {"tags": ["x"]}, "outputs": [],
              "source": ["a = 1"]},
             {"cell_type": "code", "metadata": {}, "outputs": [], "source": "b = 2\nc = 3"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["d = 4\n", "e"]}]
    raw = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                     **dump)
    new = replace_sources(raw, {1: "a = 1\nif a:\n    a = 'ü'\n", 2: "b = 3\nc = 3",
                                3: "d = 4\ne"})
    expected = json.loads(raw)
    expected["cells"][1]["source"] = ["a = 1\n", "if a:\n", "    a = 'ü'\n"]
    expected["cells"][2]["source"] = "b = 3\nc = 3"
    assert json.loads(new) == expected
    # The same text as a whole re-serialisation in the file's own layout would give.
    assert new == json.dumps(expected, **dump)



def test_a_kernel_in_a_helper_module_launched_from_a_notebook(tmp_path):
    (tmp_path / "helper.py").write_text(textwrap.dedent("""\
        from jax.experimental.pallas import tpu as pltpu


        def kernel(x_ref, o_ref, sem):
            copy = pltpu.make_async_copy(x_ref[...], o_ref, sem)
            copy.start()
            copy.wait()
        """))
    launch = ("y = pl.pallas_call(\n    kernel,\n"
              "    out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),\n"
              "    in_specs=[pl.BlockSpec(memory_space=pl.ANY)],\n"
              "    out_specs=pl.BlockSpec(memory_space=pl.ANY),\n"
              "    scratch_shapes=[pltpu.SemaphoreType.DMA(())],\n)(jnp.ones((8, 128)))")
    imports = ("import jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
               "from jax.experimental.pallas import tpu as pltpu\nfrom helper import kernel")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Launch"]}] + [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": src.splitlines(True)} for src in (imports, launch)]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells, "metadata": {},
                                                   "nbformat": 4, "nbformat_minor": 5}))
    rows = json.loads(cli("--no-config", "--output-format", "json", "nb.ipynb", "helper.py",
                          cwd=tmp_path).stdout)
    got = {(r["path"], r.get("cell"), r["line"], r["code"],
            tuple((x["path"], x.get("cell"), x["line"]) for x in r["related"])) for r in rows}
    # The helper's finding points back at the launch, in its cell of the notebook...
    assert ("helper.py", None, 5, "PAL204", (("nb.ipynb", 3, 2),)) in got
    # ...and the notebook's launch says what its kernel meets in the helper.
    assert ("nb.ipynb", 3, 2, "PAL101", (("helper.py", None, 5), ("helper.py", None, 6))) in got
