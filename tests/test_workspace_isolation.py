"""Opening a folder never runs its files.

A workspace holds the files an attacker would plant: modules that shadow
what Python or pallas-lsp import by name (`json.py`, `logging.py`,
`typing.py`, `jax.py`, `pallas_lsp.py`, a `pallas_lsp/` package), the hooks
`site` runs (`sitecustomize.py`, `usercustomize.py`) and a `.pth` file. Each
appends a line to a marker file outside the workspace when it runs.

Every way the product starts Python on its own is then driven for real, in
that folder: the VS Code extension's install check and server start (the
extension's own launch code, bundled and run in Node), the server started as
the editors' setups start it, the API-docs probe and extractor in another
interpreter, jedi's environment, and the CLI. The marker must stay empty,
and each entry point must still have done its job (found the bug, read the
docs), so that "nothing ran" cannot come from "nothing worked".
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXT = REPO / "vscode-extension"
KERNEL = (REPO / "tests" / "editors" / "fixtures" / "buggy_kernel.py").read_text(encoding="utf-8")
SHADOWS = ("json", "logging", "typing", "jax", "pallas_lsp")


def _payload(name: str, marker: Path) -> str:
    return (f"import os as _o\n"
            f"with open({str(marker)!r}, 'a') as _f:\n"
            f"    _f.write('{name} ran in ' + str(_o.getpid()) + '\\n')\n"
            f"__version__ = 'hostile'\n")


def plant(folder: Path, marker: Path, *, shadow_pallas_lsp: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHADOWS:
        if name == "pallas_lsp" and not shadow_pallas_lsp:
            continue
        (folder / f"{name}.py").write_text(_payload(f"{name}.py", marker), encoding="utf-8")
    if shadow_pallas_lsp:
        (folder / "pallas_lsp").mkdir(exist_ok=True)
        (folder / "pallas_lsp" / "__init__.py").write_text(_payload("pallas_lsp/", marker), encoding="utf-8")
        (folder / "pallas_lsp" / "__main__.py").write_text(_payload("pallas_lsp/__main__", marker), encoding="utf-8")
    for hook in ("sitecustomize", "usercustomize"):
        (folder / f"{hook}.py").write_text(_payload(f"{hook}.py", marker), encoding="utf-8")
    (folder / "zz_hostile.pth").write_text(
        f"import os; open({str(marker)!r}, 'a').write('.pth ran\\n')\n", encoding="utf-8")
    (folder / "kernel.py").write_text(KERNEL, encoding="utf-8")
    return folder


@pytest.fixture
def hostile(tmp_path: Path):
    marker = tmp_path / "marker.txt"
    marker.write_text("", encoding="utf-8")
    workspace = plant(tmp_path / "workspace", marker)
    # Another interpreter, as a user configures one: a launcher outside the
    # workspace that runs this Python (same packages, another path).
    other = tmp_path / "other-python" / "python"
    other.parent.mkdir()
    other.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n', encoding="utf-8")
    other.chmod(0o755)
    return workspace, marker, other


def ran(marker: Path) -> str:
    return marker.read_text(encoding="utf-8")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment, less what the test runner adds to the import path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(extra)
    return env


def driver(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Runs `code` in this Python with `cwd` as working directory; `-P` keeps
    the driver itself clean, so the marker only sees what it starts."""
    return subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd, env=clean_env(**env),
                          capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------ a small LSP client

class Stdio:
    """JSON-RPC over a real process's stdin/stdout."""

    def __init__(self, argv: list[str], cwd: Path | str, env: dict[str, str]):
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        self.stderr = self.proc.stderr.read()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.inbox.put(json.loads(out.read(length)))

    def send(self, method: str, params=None, *, request: bool = False) -> int | None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return msg.get("id")

    def wait(self, predicate, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; server stderr:\n{self.stderr.decode(errors='replace')[-3000:]}"
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            assert msg is not None, f"server exited; stderr:\n{self.stderr.decode(errors='replace')[-3000:]}"
            if msg.get("method") == "workspace/configuration":  # pull settings: none
                body = json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                   "result": [None] * len(msg["params"]["items"])}).encode()
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.proc.stdin.flush()
                continue
            if msg.get("method") in ("client/registerCapability", "window/workDoneProgress/create"):
                body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": None}).encode()
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.proc.stdin.flush()
                continue
            if predicate(msg):
                return msg

    def request(self, method: str, params=None, timeout: float = 60.0) -> dict:
        rid = self.send(method, params, request=True)
        return self.wait(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def close(self) -> int:
        try:
            self.request("shutdown", timeout=30)
            self.send("exit")
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def lsp_session(argv: list[str], cwd: Path | str, env: dict[str, str], workspace: Path,
                init_options: dict | None = None, api_docs: bool = False) -> dict:
    """initialize in `workspace`, open its kernel, wait for PAL101; with
    `api_docs`, also wait until the API docs of the configured Python are
    loaded (probe + extraction done). Returns what the server reported."""
    client = Stdio(argv, cwd, env)
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": workspace.as_uri(),
                                      "capabilities": {}, "initializationOptions": init_options or {},
                                      "workspaceFolders": [{"uri": workspace.as_uri(), "name": "w"}]},
                       timeout=120)
        client.send("initialized", {})
        uri = (workspace / "kernel.py").as_uri()
        client.send("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": KERNEL}})
        diags = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                            and m["params"]["uri"] == uri and m["params"]["diagnostics"], 120)
        codes = [d.get("code") for d in diags["params"]["diagnostics"]]
        state = None
        if api_docs:
            deadline = time.monotonic() + 240
            while True:
                state = client.request("pallas-lsp/documentState", {"uri": uri})["result"]["api_docs"]
                if state in ("ready", "unavailable") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        rc = client.close()
        return {"codes": codes, "api_docs": state, "rc": rc}
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


