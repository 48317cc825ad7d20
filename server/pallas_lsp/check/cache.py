"""The command line's result cache (`.pallas_lsp_cache/`): the engine's
output for each analysed file, reused while nothing its analysis read has
changed, as ruff's cache is.

An entry holds what the engine said about one file (its findings, those it
found in other files, coverage, a notebook's or page's program), before the
configuration acts: rule selection, per-file-ignores and severities are
applied on every run, so changing them needs no new analysis (the engine
runs every rule whatever is selected). An entry is used only when all of
this is as it was:

- the settings: the cache format, pallas-lsp's version, the engine
  fingerprint (a hash of the package's own files, so that an edit of
  pallas-lsp itself counts), the Python version (its parser), the project
  root imports are resolved from, coverage on or off, and the engine's one
  environment switch;
- the file: its real path and its content (the text the engine was given);
- what the analysis learnt of other files: the content of every file it
  read (the helpers its kernels call, the modules those import), and every
  import it resolved, to the same file or to none (a module added that now
  shadows one, a helper deleted). The engine reaches other files only
  through `Project.resolve`, `submodule` and `source`: `TrackedProject`
  records each answer while an analysis runs, so the set is exact.

Entries are JSON, one file each, named by a hash of the settings and the
path, written to a temporary file and renamed into place: two runs at once
each leave a whole entry. A cache file that is corrupt, truncated, of
another format or version, or not ours is a miss, never an error (and
never code to run: no pickle). A cache that cannot be written costs one
warning; the run goes on without it.

Not cached: an analysis that failed (an engine error) or that Python's own
recursion limit cut (how deep the stack already was can differ between
runs), and an analysis during which a file it read changed.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
import time
from enum import Enum
from pathlib import Path

from pallas_lsp import __version__
from pallas_lsp.check.atomic import replace_file
from pallas_lsp.engine.cells import Cell, Program
from pallas_lsp.engine.model import Analysis, Edit, Finding, Fix, Related, Severity, Span
from pallas_lsp.engine.project import Project

FORMAT = 1
ENV = "PALLAS_LSP_CACHE_DIR"
DEFAULT_NAME = ".pallas_lsp_cache"
_BUCKET = "check-v"  # a bucket per format, version, fingerprint and Python
_STALE_BUCKET_S = 24 * 3600  # another version's bucket unused this long is removed
_STALE_ENTRY_S = 30 * 24 * 3600  # an entry unused this long is removed (a deleted file's)
_TOUCH_S = 7 * 24 * 3600  # a reused entry older than this is touched: it is in use
_SWEEP_S = 24 * 3600  # a bucket is swept at most this often
_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This file is a cache directory tag created by pallas-lsp.\n"
        "# For information about cache directory tags, see https://bford.info/cachedir/\n")
# What the engine reads from the environment (rules/syntax_floor.py).
_ENGINE_ENV = ("PALLAS_LSP_NO_SYNTAX_FLOOR",)
_RECURSION_CUT = "nested too deeply"  # interp/driver.py's `incomplete` for a RecursionError


def _file_mode() -> int:
    mask = os.umask(0o22)  # (reading the umask sets it: put it back at once)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _file_mode()


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


# ---------------------------------------------------------------- where


def folder_for(cli_dir: str | None, config_dir: Path | None = None) -> Path:
    """The cache folder: `--cache-dir`, else $PALLAS_LSP_CACHE_DIR (where
    the language server keeps its own cache too), else `cache-dir` of the
    configuration, else `.pallas_lsp_cache` in the project root (the folder
    of the pyproject.toml nearest the current folder, else the current
    folder), as ruff places `.ruff_cache`."""
    if cli_dir:
        return Path(cli_dir)
    env = os.environ.get(ENV, "").strip()
    if env:
        return Path(env)
    if config_dir is not None:
        return config_dir
    from pallas_lsp.check.config import find_pyproject

    cwd = Path.cwd()
    found = find_pyproject(cwd)
    return (found.parent if found is not None else cwd) / DEFAULT_NAME


_fingerprint: str | None = None


def fingerprint() -> str:
    """The engine fingerprint of the installed pallas_lsp package."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = package_hash(Path(__file__).resolve().parent.parent)
    return _fingerprint


