"""Whole-project analysis: kernels launched in one file are followed into
helpers, kernels and launchers in the user's other files. A finding in a
helper is reported there (with the launch as related information) and at
the call in the launching file."""
import os
import textwrap
from pathlib import Path

from pallas_lsp.check.checker import check_project
from pallas_lsp.engine import analyze
from pallas_lsp.engine.project import Project

HELPERS = '''
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()


def bump(sem):
    pl.semaphore_signal(sem, 1)


def fetch(src, dst, sem):
    return pltpu.make_async_copy(src, dst, sem)


class Stager:
    def __init__(self, src, buf, sems):
        self.src, self.buf, self.sems = src, buf, sems

    def start(self, slot):
        c = pltpu.make_async_copy(self.src.at[slot], self.buf.at[slot], self.sems)
        c.start()
        return c


def kernel(x_hbm, o_hbm, sems):
    c = pltpu.make_async_copy(x_hbm, o_hbm, sems)
    c.start()
    c.wait()
'''

MAIN = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from {imp} import copy_in, bump, fetch, Stager
from {imp} import kernel as other_kernel


def kernel(x_hbm, o_hbm, buf, sems, reg):
    copy_in(x_hbm, buf.at[0], sems)           # PAL103 in the helper
    copy_in(buf[0], o_hbm.at[0], sems.at[0])  # PAL101 in the helper
    copy_in(x_hbm, buf.at[1], sems.at[1])     # fine
    bump(reg)                                 # fine
    bump(sems.at[0])                          # PAL203 in the helper
    d = fetch(x_hbm, buf.at[0], sems.at[0])   # fine: a descriptor comes back
    d.start()
    d.wait()
    Stager(x_hbm, buf, sems).start(0).wait()  # PAL103 in the helper's method


SCRATCH = [pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,)),
           pltpu.SemaphoreType.REGULAR]
ANY = pl.BlockSpec(memory_space=pl.ANY)
pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
               in_specs=[ANY], out_specs=ANY, scratch_shapes=SCRATCH)
pl.pallas_call(other_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[ANY], out_specs=ANY, scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''


def _write(root: Path, layout: dict) -> Path:
    for rel, text in layout.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _line(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if marker in line)


def _analyse(root: Path, rel: str):
    path = root / rel
    return analyze(path.read_text(), str(path), project=Project([str(root)]))


def test_findings_in_a_helper_module_land_there_and_at_the_call(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from .impl import *\n",
                      "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg")})
    a = _analyse(tmp_path, "main.py")
    main = (tmp_path / "main.py").read_text()
    impl_path = os.path.realpath(tmp_path / "pkg" / "impl.py")
    at_call = [(f.code, f.span.line) for f in a.findings]
    assert at_call == [("PAL103", _line(main, "# PAL103 in the helper")),
                       ("PAL101", _line(main, "# PAL101")),
                       ("PAL203", _line(main, "# PAL203")),
                       ("PAL103", _line(main, "# PAL103 in the helper's method")),
                       ("PAL103", _line(main, "pl.pallas_call(other_kernel"))]
    # Each says where in the helper, as related information.
    assert all(f.related and f.related[0].path == impl_path for f in a.findings)
    impl = HELPERS.split("\n")
    there = sorted((f.code, impl[f.span.line].strip()) for f in a.foreign[impl_path])
    assert there == sorted([
        ("PAL103", "c = pltpu.make_async_copy(src, dst, sem)"),
        ("PAL101", "c = pltpu.make_async_copy(src, dst, sem)"),
        ("PAL203", "pl.semaphore_signal(sem, 1)"),
        ("PAL103", "c = pltpu.make_async_copy(self.src.at[slot], self.buf.at[slot], self.sems)"),
        ("PAL103", "c = pltpu.make_async_copy(x_hbm, o_hbm, sems)")])
    # ... each pointing back at the launching file.
    main_path = str(tmp_path / "main.py")
    assert all(any(r.path == main_path for r in f.related) for f in a.foreign[impl_path])


