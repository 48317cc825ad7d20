"""The jupyter-lsp server spec (jupyterlab-lsp): found through the package's
`jupyter_lsp_spec_v1` entry point, and its argv starts this server with the
Python that has the package, answering LSP over stdio, with nothing of the
notebook's folder (the Jupyter server's working directory) imported."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

from pallas_lsp.lsp import jupyter_spec


def test_the_entry_point_jupyter_lsp_loads_is_the_spec():
    found = {ep.name: ep for ep in entry_points(group="jupyter_lsp_spec_v1")}
    assert found["pallas-lsp"].load() is jupyter_spec.spec


def test_the_spec_starts_this_python_in_safe_path_mode():
    specs = jupyter_spec.spec(object())
    assert list(specs) == ["pallas-lsp"]
    spec = specs["pallas-lsp"]
    assert spec["argv"] == [sys.executable, "-P", "-m", "pallas_lsp", "serve"]
    assert spec["version"] == 2  # jupyter-lsp's current spec schema
    assert spec["languages"] == ["python"]
    assert "text/x-ipython" in spec["mime_types"]
    assert spec["requires_documents_on_disk"] is False
    # what jupyter-lsp requires of every spec (its schema's "required")
    assert {"argv", "languages", "version"} <= set(spec)


def _message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read(stream) -> dict:
    length = None
    while (line := stream.readline().strip()):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    assert length is not None, "the server closed its output"
    return json.loads(stream.read(length))


def test_the_argv_serves_lsp_from_a_hostile_notebook_folder(tmp_path):
    """jupyter-lsp starts the argv as is, in the Jupyter server's working
    directory: a `json.py` or `pallas_lsp.py` planted there never runs."""
    marker = tmp_path / "ran.txt"
    for name in ("json.py", "pallas_lsp.py", "typing.py", "logging.py"):
        (tmp_path / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    argv = jupyter_spec.spec()["pallas-lsp"]["argv"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}}))
        proc.stdin.flush()
        reply = _read(proc.stdout)
        assert reply["id"] == 1
        assert reply["result"]["serverInfo"]["name"] == "pallas-lsp"
        assert reply["result"]["capabilities"]["hoverProvider"]
        for payload in ({"jsonrpc": "2.0", "method": "initialized", "params": {}},
                        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
                        {"jsonrpc": "2.0", "method": "exit"}):
            proc.stdin.write(_message(payload))
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not marker.exists(), marker.read_text()