# ------------------------------------------------------------------ the VS Code extension

def _bundle_launch(tmp_path: Path) -> Path:
    esbuild = EXT / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        env = dict(os.environ, npm_config_fund="false", npm_config_audit="false",
                   npm_config_update_notifier="false")
        subprocess.run(["npm", "ci"], cwd=EXT, env=env, check=True, capture_output=True, timeout=600)
    out = tmp_path / "launch.cjs"
    subprocess.run([str(esbuild), "src/launch.ts", "--bundle", "--platform=node", "--format=cjs",
                    f"--outfile={out}", "--log-level=warning"], cwd=EXT, check=True, timeout=120)
    return out


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None,
                    reason="Node and npm are not installed")
def test_vscode_extension_check_and_server_start_run_nothing_of_the_workspace(hostile, tmp_path):
    workspace, marker, other = hostile
    bundle = _bundle_launch(tmp_path)
    script = ("const l = require(process.argv[1]);\n"
              "l.probe(process.argv[2], process.env).then((found) => {\n"
              "  const spawn = l.serverCommand(found.executable, process.env);\n"
              "  process.stdout.write(JSON.stringify({ found, spawn }));\n"
              "});\n")
    cache = tmp_path / "cache"
    env = clean_env(PALLAS_LSP_CACHE_DIR=str(cache), PALLAS_LSP_LOG_LEVEL="WARNING")
    # The extension host's own working directory is the workspace here: the
    # launch code must not inherit it.
    out = subprocess.run(["node", "-e", script, str(bundle), sys.executable], cwd=workspace, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    launch = json.loads(out.stdout)
    import pallas_lsp
    assert launch["found"]["kind"] == "ok", launch
    assert launch["found"]["version"] == pallas_lsp.__version__
    spawn = launch["spawn"]
    assert spawn["args"] == ["-P", "-m", "pallas_lsp", "serve"]
    cwd = Path(spawn["options"]["cwd"])
    assert cwd.is_dir() and workspace not in (cwd, *cwd.parents) and not any(cwd.iterdir())
    assert ran(marker) == ""

    # The server exactly as the extension spawns it, with another interpreter
    # configured for the API docs (probe and extraction run in it).
    got = lsp_session([spawn["command"], *spawn["args"]], cwd, spawn["options"]["env"], workspace,
                      init_options={"python": {"interpreter": str(other)}}, api_docs=True)
    assert "PAL101" in got["codes"] and got["rc"] == 0
    assert got["api_docs"] == "ready", got
    assert list(cache.glob("api-docs-*.json")), "the extractor did not run in the other interpreter"
    assert ran(marker) == ""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")
def test_install_check_on_an_old_python_says_why(tmp_path):
    """A Python without `-P` (< 3.11) cannot hold pallas-lsp: the check says
    so instead of a bare ImportError. Stood in for by a fake interpreter that
    answers like one."""
    bundle = _bundle_launch(tmp_path)
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\necho /usr/bin/python3.9\n"
                    "echo 'pallas-lsp needs Python 3.11 or newer; this is 3.9.18' >&2\nexit 1\n")
    fake.chmod(0o755)
    script = ("require(process.argv[1]).probe(process.argv[2], process.env)"
              ".then((f) => process.stdout.write(JSON.stringify(f)));")
    out = subprocess.run(["node", "-e", script, str(bundle), str(fake)], capture_output=True,
                         text=True, timeout=60, check=True)
    found = json.loads(out.stdout)
    assert found["kind"] == "not-installed" and "3.11" in found["detail"]
    # and the real check's text has that guard before the import
    text = (EXT / "src" / "launch.ts").read_text(encoding="utf-8")
    assert text.index("sys.version_info >= (3, 11)") < text.index("import pallas_lsp")