def test_relative_and_module_imports(tmp_path):
    _write(tmp_path, {"kern/__init__.py": "", "kern/helpers.py": HELPERS,
                      "kern/main.py": MAIN.format(imp=".helpers")})
    assert len(_analyse(tmp_path, "kern/main.py").findings) == 5
    as_module = MAIN.format(imp="kern.helpers").replace(
        "from kern.helpers import copy_in, bump, fetch, Stager",
        "import kern.helpers as h\ncopy_in, bump, fetch, Stager = h.copy_in, h.bump, h.fetch, h.Stager")
    as_module = as_module.replace("from kern.helpers import kernel as other_kernel",
                                  "from kern import helpers\nother_kernel = helpers.kernel")
    _write(tmp_path, {"run.py": as_module})
    assert len(_analyse(tmp_path, "run.py").findings) == 5


def test_module_of_a_namespace_package(tmp_path):
    # `from ops.moe import helpers` where neither folder has an __init__.py
    # (tokamax's routing_moe): the name is the user's module, not a library.
    _write(tmp_path, {"ops/moe/helpers.py": HELPERS,
                      "ops/moe/main.py": MAIN.format(imp="ops.moe.helpers").replace(
                          "from ops.moe.helpers import copy_in, bump, fetch, Stager",
                          "from ops.moe import helpers\n"
                          "copy_in, bump, fetch, Stager = (helpers.copy_in, helpers.bump, "
                          "helpers.fetch, helpers.Stager)")})
    assert "from ops.moe import helpers" in (tmp_path / "ops/moe/main.py").read_text()
    assert len(_analyse(tmp_path, "ops/moe/main.py").findings) == 5


def test_launcher_in_another_module(tmp_path):
    _write(tmp_path, {"lib/__init__.py": "", "lib/launch.py": '''
        from jax.experimental import pallas as pl


        def kernel(body, *, out_type, mesh, scratch_types=()):
            return pl.kernel(body, out_type=out_type, mesh=mesh, scratch_types=scratch_types)
        ''', "model.py": '''
        import functools
        import jax
        import jax.numpy as jnp
        from jax.experimental.pallas import tpu as pltpu
        from lib import launch


        def body(x_hbm, o_hbm, stage, sems, *, k):
            c = pltpu.make_async_copy(x_hbm, stage[:8], sems.at[0])
            c.start()
            c.wait()


        def run(x, mesh):
            return launch.kernel(functools.partial(body, k=2),
                                 out_type=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                                 mesh=mesh, scratch_types=[pltpu.VMEM((16, 128), jnp.float32),
                                                           pltpu.SemaphoreType.DMA((1,))])(x)
        '''})
    a = _analyse(tmp_path, "model.py")
    assert [f.code for f in a.findings] == ["PAL101"]
    assert a.foreign == {}  # the bug is in this file


def test_unresolvable_and_library_imports_stay_silent(tmp_path):
    _write(tmp_path, {"main.py": MAIN.format(imp="nowhere")})
    assert _analyse(tmp_path, "main.py").findings == []
    site = tmp_path / "venv" / "lib" / "site-packages" / "helperlib"
    _write(site, {"__init__.py": HELPERS})
    p = Project([str(tmp_path)])
    assert p.resolve(str(tmp_path / "main.py"), "helperlib") is None


def test_without_a_project_imports_are_unknown(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from .impl import *\n",
                      "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg")})
    path = tmp_path / "main.py"
    assert analyze(path.read_text(), str(path)).findings == []


