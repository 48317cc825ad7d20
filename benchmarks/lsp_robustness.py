"""Robustness numbers of issue 13 (not a test: minutes, and machine-dependent).

    python benchmarks/lsp_robustness.py [memory|backlog|squaring|all] [--edits N]

* memory:   the server's RSS after 1,000 and after N (100,000) didChange
            notifications on a small kernel file (debounceMs 0).
* backlog:  a 50,000-line file; one analysis (open -> diagnostics), then 40
            edits 0.3 s apart; the delay from the last edit to the diagnostics
            of the last version, and RSS before/after.
* squaring: `pallas-lsp check` on the 27-line file `a0 = 99999999999`,
            `a{i+1} = a{i} * a{i}` (bounded constant folding).

The client is a minimal one over the server's stdio (pytest-lsp is too slow to
send 100,000 messages); it waits for the server to catch up with a
`pallas-lsp/documentState` request before each RSS reading.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNEL = (REPO / "tests" / "lsp" / "kernels" / "dma_bugs.py").read_text(encoding="utf-8")


class Client:
    def __init__(self, root: Path, debounce_ms: int = 0):
        env = dict(os.environ, PYTHONPATH=str(REPO / "server"), PALLAS_LSP_LOG_LEVEL="WARNING")
        self.proc = subprocess.Popen([sys.executable, "-m", "pallas_lsp", "serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self._next = 0
        self._waiting: dict[int, threading.Event] = {}
        self._results: dict[int, object] = {}
        self.published: dict[str, list[tuple[float, int | None, list]]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                    "capabilities": {"textDocument": {"publishDiagnostics": {
                                        "versionSupport": True}}},
                                    "initializationOptions": {
                                        "diagnostics": {"debounceMs": debounce_ms},
                                        "hover": {"jedi": False}}})
        self.notify("initialized", {})

    def _send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                if line in (b"\r\n", b"\n") and length is not None:
                    break
            msg = json.loads(out.read(length))
            if msg.get("method") == "textDocument/publishDiagnostics":
                p = msg["params"]
                with self._lock:
                    self.published.setdefault(p["uri"], []).append(
                        (time.monotonic(), p.get("version"), p["diagnostics"]))
            elif "id" in msg and "method" not in msg:
                ev = self._waiting.pop(msg["id"], None)
                self._results[msg["id"]] = msg.get("result", msg.get("error"))
                if ev is not None:
                    ev.set()
            elif "id" in msg:  # a request from the server: answer null
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    def request(self, method: str, params, timeout: float = 600):
        self._next += 1
        i = self._next
        ev = threading.Event()
        self._waiting[i] = ev
        self._send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        if not ev.wait(timeout):
            raise TimeoutError(method)
        return self._results.pop(i)

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def open(self, uri: str, text: str) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})

    def change(self, uri: str, version: int, changes: list) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": changes})

    def state(self, uri: str) -> dict:
        return self.request("pallas-lsp/documentState", {"uri": uri})

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def wait_published(self, uri: str, version: int, timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for t, v, _ in self.published.get(uri, []):
                    if v == version:
                        return t
            time.sleep(0.005)
        raise TimeoutError(f"no diagnostics for version {version}")

    def close(self) -> None:
        try:
            self.request("shutdown", None, 30)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


def memory(edits: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="pallas-mem-"))
    uri = (root / "k.py").as_uri()
    c = Client(root)
    c.open(uri, KERNEL)
    c.wait_published(uri, 1)
    readings = {}
    t0 = time.monotonic()
    for i in range(1, edits + 1):
        text = "#" if i % 2 else ""
        end = 0 if i % 2 else 1
        c.change(uri, i + 1, [{"range": {"start": {"line": 0, "character": 0},
                                         "end": {"line": 0, "character": end}}, "text": text}])
        if i in (1_000, 10_000, edits) or i % 20_000 == 0:
            st = c.state(uri)
            readings[i] = (c.rss_mb(), st.get("pending_futures"), st.get("analyses"))
            print(f"  after {i:>7} edits: RSS {readings[i][0]:7.1f} MiB, "
                  f"futures kept {readings[i][1]}, analyses {readings[i][2]} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    c.close()
    print(f"memory: RSS after {edits} edits - after 1,000 = "
          f"{readings[edits][0] - readings[1_000][0]:+.1f} MiB")


def backlog(lines: int = 50_000, edits: int = 40, gap_s: float = 0.3) -> None:
    body = KERNEL.replace("def ", "def k{n}_").split("\n")
    chunks, n = [], 0
    while sum(len(c) for c in chunks) < lines:
        chunks.append([line.replace("{n}", str(n)) for line in body])
        n += 1
    text = "\n".join(line for c in chunks for line in c)
    nlines = text.count("\n") + 1
    sys.path.insert(0, str(REPO / "server"))
    from pallas_lsp.engine import analyze

    t0 = time.monotonic()
    analyze(text, "big.py")
    in_process = time.monotonic() - t0
    root = Path(tempfile.mkdtemp(prefix="pallas-backlog-"))
    uri = (root / "big.py").as_uri()
    c = Client(root)
    rss0 = c.rss_mb()
    t0 = time.monotonic()
    c.open(uri, text)
    one = c.wait_published(uri, 1) - t0
    rss1 = c.rss_mb()
    version = 1
    last = 0.0
    for i in range(edits):
        version += 1
        c.change(uri, version, [{"range": {"start": {"line": nlines - 1, "character": 0},
                                           "end": {"line": nlines - 1, "character": 0}},
                                 "text": f"# edit {i}\n"}])
        nlines += 1
        last = time.monotonic()
        time.sleep(gap_s)
    final = c.wait_published(uri, version) - last
    st = c.state(uri)
    rss2 = c.rss_mb()
    c.close()
    print(f"backlog: {nlines} lines; one analysis {one:.2f} s in the server "
          f"({in_process:.2f} s in-process); final diagnostics {final:.2f} s after the last "
          f"of {edits} edits {gap_s} s apart = {final / one:.2f} x one analysis; analyses run "
          f"{st['analyses']}, dropped {st.get('superseded', 'n/a')}; RSS {rss0:.0f} -> {rss1:.0f} -> "
          f"{rss2:.0f} MiB")


def squaring() -> None:
    d = Path(tempfile.mkdtemp(prefix="pallas-sq-"))
    f = d / "squaring.py"
    f.write_text("a0 = 99999999999\n" + "".join(f"a{i + 1} = a{i} * a{i}\n" for i in range(26)))
    env = dict(os.environ, PYTHONPATH=str(REPO / "server"))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pallas_lsp", "check", "--no-config", "--no-cache",
                        str(f)],
                       env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    print(f"squaring: `pallas-lsp check` on the {len(f.read_text().splitlines())}-line file: "
          f"{took:.2f} s, exit {p.returncode}; {p.stdout.strip() or 'no output'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="?", default="all", choices=("memory", "backlog", "squaring", "all"))
    ap.add_argument("--edits", type=int, default=100_000)
    args = ap.parse_args()
    if args.what in ("squaring", "all"):
        squaring()
    if args.what in ("memory", "all"):
        memory(args.edits)
    if args.what in ("backlog", "all"):
        backlog()


if __name__ == "__main__":
    main()