# ------------------------------------------------------------------ other editors' setups

@pytest.mark.parametrize("how", ["console-script", "python -P -m"])
def test_server_started_inside_the_workspace_runs_nothing_of_it(hostile, how):
    """Neovim, Emacs, Helix... start `pallas-lsp serve` (or `python -P -m
    pallas_lsp serve`, as docs/editors say) with the project as working directory."""
    workspace, marker, _ = hostile
    argv = ([str(Path(sys.executable).parent / "pallas-lsp"), "serve"] if how == "console-script"
            else [sys.executable, "-P", "-m", "pallas_lsp", "serve"])
    assert Path(argv[0]).exists(), f"{argv[0]} is not installed"
    got = lsp_session(argv, workspace, clean_env(PALLAS_LSP_LOG_LEVEL="WARNING"), workspace)
    assert "PAL101" in got["codes"] and got["rc"] == 0
    assert ran(marker) == ""


def test_python_m_without_P_still_keeps_shadowing_modules_out(tmp_path):
    """`python -m pallas_lsp serve` in the project (no `-P`): the server drops
    the working directory from its path before importing anything else, so
    a project's `json.py` is not imported into it. (A project `pallas_lsp.py`
    itself is only kept out by `-P` or the console script.)"""
    marker = tmp_path / "marker.txt"
    marker.write_text("", encoding="utf-8")
    workspace = plant(tmp_path / "workspace", marker, shadow_pallas_lsp=False)
    got = lsp_session([sys.executable, "-m", "pallas_lsp", "serve"], workspace,
                      clean_env(PALLAS_LSP_LOG_LEVEL="WARNING"), workspace)
    assert "PAL101" in got["codes"] and got["rc"] == 0
    assert ran(marker) == ""
    out = subprocess.run([sys.executable, "-m", "pallas_lsp", "check", "--no-config", "."], cwd=workspace,
                         env=clean_env(), capture_output=True, text=True, timeout=120)
    assert "PAL101" in out.stdout, out.stderr
    assert ran(marker) == ""


# ------------------------------------------------------------------ probes the server starts

def test_api_docs_probe_and_extractor_in_another_interpreter(hostile, tmp_path):
    """The hover-docs probe and the extractor, run from a server whose working
    directory is the workspace (as Neovim starts it)."""
    workspace, marker, other = hostile
    code = ("import json, sys\n"
            "from pallas_lsp.lsp import api_docs\n"
            f"info = api_docs._probe({str(other)!r})\n"
            f"data = api_docs.extract({str(other)!r})\n"
            "print(json.dumps({'info': info, 'names': len(data['apis'])}))\n")
    out = driver(code, workspace, PALLAS_LSP_CACHE_DIR=str(tmp_path / "cache"))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["info"]["path"].endswith("jax") and got["names"] > 50
    assert ran(marker) == ""


def test_jedi_environment_in_another_interpreter(hostile):
    """jedi starts the configured interpreter to learn its sys.path, and
    loads compiled modules in it: nothing of the workspace may come along."""
    workspace, marker, other = hostile
    source = "import os.path\nos.path.join\n"
    code = ("import json\n"
            "from pallas_lsp.lsp.jedi_docs import JediDocs\n"
            "j = JediDocs()\n"
            f"j.configure({str(other)!r}, {str(workspace)!r})\n"
            f"doc = j._worker.submit(j._lookup, {source!r}, {str(workspace / 'k.py')!r}, 1, 9).result(120)\n"
            "env = j._env\n"
            "print(json.dumps({'doc': doc and doc.full_name, 'exe': str(env.executable),"
            " 'sys_path': env.get_sys_path()}))\n")
    out = driver(code, workspace)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["doc"] and got["doc"].endswith("join")
    assert str(workspace) not in got["sys_path"] and "" not in got["sys_path"]
    assert ran(marker) == ""


# ------------------------------------------------------------------ the CLI

@pytest.mark.parametrize("args", [["check", "--no-config", "."], ["coverage", "--no-config", "."],
                                  ["rule", "PAL101"], ["--version"]])
def test_cli_in_the_workspace_runs_nothing_of_it(hostile, args):
    workspace, marker, _ = hostile
    exe = Path(sys.executable).parent / "pallas-lsp"
    assert exe.exists(), f"{exe} is not installed"
    out = subprocess.run([str(exe), *args], cwd=workspace, env=clean_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    if args[0] == "check":
        assert "PAL101" in out.stdout
    assert ran(marker) == ""