def test_edit_path_reads_only_parsed_files(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from .impl import *\n",
                      "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg")})
    path = tmp_path / "main.py"
    project = Project([str(tmp_path)])
    first = analyze(path.read_text(), str(path), project=project, parse_missing=False)
    assert first.findings == [] and first.missing  # nothing parsed yet: asks for it
    for missing in first.missing:
        project.source(missing)
    again = analyze(path.read_text(), str(path), project=project, parse_missing=False)
    while again.missing:
        for missing in again.missing:
            project.source(missing)
        again = analyze(path.read_text(), str(path), project=project, parse_missing=False)
    assert len(again.findings) == 5


def test_check_reports_a_library_module_from_callers_outside_the_paths(tmp_path):
    _write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n", "pkg/__init__.py": "",
                      "pkg/impl.py": HELPERS, "main.py": MAIN.format(imp="pkg.impl")})
    checked, problems = check_project([tmp_path / "pkg" / "impl.py"])
    assert problems == []
    [item] = checked
    assert sorted(f.code for f in item.findings) == ["PAL101", "PAL103", "PAL103", "PAL103",
                                                     "PAL203"]
    # Checking the whole tree gives each file its own findings, once.
    checked, _ = check_project([tmp_path])
    by_file = {item.path.name: [f.code for f in item.findings] for item in checked}
    assert len(by_file["impl.py"]) == 5 and len(by_file["main.py"]) == 5



def test_check_of_an_installed_library_takes_nothing_from_the_project_around_it(
        tmp_path, monkeypatch):
    # A virtualenv inside the project: the project imports the installed
    # library but is not its code, so checking the library does not index
    # the project to look for callers (that cost a third of `check` on
    # jax's installed pallas/ tree) and reports nothing of the project's.
    indexed = []
    real_index = Project.index
    monkeypatch.setattr(Project, "index",
                        lambda self, paths=None: indexed.append(paths) or real_index(self, paths))
    lib = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    _write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n",
                      "main.py": MAIN.format(imp="pkg.impl")})
    _write(lib, {"pkg/__init__.py": "", "pkg/impl.py": HELPERS})
    checked, problems = check_project([lib / "pkg" / "impl.py"])
    assert problems == [] and indexed == []
    [item] = checked
    # Only what the library's own text says (the syntax floor), none of the
    # findings the project's calls give.
    alone = analyze(HELPERS, str(lib / "pkg" / "impl.py")).findings
    assert [(f.code, f.span.line) for f in item.findings] == \
        [(f.code, f.span.line) for f in alone]
    assert len(item.findings) < 5
    # The same files as the user's own package: the project is searched and
    # its calls count.
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/impl.py": HELPERS})
    checked, _ = check_project([tmp_path / "pkg" / "impl.py"])
    assert indexed == [[str(tmp_path.resolve())]] or indexed == [[str(tmp_path)]]
    assert len(checked[0].findings) == 5

def test_index_finds_importers(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from .impl import copy_in\n", "pkg/impl.py": HELPERS,
                      "a.py": "from pkg import copy_in\n", "b.py": "import pkg.impl as m\n",
                      "c.py": "from pkg import (\n    impl,\n)\n", "d.py": "import os\n"})
    p = Project([str(tmp_path)])
    assert p.index() == 6
    impl = os.path.realpath(tmp_path / "pkg" / "impl.py")
    names = {os.path.basename(x) for x in p.importers(impl)}
    assert names == {"__init__.py", "a.py", "b.py", "c.py"}


def test_lambda_of_another_file_handed_to_jit_is_not_an_engine_error(tmp_path):
    # An imported lambda escapes into code the engine does not model (jax.jit):
    # it runs later with unknown arguments, and deciding whether it is kernel
    # code must not assume it has a name.
    _write(tmp_path, {
        "lib.py": """
            import jax
            from jax.experimental import pallas as pl
            from jax.experimental.pallas import tpu as pltpu

            scale = lambda x: x * 2

            def copy(src_hbm, dst_vmem, sem):
                pltpu.make_async_copy(src_hbm, dst_vmem, sem).start()
            """,
        "main.py": """
            import jax
            from jax.experimental import pallas as pl
            from lib import scale

            run = jax.jit(scale)
            """})
    a = _analyse(tmp_path, "main.py")
    assert a.internal_error is None
    assert a.findings == []


