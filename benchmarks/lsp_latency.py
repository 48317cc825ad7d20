"""Latency and memory of pallas-lsp (and, for comparison, jedi-language-server)
as an editor sees them: a minimal JSON-RPC client over stdio.

    python benchmarks/lsp_latency.py [--files F ...] [--hovers 60] [--edits 20]
                                     [--no-jls] [--debounce-ms 0]

Measures, per server: process start -> first diagnostics, didOpen -> first
diagnostics, edit -> diagnostics for that version (minus pallas-lsp's debounce), hover p50/p95 at identifier
positions spread over each file (split into names inside kernels and Pallas
API names), the first hovers right after each didOpen, semantic tokens for the
whole file, code-action latency, and the server's RSS after the opens and at
the end. `--root` opens a bigger workspace (the server indexes it in the
background while the files are opened and edited). The same
positions are used for both servers. Not a test: numbers depend on the machine.

`--jedi-needed` also hovers a Pallas API imported through a module of the
user's own (only jedi can follow it), so pallas-lsp's RSS includes jedi's.
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
import tokenize
from pathlib import Path

API_NAMES = {"make_async_copy", "async_copy", "make_async_remote_copy", "async_remote_copy",
             "sync_copy", "semaphore_signal", "semaphore_wait", "semaphore_read", "SemaphoreType",
             "run_scoped", "emit_pipeline", "pallas_call", "BlockSpec", "VMEM", "SMEM", "ANY",
             "PrefetchScalarGridSpec", "when", "ds", "program_id"}


class Client:
    """Just enough LSP: requests with ids, notifications, a reader thread."""

    def __init__(self, argv: list[str], env: dict | None = None):
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self._id = 0
        self._responses: dict[int, queue.Queue] = {}
        self.notifications: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            line = out.readline()
            if not line:
                return
            while line not in (b"\r\n", b"\n", b""):
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
                line = out.readline()
            body = out.read(int(headers.get("content-length", 0)))
            msg = json.loads(body)
            now = time.perf_counter()
            if "id" in msg and "method" in msg:  # a request from the server
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                q = self._responses.get(msg["id"])
                if q is not None:
                    q.put((now, msg))
            else:
                self.notifications.put((now, msg))

    def _send(self, msg: dict) -> None:
        data = json.dumps(msg).encode()
        with self._lock:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
            self.proc.stdin.flush()

    def request(self, method: str, params, timeout: float = 120.0):
        self._id += 1
        q: queue.Queue = queue.Queue()
        self._responses[self._id] = q
        t0 = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        t1, msg = q.get(timeout=timeout)
        return t1 - t0, msg.get("result")

    def notify(self, method: str, params) -> float:
        t0 = time.perf_counter()
        self._send({"jsonrpc": "2.0", "method": method, "params": params})
        return t0

    def wait_diagnostics(self, uri: str, version: int | None, timeout: float = 30.0,
                         strict: bool = False):
        """The time of the next diagnostics for `uri` at `version` (or one
        without a version; `strict`: exactly that version)."""
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            try:
                t, msg = self.notifications.get(timeout=left)
            except queue.Empty:
                return None
            if msg.get("method") != "textDocument/publishDiagnostics":
                continue
            p = msg["params"]
            accepted = (version,) if strict else (version, None)
            if p["uri"] == uri and (version is None or p.get("version") in accepted):
                return t

    def rss_mib(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=5)
            self.notify("exit", None)
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def positions(text: str, n: int) -> list[tuple[int, int, str]]:
    """(line, utf-16 col, kind) of identifiers spread evenly over the file.
    kind: "engine" (a name the engine inferred inside a kernel), "api" (a
    Pallas API name) or "other"."""
    from pallas_lsp.engine import analyze

    inferred = {(n.span.line, n.span.col) for n in analyze(text).names}
    names = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string.isidentifier() \
                    and tok.string not in ("def", "return", "import", "from", "for", "in", "if"):
                names.append(tok)
    except (tokenize.TokenError, IndentationError):
        pass
    if not names:
        return []
    step = max(1, len(names) // n)
    out = []
    for tok in names[::step][:n]:
        line = text.split("\n")[tok.start[0] - 1]
        col16 = len(line[:tok.start[1]].encode("utf-16-le")) // 2
        if tok.string in API_NAMES:
            kind = "api"
        elif (tok.start[0] - 1, tok.start[1]) in inferred:
            kind = "engine"
        else:
            kind = "other"
        out.append((tok.start[0] - 1, col16 + 1, kind))
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] * 1000


def bench_server(name: str, argv: list[str], files: list[Path], args) -> dict:
    init_options = ({"diagnostics": {"debounceMs": args.debounce_ms}, "hover": {"jedi": not args.no_jedi}}
                    if name == "pallas-lsp" else {})
    c = Client(argv, env=dict(os.environ))
    root = args.root or files[0].parent
    caps = {"textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]},
                             "publishDiagnostics": {"versionSupport": True},
                             "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {
                                 "valueSet": ["quickfix", "source.fixAll"]}}}},
            "general": {"positionEncodings": ["utf-16"]}}
    c.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                             "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                             "capabilities": caps, "initializationOptions": init_options})
    c.notify("initialized", {})
    res = {"open": [], "reopen": [], "reopen_by_file": {}, "edit": [], "hover_engine": [], "hover_api": [], "hover_other": [],
           "action": [], "hover_first": [], "tokens": [], "tokens_by_file": {}}
    first_diag = None
    for i, path in enumerate(files):
        text = path.read_text(encoding="utf-8")
        uri = path.as_uri()
        t0 = c.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        t = c.wait_diagnostics(uri, 1)
        if t is not None:
            res["open"].append(t - t0)
            if first_diag is None:
                first_diag = t - c.t_spawn
        res["rss_open"] = c.rss_mib()  # after the last file's first diagnostics
        # The first hovers after open (a Pallas API, a kernel name), before
        # any warm-up had time to run.
        for line, col, kind in positions(text, args.hovers):
            if kind in ("api", "engine") and not any(k == kind for k, _ in _firsts(res, uri)):
                dt, _ = c.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                         "position": {"line": line, "character": col}})
                res["hover_first"].append(dt)
                res.setdefault("_first_kinds", []).append((kind, uri))
        if i == 0:
            time.sleep(args.warmup)  # let background warm-up (jedi) finish once
        lines = text.split("\n")
        version = 1
        for k in range(args.edits):
            version += 1
            line = (k * 37) % max(1, len(lines))
            col = len(lines[line].encode("utf-16-le")) // 2
            t0 = c.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                              "end": {"line": line, "character": col}},
                                    "text": "  # x" if k % 2 == 0 else ""}]})
            # The second edit of each pair is empty on purpose: a no-op change
            # still has to produce diagnostics for its version.
            t = c.wait_diagnostics(uri, version)
            if t is not None:
                res["edit"].append(t - t0 - (args.debounce_ms / 1000 if name == "pallas-lsp"
                                              else 0))
        # Put the text back so positions below refer to the original file.
        version += 1
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"text": text}]})
        c.wait_diagnostics(uri, version)
        # Opens of a file the session has seen: closed, then opened again with
        # its imports already parsed (the first open above also pays for those).
        for k in range(args.reopens):
            c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            c.wait_diagnostics(uri, None, timeout=2.0)  # the close clears them
            version += 1
            t0 = c.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": version, "text": text}})
            t = c.wait_diagnostics(uri, version, strict=True)
            if t is not None:
                res["reopen"].append(t - t0)
                res["reopen_by_file"].setdefault(path.name, []).append(t - t0)
        for line, col, kind in positions(text, args.hovers):
            dt, _ = c.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                     "position": {"line": line, "character": col}})
            res["hover_" + kind].append(dt)
        times = []
        for _ in range(args.tokens if name == "pallas-lsp" else 0):
            dt, result = c.request("textDocument/semanticTokens/full",
                                   {"textDocument": {"uri": uri}})
            times.append(dt)
        if times:
            res["tokens"].extend(times)
            res["tokens_by_file"][path.name] = (times, len((result or {}).get("data") or []) // 5)
        for line, col, _ in positions(text, 10):
            dt, _ = c.request("textDocument/codeAction", {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": line, "character": 0},
                          "end": {"line": line, "character": col}},
                "context": {"diagnostics": []}})
            res["action"].append(dt)
    if args.jedi_needed and name == "pallas-lsp":
        res["jedi_hover"] = _hover_through_user_module(c, root)
    res["rss"] = c.rss_mib()
    res["first"] = first_diag
    c.close()
    return res


def _firsts(res: dict, uri: str):
    return [(k, u) for k, u in res.get("_first_kinds", []) if u == uri]


def _hover_through_user_module(c: Client, root: Path) -> float:
    """`from mylib import pl` with mylib re-exporting Pallas: the hover needs jedi."""
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="pallas-bench-"))
    (folder / "mylib.py").write_text("from jax.experimental import pallas as pl\n")
    user = folder / "user.py"
    text = "from mylib import pl\n\npl.pallas_call\n"
    user.write_text(text)
    c.notify("textDocument/didOpen", {"textDocument": {"uri": user.as_uri(), "languageId": "python",
                                                       "version": 1, "text": text}})
    c.wait_diagnostics(user.as_uri(), 1)
    dt, _ = c.request("textDocument/hover", {"textDocument": {"uri": user.as_uri()},
                                             "position": {"line": 2, "character": 5}})
    time.sleep(2.0)  # let jedi finish what it started
    return dt


def default_files() -> list[Path]:
    spec = importlib.util.find_spec("jax")
    if spec is None or spec.origin is None:
        sys.exit("jax is not installed; pass --files")
    ops = Path(spec.origin).parent / "experimental/pallas/ops/tpu"
    return [ops / "ragged_paged_attention/kernel.py", ops / "flash_attention.py",
            ops / "paged_attention/paged_attention_kernel.py", ops / "all_gather.py",
            ops / "megablox/gmm.py"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", nargs="*", type=Path)
    ap.add_argument("--hovers", type=int, default=60)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--debounce-ms", type=int, default=0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--root", type=Path, help="the workspace folder (default: the first file's "
                    "folder); a big one makes the server index it in the background")
    ap.add_argument("--no-jls", action="store_true")
    ap.add_argument("--no-jedi", action="store_true", help="pallas-lsp with hover.jedi false")
    ap.add_argument("--jedi-needed", action="store_true",
                    help="also hover an API re-exported by a user module (starts jedi)")
    ap.add_argument("--reopens", type=int, default=10,
                    help="close and open each file again this many times (open->diag of a "
                    "file whose imports are parsed)")
    ap.add_argument("--tokens", type=int, default=20, help="semantic token requests per file")
    args = ap.parse_args()
    files = [p.resolve() for p in args.files or default_files()]
    if args.root:
        args.root = args.root.resolve()
    servers = [("pallas-lsp", [sys.executable, "-m", "pallas_lsp", "serve"])]
    jls = shutil.which("jedi-language-server") or (
        str(Path(sys.executable).parent / "jedi-language-server")
        if (Path(sys.executable).parent / "jedi-language-server").exists() else None)
    if jls and not args.no_jls:
        servers.append(("jedi-language-server", [jls]))
    rows = []
    for name, argv in servers:
        r = bench_server(name, argv, files, args)
        rows.append((name, r))
    print(f"files: {', '.join(p.name for p in files)}; workspace {args.root or files[0].parent}; "
          f"debounce {args.debounce_ms} ms (pallas-lsp; edit->diag is after it); "
          f"{args.hovers} hovers and {args.edits} edits per file\n")
    hdr = ("server", "start->diag", "first open->diag max", "reopen->diag p50/p95",
           "edit->diag p50/p95",
           "hover kernel names p50/p95", "hover Pallas API p50/p95", "hover other p50/p95",
           "first hovers after open max", "semantic tokens p50/p95", "codeAction p50/p95",
           "RSS MiB after open / at the end")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name, r in rows:
        print(f"| {name} | {r['first'] * 1000 if r['first'] else float('nan'):.0f} ms | "
              f"{pct(r['open'], 1.0):.1f} ms | "
              f"{pct(r['reopen'], .5):.1f} / {pct(r['reopen'], .95):.1f} ms | "
              f"{pct(r['edit'], .5):.1f} / {pct(r['edit'], .95):.1f} ms | "
              f"{pct(r['hover_engine'], .5):.1f} / {pct(r['hover_engine'], .95):.1f} ms | "
              f"{pct(r['hover_api'], .5):.1f} / {pct(r['hover_api'], .95):.1f} ms | "
              f"{pct(r['hover_other'], .5):.1f} / {pct(r['hover_other'], .95):.1f} ms | "
              f"{pct(r['hover_first'], 1.0):.1f} ms | "
              f"{pct(r['tokens'], .5):.1f} / {pct(r['tokens'], .95):.1f} ms | "
              f"{pct(r['action'], .5):.1f} / {pct(r['action'], .95):.1f} ms | "
              f"{r.get('rss_open', float('nan')):.0f} / {r['rss']:.0f} |")
    for name, r in rows:
        for fname, times in r["reopen_by_file"].items():
            print(f"{name}: open of {fname} again: p50 {pct(times, .5):.1f} ms, "
                  f"p95 {pct(times, .95):.1f} ms")
        for fname, (times, n) in r["tokens_by_file"].items():
            print(f"{name}: semantic tokens for {fname}: {n} tokens, p50 {pct(times, .5):.1f} ms, "
                  f"p95 {pct(times, .95):.1f} ms")
        firsts = ", ".join(f"{kind} {dt * 1000:.1f} ms" for (kind, _), dt
                           in zip(r.get("_first_kinds", []), r["hover_first"]))
        if firsts:
            print(f"{name}: first hovers after each open: {firsts}")
        if "jedi_hover" in r:
            print(f"{name}: hover through a user re-export (starts jedi): "
                  f"{r['jedi_hover'] * 1000:.0f} ms; RSS after it {r['rss']:.0f} MiB")


if __name__ == "__main__":
    main()
