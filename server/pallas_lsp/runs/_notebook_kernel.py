"""Kernel side of a notebook run, set up by the hidden first cell that
`_notebook.py` executes in the Jupyter kernel: the child setup every run has
(`_child.setup`: TPU interpret mode forced, watchdog, `--compile`, dispatch
records), then, as each of the notebook's cells starts, the name IPython
compiles it under mapped to the notebook and the cell's program line
(`_report.renamed`), so every frame of every cell run so far, a kernel
defined three cells earlier included, reports a position in the notebook;
and each failing cell recorded as a script's failure is. Standard library
only; imports only its child-side siblings. Names nothing in the user's
namespace.
"""
from __future__ import annotations

from pallas_lsp.runs import _child, _report


class _Cells:
    """The notebook's cells in the order the driver sends them."""

    def __init__(self, shell, path: str, plan: list):
        self.shell = shell
        self.path = path
        self.queue = list(plan)  # (index, first program line, source, raises-exception)
        self.current = None

    def pre_run_cell(self, info) -> None:
        raw = getattr(info, "raw_cell", None)
        if not self.queue or raw != self.queue[0][2]:
            return  # not the notebook's next cell (a hidden one, or run by the user's code)
        index, start, _, expected = self.queue.pop(0)
        self.current = (index, start, expected)
        try:  # the name `run_cell` compiles it under, from IPython's public pieces
            name = self.shell.compile.get_code_name(raw, self.shell.transform_cell(raw),
                                                    self.shell.execution_count)
            _report.renamed[name] = (self.path, start, f"cell {index + 1}")
        except Exception:  # noqa: BLE001 - its frames then stay unmapped, the run goes on
            pass
        _report.set_current(f"cell {index + 1}", self.path, start + 1)

    def post_run_cell(self, result) -> None:
        if self.current is None:
            return
        index, start, expected = self.current
        self.current = None
        exc = result.error_before_exec or result.error_in_exec
        if exc is not None and not expected:
            _report.record_failure(exc, nodeid=f"cell {index + 1}", when="cell",
                                   test_path=self.path, test_line=start + 1)


def setup(shell, path: str, plan: list) -> None:
    """`plan`: the code cells to run, in order (see `_notebook.run`)."""
    _report.REPORT["kind"] = "notebook"
    _report.REPORT["renamed"] = _report.renamed  # the race detector prints these names
    _child.setup()
    cells = _Cells(shell, path, plan)
    shell.events.register("pre_run_cell", cells.pre_run_cell)
    shell.events.register("post_run_cell", cells.post_run_cell)


def finish() -> None:
    """After the last cell: the report's final write (the only one that goes
    out in stream mode, for remote runs)."""
    _report.write_report(final=True)