# A module with a floor finding (`bad`) and one in a branch the engine knows
# is never traced (`_Dead`: not reported).
DEAD = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

USE_SLICE = False


def dead_branch(x_hbm, o_hbm, sem):
    if USE_SLICE:
        pltpu.make_async_copy(x_hbm[...], o_hbm, sem).start()
    c = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    c.start()
    c.wait()


pl.pallas_call(dead_branch, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA(())])
'''


def test_command_line_parses_each_text_once_with_the_same_results(tmp_path, monkeypatch):
    """A checked file that an earlier analysis read as an import is analysed
    on that parse (Project.shared_source); the findings are those of a run
    that parses it again, and the parse goes back to being the import's."""
    import importlib

    import pallas_lsp.engine.project as project_mod
    from pallas_lsp.engine.source import parse

    _write(tmp_path, {"pyproject.toml": "",
                      "a_main.py": "from pkg.dead import USE_SLICE\nFLAG = not USE_SLICE\n"
                      + MAIN.format(imp="pkg.impl"), "pkg/dead.py": DEAD,
                      "b_also.py": "# another importer\n" + MAIN.format(imp="pkg.impl"),
                      "pkg/__init__.py": "",
                      "pkg/impl.py": HELPERS,  # checked after two files imported it
                      "zz/late.py": "# imports it after it was checked\n" + MAIN.format(imp="pkg.impl")})
    texts: list[str] = []

    def counted(text):
        texts.append(text)
        return parse(text)

    def run():
        texts.clear()
        checked, problems = check_project([tmp_path])
        return ({str(c.path): sorted((f.code, f.span, f.message) for f in c.findings)
                 for c in checked}, problems, list(texts))

    monkeypatch.setattr(project_mod, "parse", counted)
    shared, problems, parsed = run()
    impl = (tmp_path / "pkg" / "impl.py").read_text()
    assert parsed.count(impl) == 1 and len(parsed) == len(set(parsed))
    assert problems == []
    assert len(shared[str(tmp_path / "pkg" / "impl.py")]) == 5
    assert len(shared[str(tmp_path / "zz" / "late.py")]) == 5  # at its calls: the helper's path is back
    dead = (tmp_path / "pkg" / "dead.py").read_text()
    assert parsed.count(dead) == 1 and shared[str(tmp_path / "pkg" / "dead.py")] == []
    # The same check, each checked file parsed again for its own analysis:
    monkeypatch.setattr(project_mod.Project, "shared_source", None)
    analyze_mod = importlib.import_module("pallas_lsp.engine.analyze")  # (the package's
    monkeypatch.setattr(analyze_mod, "parse", counted)                   # `analyze` is the function)
    again, problems_again, parsed_again = run()
    assert parsed_again.count(impl) == 2
    assert again == shared and problems_again == problems


def test_command_line_reads_a_parsed_module_once(tmp_path, monkeypatch):
    """With `fixed_texts` (the command line: the files do not change during a
    run) a module parsed for one importer is not read again for the next;
    the editor's project reads the disk each time (its files do change)."""
    import pallas_lsp.engine.project as project_mod

    path = str(tmp_path / "helpers.py")
    Path(path).write_text(HELPERS)
    reads: list[str] = []
    real_read = project_mod._read_disk
    monkeypatch.setattr(project_mod, "_read_disk", lambda p: reads.append(p) or real_read(p))
    cli = Project([str(tmp_path)])
    cli.fixed_texts = True
    first = cli.source(path)
    assert cli.source(path) is first and cli.text(path) == first.text and len(reads) == 1
    editor = Project([str(tmp_path)])
    editor.source(path)
    Path(path).write_text(HELPERS + "\nX = 1\n")
    assert editor.source(path).text.endswith("X = 1\n") and len(reads) == 3