def package_hash(top: Path) -> str:
    """A hash of every file of the package at `top` (code and data): a new
    version, or an edit during development, starts a new bucket."""
    h = hashlib.blake2b(digest_size=16)
    files = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files.extend(os.path.join(folder, n) for n in names
                     if n.endswith((".py", ".json", ".toml")))
    for path in sorted(files):
        h.update(os.path.relpath(path, top).encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(b"\1unreadable")
        h.update(b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------- what an analysis read


class Record:
    """What one analysis learnt of other files."""

    __slots__ = ("resolved", "submodules", "reads", "unstable")

    def __init__(self):
        self.resolved: dict[tuple, str | None] = {}  # (importing, module, level) -> file
        self.submodules: dict[tuple, str | None] = {}  # (package file, name) -> file
        self.reads: dict[str, str | None] = {}  # file -> digest of its text (None: unreadable)
        self.unstable = False  # a file changed while it was read: do not keep the result

    def read(self, path: str, text: str | None) -> None:
        d = digest(text) if text is not None else None
        if self.reads.setdefault(path, d) != d:
            self.unstable = True


class TrackedProject(Project):
    """A Project that, while `record` is set, notes each answer it gives
    about other files (the engine asks for nothing else)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.record: Record | None = None

    def resolve(self, importing, module, level=0):
        found = super().resolve(importing, module, level)
        if self.record is not None:
            self.record.resolved[(importing, module, level)] = found
        return found

    def submodule(self, package_file, name):
        found = super().submodule(package_file, name)
        if self.record is not None:
            self.record.submodules[(package_file, name)] = found
        return found

    def text(self, path):
        text = super().text(path)
        if self.record is not None:
            self.record.read(path, text)
        return text


# ---------------------------------------------------------------- the cache


class ResultCache:
    """One run's view of the cache folder, for one set of settings."""

    def __init__(self, folder: Path, *, root: str, coverage: bool):
        self.folder = Path(folder)
        base = {"format": FORMAT, "version": __version__, "engine": fingerprint(),
                "python": list(sys.version_info[:3]) + [sys.implementation.name]}
        self.bucket = self.folder / (_BUCKET + digest(json.dumps(base, sort_keys=True))[:24])
        settings = dict(base, root=root, coverage=coverage,
                        env={k: os.environ.get(k, "") for k in _ENGINE_ENV})
        self.settings = digest(json.dumps(settings, sort_keys=True))
        self.writable = True
        self.warning: str | None = None  # why nothing is written (said once)
        self._digests: dict[str, str | None] = {}  # this run's answers, each found once
        self._resolved: dict[tuple, str | None] = {}
        self._submodules: dict[tuple, str | None] = {}
        self.hits = 0

    # ------------------------------------------------------------ setting up

    def open(self) -> ResultCache:
        """Make the folder (with a .gitignore of `*` and a CACHEDIR.TAG) and
        this version's bucket; when that fails, reads still work and
        nothing is written."""
        try:
            fresh = not os.path.isdir(self.bucket)
            if fresh:
                os.makedirs(self.bucket, exist_ok=True)
            for name, text in ((".gitignore", "# Made by pallas-lsp: the whole folder is a "
                                "cache.\n*\n"), ("CACHEDIR.TAG", _TAG)):
                if not os.path.exists(self.folder / name):
                    _write_atomic(self.folder / name, text.encode())
            if not os.access(self.bucket, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable", str(self.bucket))
            if fresh:
                self._prune()
            self._sweep(fresh)
        except OSError as exc:
            self._unwritable(exc)
        return self

    def _unwritable(self, exc: OSError) -> None:
        self.writable = False
        if self.warning is None:
            self.warning = (f"cannot write the cache in {self.folder} "
                            f"({exc.strerror or exc}): results are not cached "
                            f"(--no-cache or --cache-dir DIR)")

    def _prune(self) -> None:
        """Buckets of other versions, unused for a day, go (best effort: a
        run of that version still using one only loses its cache)."""
        now = time.time()
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        for entry in entries:
            if not entry.name.startswith(_BUCKET) or entry.path == str(self.bucket):
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_BUCKET_S \
                        and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
            except OSError:
                pass

    def _sweep(self, fresh: bool) -> None:
        """At most once a day: entries unused for a month (files deleted or
        moved since) and temporary files a killed run left."""
        marker = self.bucket / ".swept"
        now = time.time()
        try:
            if now - os.stat(marker).st_mtime < _SWEEP_S:
                return
        except OSError:
            pass
        try:
            _write_atomic(marker, b"")
            if fresh:
                return
            entries = list(os.scandir(self.bucket))
        except OSError:
            return
        for entry in entries:
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if (entry.name.endswith(".json") and age > _STALE_ENTRY_S) or \
                        (entry.name.startswith(".tmp-") and age > 3600):
                    os.unlink(entry.path)
            except OSError:
                pass

    # ------------------------------------------------------------ entries

    def _entry(self, real: str) -> Path:
        return self.bucket / (digest(self.settings + "\0" + real)[:32] + ".json")

    def get(self, real: str, text: str, project: Project):
        """(Analysis, Program or None) of `real` with content `text`, if an
        entry is valid for it and for every file it read."""
        try:
            with open(self._entry(real), "rb") as fh:
                entry = json.loads(fh.read(), object_hook=_decode)
                used = os.fstat(fh.fileno()).st_mtime
            if entry["key"] != [self.settings, real, digest(text)]:
                return None
            for (importing, module, level), found in entry["resolved"]:
                if self._resolve(project, importing, module, level) != found:
                    return None
            for (package, name), found in entry["submodules"]:
                if self._submodule(project, package, name) != found:
                    return None
            for path, d in entry["reads"]:
                if self._digest(project, path) != d:
                    return None
            value = entry["analysis"]
            analysis = Analysis(path=real, findings=value["findings"], foreign=value["foreign"],
                                coverage=value["coverage"], syntax_error=value["syntax_error"],
                                incomplete=value["incomplete"])
            document = entry["document"]
            if not (isinstance(analysis.findings, list) and isinstance(analysis.foreign, dict)
                    and all(isinstance(f, Finding) for f in analysis.findings)
                    and (document is None or isinstance(document, Program))):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None  # no entry, or one we cannot use: analysed again, and replaced
        self.hits += 1
        if time.time() - used > _TOUCH_S and self.writable:
            try:  # still in use: not swept
                os.utime(self._entry(real))
            except OSError:
                pass
        return analysis, document

    # Entries share most of what they check (the same helpers, imported
    # alike): each question is asked of the file system once per run.

    def _resolve(self, project: Project, importing, module, level):
        key = (importing, module, level)
        if key not in self._resolved:
            self._resolved[key] = project.resolve(importing, module, level)
        return self._resolved[key]

    def _submodule(self, project: Project, package, name):
        key = (package, name)
        if key not in self._submodules:
            self._submodules[key] = project.submodule(package, name)
        return self._submodules[key]

    def _digest(self, project: Project, path: str) -> str | None:
        if path not in self._digests:
            text = project.text(path)
            self._digests[path] = digest(text) if text is not None else None
        return self._digests[path]

    def put(self, real: str, text: str, record: Record, analysis: Analysis,
            document: Program | None) -> None:
        """Keep the analysis of `real` (content `text`); never raises."""
        if not self.writable or record.unstable or analysis.internal_error \
                or _RECURSION_CUT in (analysis.incomplete or ""):
            return
        try:
            entry = {
                "key": [self.settings, real, digest(text)],
                "resolved": [[list(k), v] for k, v in record.resolved.items()],
                "submodules": [[list(k), v] for k, v in record.submodules.items()],
                "reads": [[k, v] for k, v in record.reads.items()],
                "analysis": {"findings": analysis.findings, "foreign": analysis.foreign,
                             "coverage": analysis.coverage,
                             "syntax_error": analysis.syntax_error,
                             "incomplete": analysis.incomplete},
                "document": document,
            }
            data = json.dumps(_to_json(entry), separators=(",", ":")).encode()
        except (TypeError, ValueError, RecursionError):
            return  # something the format does not know: not cached
        try:
            _write_atomic(self._entry(real), data)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                self._unwritable(exc)  # said once
            elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                self.writable = False  # a full disk: the report, if anything, says so
            # else (the bucket removed under us by another version's run): a miss next time


def _write_atomic(path: Path, data: bytes) -> None:
    """Whole or not at all: a reader sees the old entry or the new one (the
    mode is the umask's: mkstemp's 0600 would keep a shared cache private)."""
    replace_file(str(path), data, prefix=".tmp-", suffix=".part",
                 finish=lambda fd, tmp: os.fchmod(fd, _MODE))


# ---------------------------------------------------------------- JSON


def _classes() -> dict[str, type]:
    from pallas_lsp.engine import coverage

    return {"Span": Span, "Finding": Finding, "Related": Related, "Fix": Fix, "Edit": Edit,
            "Site": coverage.Site, "CoverageLaunch": coverage.LaunchSite,
            "FileCoverage": coverage.FileCoverage, "Cell": Cell, "Program": Program}


_CLASSES: dict[str, type] = {}
_TAGS: dict[type, str] = {}
_ENUMS = {"Severity": Severity}


def _known() -> None:
    if not _CLASSES:
        _CLASSES.update(_classes())
        _TAGS.update({cls: tag for tag, cls in _CLASSES.items()})


def _to_json(value):
    """The value in JSON's types: tuples, sets, dicts whose keys are not
    plain strings, Severity and the engine's records (field by field)
    tagged with `$`-keys that `_decode` reads back."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, Enum):
        return value
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, tuple):
        return {"$t": [_to_json(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _to_json(v) for k, v in value.items()}
        return {"$d": [[_to_json(k), _to_json(v)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        items = sorted((_to_json(v) for v in value), key=repr)
        return {"$f" if isinstance(value, frozenset) else "$s": items}
    if isinstance(value, Enum):
        tag = type(value).__name__
        if _ENUMS.get(tag) is type(value):
            return {"$e": tag, "v": value.value}
    else:
        _known()
        tag = _TAGS.get(type(value))
        if tag is not None:
            return {"$r": tag, "f": [_to_json(getattr(value, name))
                                     for name in type(value).__record_fields__]}
    raise TypeError(f"not cached: {type(value).__name__}")


def _decode(obj: dict):
    if "$r" in obj:
        _known()
        return _CLASSES[obj["$r"]](*obj["f"])
    if "$t" in obj:
        return tuple(obj["$t"])
    if "$d" in obj:
        return dict(obj["$d"])
    if "$f" in obj:
        return frozenset(obj["$f"])
    if "$s" in obj:
        return set(obj["$s"])
    if "$e" in obj:
        return _ENUMS[obj["$e"]](obj["v"])
    return obj
