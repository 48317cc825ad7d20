"""The command line's garbage collection between analyses (check/collector.py):
off between files, what an analysis left alive frozen, and collected where
only the collector can free: after a failed analysis and when the project
lets go of its parsed trees. Results are the same as with the collector on."""
import gc
import weakref

from pallas_lsp.check.checker import check_project
from pallas_lsp.check.collector import Collector
from pallas_lsp.engine.model import Analysis
from pallas_lsp.engine.project import Project


class _Cycle:
    def __init__(self):
        self.me = self


def _garbage_cycle() -> weakref.ref:
    obj = _Cycle()
    ref = weakref.ref(obj)
    del obj
    return ref


def test_off_between_files_and_back_on_after():
    was = gc.isenabled()
    gc.enable()
    try:
        with Collector(Project()) as after:
            assert not gc.isenabled()
            kept = _garbage_cycle()
            after(Analysis(path="a.py"))
            assert gc.get_freeze_count() > 0 and kept() is not None  # frozen, not scanned
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.collect()
        if not was:
            gc.disable()


def test_collects_after_a_failed_analysis_and_when_the_trees_are_let_go():
    project = Project()
    with Collector(project) as after:
        failed = _garbage_cycle()
        after(Analysis(path="a.py", internal_error="RuntimeError: engine bug"))
        assert failed() is None
        evicted = _garbage_cycle()
        after(Analysis(path="b.py"))
        assert evicted() is not None  # frozen with the rest
        project.evictions += 1  # (Project.source: the cache of parsed trees was emptied)
        after(Analysis(path="c.py"))
        assert evicted() is None


def test_same_results_as_with_the_collector_on(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helpers.py").write_text(
        "from jax.experimental.pallas import tpu as pltpu\n\n\n"
        "def copy_in(src, dst, sem):\n"
        "    pltpu.make_async_copy(src, dst, sem).start()\n")
    (tmp_path / "kernels.py").write_text(
        "from jax.experimental.pallas import tpu as pltpu\nfrom pkg.helpers import copy_in\n\n\n"
        "def kernel(x_hbm, o_hbm, buf, sem):\n"
        "    copy_in(x_hbm[...], o_hbm, sem)\n"
        "    pltpu.make_async_copy(x_hbm[...], buf, sem).start()\n")

    def findings():
        checked, problems = check_project([tmp_path])
        return sorted((str(c.path), f.code, f.span) for c in checked for f in c.findings), problems

    frozen = findings()
    assert frozen[0] and gc.get_freeze_count() == 0
    monkeypatch.setattr(Collector, "after", lambda self, analysis=None: None)
    monkeypatch.setattr(Collector, "__enter__", lambda self: self.after)
    assert findings() == frozen
