"""Pallas API signatures and docstrings without jedi.

The Pallas modules of the user's jax are imported once, in a subprocess
(`extract/api_docs.py`, in the configured interpreter), and what they define
is written to a JSON file in the user cache, keyed by jax's version and
path. Later starts read that file (a few milliseconds, well under a MiB in
memory); jax is never imported into the server, and jedi, which parses all
of jax to answer the same question, is left for names only it can resolve.

Everything here runs on its own thread; `lookup` never waits.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from pallas_lsp.lsp.isolation import isolated
from pallas_lsp.lsp.jedi_docs import ApiDoc

log = logging.getLogger(__name__)

FORMAT = 1  # bump with extract/api_docs.FORMAT
EXTRACT_SCRIPT = Path(__file__).resolve().parent.parent / "extract" / "api_docs.py"
EXTRACT_TIMEOUT_S = 180.0
PROBE_TIMEOUT_S = 20.0
CACHE_ENV = "PALLAS_LSP_CACHE_DIR"

# Where jax is and which version, without importing it (run in the target Python).
_PROBE = (
    "import importlib.util, importlib.metadata, json, os\n"
    "s = importlib.util.find_spec('jax')\n"
    "p = s and s.submodule_search_locations and s.submodule_search_locations[0]\n"
    "try:\n    v = importlib.metadata.version('jax')\nexcept Exception:\n    v = None\n"
    "print(json.dumps({'path': p and os.path.realpath(p), 'version': v}))\n")


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pallas-lsp"


def _probe_here() -> dict | None:
    spec = importlib.util.find_spec("jax")
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        return None
    version = _dist_info_version(locations[0])
    if version is None:
        # (email parsing and more: 2.6 MiB kept for good, so only when needed)
        from importlib import metadata

        try:
            version = metadata.version("jax")
        except metadata.PackageNotFoundError:
            version = None
    return {"path": os.path.realpath(locations[0]), "version": version}


def _dist_info_version(package_dir: str) -> str | None:
    """jax's version from the one `jax-*.dist-info` beside the package (what
    importlib.metadata would read there), without importing it into the
    server. None when there is not exactly one (the caller asks
    importlib.metadata then)."""
    parent = os.path.dirname(os.path.realpath(package_dir))
    try:
        infos = [n for n in os.listdir(parent) if n.startswith("jax-") and n.endswith(".dist-info")]
    except OSError:
        return None
    if len(infos) != 1:
        return None
    try:
        with open(os.path.join(parent, infos[0], "METADATA"), encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
                if not line.strip():
                    break  # the headers end at the first blank line
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _probe(python: str) -> dict | None:
    # Not realpath: a virtualenv's python is a symlink to the base interpreter.
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return _probe_here()
    try:
        out = subprocess.run(**isolated(python, "-c", _PROBE), capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        info = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return info if info and info.get("path") else None


def cache_file(info: dict) -> Path:
    """One file per jax installation: its version, its path and when its
    Pallas package last changed (an editable jax changes without a new version)."""
    pallas = os.path.join(info["path"], "experimental", "pallas", "__init__.py")
    try:
        stamp = str(os.stat(pallas).st_mtime_ns)
    except OSError:
        stamp = "?"
    digest = hashlib.sha1(f"{info['path']}\0{stamp}".encode()).hexdigest()[:12]
    return cache_dir() / f"api-docs-{FORMAT}-jax{info.get('version') or 'unknown'}-{digest}.json"


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the server exits (Linux), so that an
    extraction never outlives a short-lived server."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def extract(python: str, timeout_s: float = EXTRACT_TIMEOUT_S) -> dict:
    """Run the extractor in `python` (raises RuntimeError with the reason)."""
    try:
        out = subprocess.run(**isolated(python, str(EXTRACT_SCRIPT)), capture_output=True, text=True,
                             timeout=timeout_s, stdin=subprocess.DEVNULL,
                             preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"cannot run {python}: {exc}") from None
    if out.returncode != 0:
        tail = (out.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"extracting the Pallas API docs failed: {tail[0]}")
    try:
        data = json.loads(out.stdout)
    except ValueError:
        raise RuntimeError("the extractor printed something that is not JSON") from None
    if data.get("format") != FORMAT or not isinstance(data.get("apis"), dict):
        raise RuntimeError("the extractor's output has another format")
    return data


def _write(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache: keep the result in memory only
        log.info("cannot write %s: %s", path, exc)


LOCK_STALE_S = 300.0


def _claim(path: Path) -> bool:
    """One extraction per cache file at a time (several editor windows start
    together): True when this process may extract; False when another is at
    it (its lock is younger than LOCK_STALE_S)."""
    lock = path.with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    except FileExistsError:
        try:
            if time.time() - lock.stat().st_mtime > LOCK_STALE_S or not _alive(lock):
                lock.unlink()
                return _claim(path)
        except OSError:
            pass
        return False
    except OSError:
        return True  # no writable cache: extract for this process alone


def _alive(lock: Path) -> bool:
    """Is the process that wrote the lock still running? (A server that
    exits mid-extraction cannot remove its lock.)"""
    try:
        pid = int(lock.read_text().strip())
        os.kill(pid, 0)
        return True
    except PermissionError:
        return True
    except (OSError, ValueError):
        return False


def _release(path: Path) -> None:
    try:
        path.with_suffix(".lock").unlink()
    except OSError:
        pass


def _wait_for_other(path: Path, timeout_s: float) -> dict | None:
    """Another process is extracting into `path`: wait for its result."""
    deadline = time.monotonic() + timeout_s
    lock = path.with_suffix(".lock")
    while time.monotonic() < deadline:
        data = _read(path)
        if data is not None:
            return data
        if not lock.exists() or not _alive(lock):
            return _read(path)
        time.sleep(0.25)
    return None


def _obtain(path: Path, python: str) -> tuple[dict, str]:
    """Extract into `path`, or wait for the process already doing it (and
    take over if it dies)."""
    for _ in range(3):
        if _claim(path):
            try:
                data = extract(python)
                _write(path, data)
            finally:
                _release(path)
            return data, "extracted"
        data = _wait_for_other(path, EXTRACT_TIMEOUT_S)
        if data is not None:
            return data, "cache"
    raise RuntimeError("another process is still extracting the Pallas API docs")


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("format") != FORMAT or not isinstance(data.get("apis"), dict):
        return None
    return data


class ApiDocs:
    def __init__(self) -> None:
        self._apis: dict[str, dict] = {}
        self._jax_path: str | None = None
        self._python: object = False  # False: not configured yet
        self._generation = 0
        self._lock = threading.Lock()
        self.ready = threading.Event()  # set when loading ended (with or without docs)
        self.state = "idle"  # idle | loading | extracting | ready | unavailable
        self.reason = ""
        self.source = ""  # "cache" or "extracted" (tests, logs)
        self._may_extract = threading.Event()

    # -------------------------------------------------------------- setup

    def configure(self, python: str | None) -> None:
        """Load the docs of the jax in `python` (None: the server's own, or
        the active virtualenv's). Reading the cache starts at once; a first
        extraction waits for `allow_extraction` (or 5 s)."""
        if python == self._python:
            return
        self._python = python
        with self._lock:
            self._generation += 1
            generation = self._generation
            self.ready.clear()
            self.state = "loading"
        threading.Thread(target=self._load, args=(generation, python), daemon=True,
                         name="pallas-api-docs").start()

    def allow_extraction(self) -> None:
        """The first diagnostics are out: an extraction may use the CPU now."""
        self._may_extract.set()

    def _interpreters(self, python: str | None) -> list[str]:
        if python:
            return [os.path.expanduser(python)]
        out = [sys.executable]
        venv = os.environ.get("VIRTUAL_ENV")
        if venv:
            candidate = os.path.join(venv, "bin", "python")
            if os.path.exists(candidate) and os.path.abspath(candidate) != os.path.abspath(
                    sys.executable):
                out.append(candidate)
        return out

    def _load(self, generation: int, python: str | None) -> None:
        data, source, reason = None, "", ""
        try:
            for exe in self._interpreters(python):
                info = _probe(exe)
                if info is None:
                    reason = f"jax is not installed in {exe}"
                    continue
                path = cache_file(info)
                data = _read(path)
                source = "cache"
                if data is None:
                    self._may_extract.wait(5.0)
                    if generation != self._generation:
                        return
                    self.state = "extracting"  # hovers stop waiting for us
                    data, source = _obtain(path, exe)
                break
        except RuntimeError as exc:
            reason = str(exc)
        except Exception as exc:  # never take the server down for docs
            log.exception("loading the Pallas API docs failed")
            reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            if generation != self._generation:
                return
            if data is not None:
                self._apis = data["apis"]
                self._jax_path = data.get("jax_path")
                self.state, self.source, self.reason = "ready", source, ""
                log.info("Pallas API docs for jax %s (%s): %d names", data.get("jax_version"),
                         source, len(self._apis))
            else:
                self._apis, self._jax_path = {}, None
                self.state, self.reason = "unavailable", reason
                log.info("no Pallas API docs: %s", reason)
            self.ready.set()

    # -------------------------------------------------------------- queries

    def entry(self, name: str) -> dict | None:
        """The entry of a canonical name (`pltpu.make_async_copy`), or of the
        nearest enclosing name that has one (`pltpu.SemaphoreType.DMA.x`)."""
        apis = self._apis
        while name:
            hit = apis.get(name)
            if hit is not None:
                return hit
            if "." not in name:
                return None
            name = name.rsplit(".", 1)[0]
        return None

    def lookup(self, name: str) -> ApiDoc | None:
        e = self.entry(name)
        if e is None:
            return None
        return ApiDoc(name=name.rsplit(".", 1)[-1], full_name=e.get("full_name") or name,
                      kind=e.get("kind") or "", signatures=(e["signature"],) if e.get("signature")
                      else (), docstring=e.get("doc") or "", module_path=e.get("file"),
                      line=e.get("line"))

    def params(self, name: str) -> list[dict] | None:
        e = self._apis.get(name)
        return list(e.get("params") or []) if e is not None and e.get("signature") else None

    def jax_root(self) -> Path | None:
        """The folder holding the user's `jax` package (for the catalog's links)."""
        return Path(self._jax_path).parent if self._jax_path else None

    @property
    def count(self) -> int:
        return len(self._apis)
