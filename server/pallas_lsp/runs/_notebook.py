"""Child side of `pallas-lsp run NOTEBOOK.ipynb`: run the notebook's code
cells in order in a real Jupyter kernel (nbclient drives an ipykernel: the
`notebook` extra) and stop at the first cell that fails. The notebook file is
read, never written.

The kernel is this Python (`sys.executable -m ipykernel_launcher`), the run
profile's interpreter: the kernel named in the notebook's metadata (which
could be any program installed as a kernel) is not used. It starts in the
notebook's folder, as Jupyter starts it, so `%%writefile` then `import` work.
A hidden first cell sets the kernel up (`_notebook_kernel.setup`: interpret
mode, watchdog, the cells' positions); the kernel writes the run's report,
this process only when the kernel could not be had. The kernel's watchdog
(the run's timeout) starts a second or so after this process: the parent's
grace period covers that. Standard library only at import time; imports
only its child-side siblings.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import re
import sys
import warnings

from pallas_lsp.runs import _child, _report

EXIT_FAILED, EXIT_NO_KERNEL = 1, 4
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KERNEL = "pallas_lsp.runs._notebook_kernel"


def _fail(message: str, code: int) -> int:
    """What went wrong before or around the kernel: the report's `error`."""
    _report.REPORT["error"] = message
    print(f"pallas-lsp: {message}", file=sys.stderr, flush=True)
    _report.write_report(final=True)
    return code


def missing_extra() -> str | None:
    """The message for a Python without nbclient or ipykernel, else None."""
    missing = [m for m in ("nbclient", "ipykernel") if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"running a notebook needs {' and '.join(missing)} in {sys.executable}: "
            "install the `notebook` extra there (pip install 'pallas-lsp[notebook]', "
            "or pip install nbclient ipykernel)")


def run(path: str, starts: dict[int, int]) -> int:
    """Run notebook `path`; `starts`: code cell index -> the program line of
    its first line (engine/cells.py, computed by the parent)."""
    message = missing_extra()
    if message:
        return _fail(message, EXIT_NO_KERNEL)
    import nbformat
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    class ThisPython(KernelSpecManager):
        """Every kernel name is this Python's ipykernel."""

        def get_kernel_spec(self, kernel_name):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f",
                                    "{connection_file}"],
                              display_name="pallas-lsp", language="python")

    class Echo(NotebookClient):
        """Cells' output goes to this process's output as it comes (the parent
        streams it to the user)."""

        def output(self, outs, msg, display_id, cell_index):
            content, kind = msg.get("content") or {}, msg.get("msg_type")
            if kind == "stream":
                stream = sys.stderr if content.get("name") == "stderr" else sys.stdout
                stream.write(content.get("text", ""))
                stream.flush()
            elif kind == "error":
                text = _ANSI.sub("", "\n".join(content.get("traceback") or []))
                print(text, file=sys.stderr, flush=True)
            return super().output(outs, msg, display_id, cell_index)

    path = os.path.abspath(path)
    try:
        with warnings.catch_warnings():  # nbformat's advice on the file's ids: not ours to give
            warnings.simplefilter("ignore")
            nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - the parent read it already; say what this one saw
        return _fail(f"cannot read the notebook {path}: {e}", EXIT_NO_KERNEL)
    # (index, first program line, source, the cell is tagged to raise: Jupyter goes on)
    plan = [(i, starts[i], c.source, "raises-exception" in c.metadata.get("tags", []))
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and i in starts and c.source.strip()]
    # The kernel's stdin is a closed pipe, not the SSH connection: this process watches it,
    # and ends the kernel (a session of its own) with itself.
    watch = os.environ.pop("PALLAS_LSP_WATCH_STDIN", None) == "1"
    # Unix sockets in a private folder, not TCP ports on localhost: no other local
    # user can reach the kernel, and it works where loopback TCP is closed (a TPU VM
    # sandbox). Windows has no ipc transport: TCP there, as Jupyter does.
    ipc = {} if os.name == "nt" else {
        "transport": "ipc", "ip": os.path.join(tempfile.mkdtemp(prefix="pallas-lsp-kernel-"), "k")}
    km = AsyncKernelManager(kernel_name="pallas-lsp", kernel_spec_manager=ThisPython(), **ipc)
    client = Echo(nb, km=km, timeout=None, allow_errors=False,
                  resources={"metadata": {"path": os.path.dirname(path)}})
    # Two hidden cells, appended to the notebook in memory (nbclient keeps each
    # cell it runs at its index): the kernel's setup, and the report's last write.
    hidden = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(
        f"__import__({_KERNEL!r}, fromlist=['setup']).setup(get_ipython(), {path!r}, {plan!r})"),
        nbformat.v4.new_code_cell(f"__import__({_KERNEL!r}, fromlist=['finish']).finish()")]
    code = 0
    try:
        with client.setup_kernel():
            pgid = getattr(km.provisioner, "pgid", None)
            if pgid:
                _child.also_end.append(pgid)
            if watch:
                _child.watch_stdin()
            try:
                client.execute_cell(nb.cells[hidden], hidden, store_history=False)
            except CellExecutionError as e:
                return _fail(f"could not set the Jupyter kernel up: {e.ename}: {e.evalue}",
                             EXIT_NO_KERNEL)
            for index, *_ in plan:
                try:
                    client.execute_cell(nb.cells[index], index)
                except CellExecutionError:
                    code = EXIT_FAILED  # the kernel recorded it (post_run_cell)
                    break
            client.execute_cell(nb.cells[hidden + 1], hidden + 1, store_history=False)
    except DeadKernelError:  # the watchdog ended it (the report says where), or a crash
        print("pallas-lsp: the Jupyter kernel died", file=sys.stderr, flush=True)
        return code or EXIT_FAILED
    except Exception as e:  # noqa: BLE001 - no kernel (it could not start): one line, no traceback
        if code:
            return code
        return _fail(f"the Jupyter kernel did not run: {type(e).__name__}: {e}", EXIT_NO_KERNEL)
    return code
