"""Check files on disk (shared by the CLI and pre-commit): discovery,
exclusion, decoding, configuration and the engine, as one project."""
from __future__ import annotations

import ast
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.check.collector import Collector
from pallas_lsp.check.config import ProjectConfig, find_pyproject, load_project_config
from pallas_lsp.engine.cells import NOTEBOOK, DocumentError, Program, document_kind, to_program
from pallas_lsp.engine.model import Analysis, Finding
from pallas_lsp.engine.project import Project
from pallas_lsp.engine.source import MAX_BYTES, decode_bytes
from pallas_lsp.check.globs import GitIgnore, find_git_root


@dataclass(frozen=True)
class Problem:
    """A file that could not be checked (fully)."""

    path: Path
    kind: str  # missing | unreadable | too-large | decode | syntax | internal
    message: str
    line: int = 1
    column: int = 1
    cell: int | None = None  # a notebook's cell (1-based); line and column are in it


@dataclass
class Options:
    """What `check` was asked for, beyond the paths."""

    select: list[str] | None = None
    extend_select: list[str] | None = None
    ignore: list[str] | None = None
    use_config: bool = True
    strict_config: bool = True  # unknown keys and codes are errors (the CLI), not warnings
    force_exclude: bool | None = None  # None: the configuration's
    respect_gitignore: bool | None = None
    coverage: bool = False
    # Texts that replace the disk's (stdin, files being fixed), by real path.
    sources: dict[str, str] = field(default_factory=dict)
    jobs: int | None = None  # None: decide by the input's size
    notes: list[str] = field(default_factory=list)  # for --verbose: what was skipped and why
    cache_dir: Path | None = None  # the result cache (cache.py); None: none
    warnings: list[str] = field(default_factory=list)  # for stderr, each once


class Configs:
    """The configuration of each file: its nearest pyproject.toml (cached
    per folder), with the command line's selection on top."""

    def __init__(self, options: Options):
        self.options = options
        self._by_file: dict[Path | None, ProjectConfig] = {}
        self._pyproject: dict[str, Path | None] = {}

    def for_dir(self, folder: str) -> ProjectConfig:
        opts = self.options
        source = None
        if opts.use_config:
            if folder not in self._pyproject:
                self._pyproject[folder] = find_pyproject(Path(folder))
            source = self._pyproject[folder]
        if source not in self._by_file:
            cfg = ProjectConfig()
            if source is not None:
                cfg = load_project_config(source.parent, strict=opts.strict_config)
            self._by_file[source] = cfg.merged(select=opts.select, ignore=opts.ignore,
                                               extend_select=opts.extend_select)
        return self._by_file[source]

    def for_file(self, path: str | os.PathLike) -> ProjectConfig:
        return self.for_dir(os.path.dirname(os.path.abspath(path)))

    def force_exclude(self, cfg: ProjectConfig) -> bool:
        f = self.options.force_exclude
        return cfg.force_exclude if f is None else f

    def respect_gitignore(self, cfg: ProjectConfig) -> bool:
        r = self.options.respect_gitignore
        return cfg.respect_gitignore if r is None else r


def discover(paths: list[Path], configs: Configs | None = None
             ) -> tuple[list[Path], list[Problem]]:
    """The files under `paths` that `include` takes (.py, .pyi, .ipynb by
    default; Markdown and rst pages when a pattern names them), in a stable
    order, without the excluded ones (`exclude`, `extend-exclude`,
    .gitignore). A path named here is checked even when excluded, unless
    force-exclude is on, and whatever its suffix. Only
    regular files (symbolic links to them too) are taken; FIFOs, devices,
    sockets and broken links become problems. The walk keeps its own stack,
    so a deep tree cannot exhaust Python's recursion limit, and it does not
    follow symbolic links to folders."""
    configs = configs or Configs(Options())
    notes = configs.options.notes
    files: list[Path] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for p in paths:
        in_memory = os.path.realpath(p) in configs.options.sources  # stdin
        try:
            st = os.stat(__file__) if in_memory else p.stat()
        except OSError as exc:
            if p.is_symlink():
                problems.append(Problem(p, "unreadable", "broken symbolic link: skipped"))
            elif isinstance(exc, FileNotFoundError):
                problems.append(Problem(p, "missing", "no such file or directory"))
            else:
                problems.append(Problem(p, "unreadable", f"cannot read: {exc.strerror or exc}"))
            continue
        is_dir = stat.S_ISDIR(st.st_mode) and not in_memory
        cfg = configs.for_dir(os.path.abspath(p)) if is_dir else configs.for_file(p)
        pattern = cfg.excluded_path(p, is_dir)
        if pattern is not None:
            where = f" in {cfg.source}" if cfg.source else " (the default exclusions)"
            if configs.force_exclude(cfg):
                notes.append(f"{p}: skipped: matches `exclude` pattern {pattern!r}{where} "
                             f"(--force-exclude)")
                continue
            notes.append(f"{p}: checked although it matches `exclude` pattern {pattern!r}"
                         f"{where}, because it was named on the command line "
                         f"(--force-exclude skips it)")
        if stat.S_ISREG(st.st_mode):
            _add(p, files, seen)
        elif is_dir:
            _walk(p, files, problems, seen, configs)
        else:
            problems.append(_special(p, st.st_mode))
    return files, problems


def _add(path: Path, files: list[Path], seen: set[str]) -> None:
    real = os.path.realpath(path)
    if real not in seen:  # `check a/ a/k.py` checks k.py once
        seen.add(real)
        files.append(path)


def _walk(top: Path, files: list[Path], problems: list[Problem], seen: set[str],
          configs: Configs) -> None:
    notes = configs.options.notes
    git_root = find_git_root(str(top))
    gitignore = GitIgnore(git_root) if git_root else None
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(Problem(folder, "unreadable",
                                    f"cannot read this folder: {exc.strerror or exc}"))
            continue
        cfg = configs.for_dir(os.path.abspath(folder))
        use_git = gitignore is not None and configs.respect_gitignore(cfg)
        subdirs = []
        for entry in entries:
            path = folder / entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and not cfg.included(entry.name, str(path)):
                    continue
                pattern = cfg.excluded_entry(str(path), is_dir)
                if pattern is not None:
                    notes.append(f"{path}: skipped: matches `exclude` pattern {pattern!r}")
                    continue
                if use_git:
                    hit = gitignore.ignored(str(path), is_dir)
                    if hit is not None:
                        notes.append(f"{path}: skipped: ignored by .gitignore ({hit.text!r})")
                        continue
                if is_dir:
                    subdirs.append(path)
                    continue
                mode = entry.stat().st_mode  # follows a link: its target is what is read
            except OSError as exc:
                problems.append(Problem(path, "unreadable", "broken symbolic link: skipped"
                                        if entry.is_symlink() else
                                        f"cannot read: {exc.strerror or exc}"))
                continue
            if stat.S_ISREG(mode):
                _add(path, files, seen)
            elif not stat.S_ISDIR(mode):  # a link to a folder is not followed
                problems.append(_special(path, mode))
        stack.extend(reversed(subdirs))  # depth first, in name order, as os.walk did


def _special(path: Path, mode: int) -> Problem:
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a special file")
    return Problem(path, "unreadable", f"not a regular file ({kind}): skipped")


# The engine analyses at most MAX_BYTES code points; reading stops a little
# beyond what could still decode to that many (UTF-8 needs at most 4 bytes each).
_READ_LIMIT = 4 * MAX_BYTES + 4


def read_source(path: Path) -> tuple[str | None, Problem | None]:
    """The text of a regular file of at most MAX_BYTES code points. Opened
    without blocking (a FIFO that nobody writes must not hang the check) and
    checked on the open descriptor, then read up to a limit (a link to
    /dev/zero must not fill the memory)."""
    data, problem = read_bytes(path)
    if problem is not None:
        return None, problem
    return decode(path, data)


def read_bytes(path: Path) -> tuple[bytes | None, Problem | None]:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, Problem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, _special(path, st.st_mode)
        chunks, size = [], 0
        while size <= _READ_LIMIT:
            chunk = os.read(fd, min(1 << 20, _READ_LIMIT + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, Problem(path, "unreadable", f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if size > _READ_LIMIT:
        return None, _too_large(path, f"more than {_READ_LIMIT:,} bytes")
    return b"".join(chunks), None


def decode(path: Path, data: bytes) -> tuple[str | None, Problem | None]:
    try:
        text = decode_bytes(data)  # PEP 263: a coding cookie is honoured, as Python does
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        name = "UTF-8" if exc.encoding.lower().replace("_", "-") in ("utf-8", "utf8") else exc.encoding
        return None, Problem(path, "decode", f"not valid {name} (byte {exc.start}): skipped", line)
    except LookupError as exc:
        return None, Problem(path, "decode", f"unknown encoding in the coding cookie ({exc}): "
                             "skipped", 1)
    if len(text) > MAX_BYTES:
        return None, _too_large(path, f"{len(text):,} characters")
    return text, None


def read_document(path: Path) -> tuple[str | None, Problem | None]:
    """A notebook or page, as UTF-8 (JSON, Markdown and rst know no coding
    cookie). The byte limit is the one for sources; a notebook's outputs
    count there, but only its code must fit the engine (see _analyse_one)."""
    data, problem = read_bytes(path)
    if problem is not None:
        return None, problem
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return None, Problem(path, "decode", f"not valid UTF-8 (byte {exc.start}): skipped",
                             line)


def _too_large(path: Path, size: str) -> Problem:
    return Problem(path, "too-large", f"file too large to check ({size}; pallas-lsp analyses "
                   f"at most {MAX_BYTES:,} characters): skipped")


@dataclass
class Checked:
    """One checked file: its analysis, the findings to report there, and
    the configuration that applies to it."""

    path: Path
    analysis: Analysis | None
    findings: list[Finding]
    config: ProjectConfig | None = None
    # A notebook or docs page: the findings are in its program's coordinates.
    document: Program | None = None


# Callers outside the checked paths analysed to see how a checked helper
# module is used (nearest importers first).
MAX_EXTRA_CALLERS = 32

# Below this much source, forking a second process costs more than it saves
# (benchmarks/cli_speed.py); above it, both cores analyse.
PARALLEL_MIN_BYTES = 160_000
PARALLEL_MIN_FILES = 6


def check_project(paths: list[Path], *, select=None, ignore=None, use_config: bool = True,
                  coverage: bool = False, options: Options | None = None
                  ) -> tuple[list[Checked], list[Problem]]:
    """Analyse the files under `paths` as one project: kernels launched in
    one file are followed into helpers in others, and a helper module gets
    the findings its callers' kernels reach in it (even when those callers
    are not among `paths`)."""
    if options is None:
        options = Options(select=select, ignore=ignore, use_config=use_config,
                          coverage=coverage)
    coverage = options.coverage
    configs = Configs(options)
    files, problems = discover(paths, configs)
    root, kind = _project_root(paths)
    sources = options.sources
    overlay = (lambda p: sources.get(os.path.realpath(p))) if sources else None

    cache = None
    if options.cache_dir is not None:
        from pallas_lsp.check.cache import ResultCache, TrackedProject

        cache = ResultCache(options.cache_dir, root=str(root), coverage=options.coverage).open()
        project = TrackedProject([str(root)], overlay=overlay)
    else:
        project = Project([str(root)], overlay=overlay)
    project.fixed_texts = True
    with Collector(project) as after:  # (collector.py: the garbage collector between files)
        analysed = _analyse(files, root, project, options, cache, after)
        checked: dict[str, Checked] = {}
        foreign: dict[str, list[Finding]] = {}
        reach: dict[str, dict] = {}  # coverage of a file's sites seen from other files
        for path, real, analysis, problem, document in analysed:
            if problem is not None:
                problems.append(problem)
                continue
            if document is not None:
                _note_document_problems(path, analysis, document, problems, options.notes)
            else:
                _note_problems(path, analysis, problems, sources.get(real))
            checked[real] = Checked(path, analysis, list(analysis.findings),
                                    configs.for_file(path), document)
            for other, found in analysis.foreign.items():
                foreign.setdefault(other, []).extend(found)
            _note_reach(reach, analysis)
        if kind != "installed":
            _analyse_outside_callers(project, root, kind == "project", checked, foreign, reach,
                                     coverage, cache, after)
    if cache is not None:
        options.notes.append(f"{cache.hits} analyses reused from the cache ({cache.folder})")
        if cache.warning and cache.warning not in options.warnings:  # --fix checks again
            options.warnings.append(cache.warning)
    for real, item in checked.items():
        extra = foreign.get(real, [])
        if extra:
            seen = {(f.code, f.span) for f in item.findings}
            for f in extra:
                if (f.code, f.span) not in seen:
                    seen.add((f.code, f.span))
                    item.findings.append(f)
            item.findings.sort(key=lambda f: (f.span.line, f.span.col, f.code))
        item.findings = item.config.filter(item.findings, item.path)
        if coverage and item.analysis is not None and item.analysis.coverage is not None:
            _apply_reach(item.analysis.coverage, reach.get(real, {}))
    return list(checked.values()), problems


# ---------------------------------------------------------------- analysis


def _analyse(files: list[Path], root: Path, project: Project, options: Options, cache=None,
             after=None) -> list[tuple[Path, str, Analysis | None, Problem | None]]:
    """Each file's analysis, in the order of `files`: from the cache, else
    in this process for small inputs, else split over processes (each with
    its own Project; the findings they report in other files come back in
    `Analysis.foreign`)."""
    out: list = [None] * len(files)
    todo = list(range(len(files)))
    if cache is not None:
        for i in todo:
            out[i] = _analyse_one(files[i], project, options.sources, options.coverage, cache,
                                  analyse=False)
        todo = [i for i in todo if out[i] is None]
    missed = [files[i] for i in todo]
    jobs = _jobs(missed, options)
    if jobs > 1:
        try:
            for i, item in zip(todo, _analyse_in_processes(missed, root, options, jobs, cache)):
                out[i] = item
            options.notes.append(f"analysed {len(missed)} files in {jobs} processes")
            return out
        except (OSError, ImportError, RuntimeError):  # no processes here: one core then
            pass
    options.notes.append(f"analysed {len(missed)} files in this process")
    for i in todo:
        out[i] = _analyse_one(files[i], project, options.sources, options.coverage, cache)
        if after is not None:
            after(out[i][2])
    return out


def _jobs(files: list[Path], options: Options) -> int:
    if options.jobs is not None:
        return max(1, options.jobs)
    env = os.environ.get("PALLAS_LSP_JOBS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    cores = _cores()
    if cores < 2 or len(files) < PARALLEL_MIN_FILES:
        return 1
    total = 0
    for path in files:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
        if total >= PARALLEL_MIN_BYTES:
            return min(2, cores)  # the machines this runs on have 2 cores to share
    return 1


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _analyse_one(path: Path, project: Project, sources: dict[str, str], coverage: bool,
                 cache=None, analyse: bool = True):
    """(path, real path, analysis, problem, document) of one file; with
    `analyse` False, None unless the cache has it (or it cannot be read)."""
    real = project.realpath(str(path))
    text = sources.get(real)
    kind = document_kind(str(path))
    if text is None:
        text, problem = read_document(path) if kind is not None else read_source(path)
        if problem is not None:
            return path, real, None, problem, None
    if cache is not None and not analyse:
        hit = cache.get(real, text, project)
        return (path, real, hit[0], None, hit[1]) if hit is not None else None
    raw = text
    document = None
    if kind is not None:
        try:
            document = to_program(text, kind)
        except DocumentError as exc:
            return path, real, None, Problem(path, "malformed", f"{exc}: skipped"), None
        text = document.text
        if len(text) > MAX_BYTES:
            return path, real, None, _too_large(path, f"{len(text):,} characters of code"), None
    analysis = _analyse_text(text, real, project, coverage, cache, raw, document)
    return path, real, analysis, None, document


def _analyse_text(text: str, real: str, project: Project, coverage: bool, cache=None,
                  raw: str | None = None, document: Program | None = None) -> Analysis:
    """The engine on one file's (program) text; kept in the cache, keyed by
    `raw` (the file's own text) and what the analysis read of others."""
    from pallas_lsp.engine import analyze

    if cache is None:
        return analyze(text, real, project=project, coverage=coverage, findings_only=True)
    from pallas_lsp.check.cache import Record

    project.record = record = Record()
    try:
        analysis = analyze(text, real, project=project, coverage=coverage, findings_only=True)
    finally:
        project.record = None
    cache.put(real, text if raw is None else raw, record, analysis, document)
    return analysis


_worker: dict = {}


def _worker_start(root: str, sources: dict[str, str], coverage: bool, cache=None) -> None:
    overlay = (lambda p: sources.get(os.path.realpath(p))) if sources else None
    if cache is not None:
        from pallas_lsp.check.cache import TrackedProject
        project = TrackedProject([root], overlay=overlay)
    else:
        project = Project([root], overlay=overlay)
    project.fixed_texts = True
    # The collector stays off in the worker (its process ends with the check).
    after = Collector(project).__enter__()
    _worker.update(project=project, sources=sources, coverage=coverage, cache=cache, after=after)


def _worker_run(item: tuple[int, str]):
    index, path = item
    path, real, analysis, problem, document = _analyse_one(
        Path(path), _worker["project"], _worker["sources"], _worker["coverage"],
        _worker["cache"])
    _worker["after"](analysis)
    if analysis is not None:  # only what the parent reads travels back
        analysis = Analysis(path=analysis.path, findings=analysis.findings,
                            foreign=analysis.foreign, coverage=analysis.coverage,
                            syntax_error=analysis.syntax_error,
                            internal_error=analysis.internal_error)
    return index, real, analysis, problem, document


def _analyse_in_processes(files: list[Path], root: Path, options: Options, jobs: int,
                          cache=None):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Forked workers start in milliseconds with everything already imported;
    # the CLI has no threads of its own. Elsewhere (macOS, Windows) spawn.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)

    def size(p: Path) -> int:
        try:
            return os.stat(p).st_size
        except OSError:
            return 0

    # Largest first, one file per task: the two workers finish together.
    order = sorted(range(len(files)), key=lambda i: -size(files[i]))
    out: list = [None] * len(files)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_start,
                             initargs=(str(root), options.sources, options.coverage,
                                       cache)) as pool:
        for index, real, analysis, problem, document in pool.map(
                _worker_run, [(i, str(files[i])) for i in order], chunksize=1):
            out[index] = (files[index], real, analysis, problem, document)
    return out


def _note_reach(reach: dict[str, dict], analysis: Analysis) -> None:
    cov = analysis.coverage
    if cov is None:
        return
    for path, sites in cov.foreign.items():
        mine = reach.setdefault(path, {})
        for key, val in sites.items():
            if key not in mine or (val[0] and not mine[key][0]):
                mine[key] = val


def _apply_reach(cov, seen: dict) -> None:
    """A helper's DMA sites reached through other files' kernels count."""
    for site in cov.sites:
        hit = seen.get((site.line, site.col))
        if hit is None or (site.reached and site.launched and (site.known or not hit[0])):
            continue  # (a launch elsewhere beats kernel code run without one here)
        site.reached = site.launched = True
        site.known = hit[0]
        site.unknown = list(hit[1])
        site.reason = "" if hit[0] else ("reached from another file's kernel, but the engine "
                                         "could not tell what " + ", ".join(
                                             f"`{r}`" for r in hit[1]) + " is")


def _analyse_outside_callers(project: Project, root: Path, is_project: bool,
                             checked: dict[str, Checked],
                             foreign: dict[str, list[Finding]], reach: dict,
                             coverage: bool, cache=None, after=None) -> None:
    """Files outside the checked set that import a checked file: analyse
    them too (their findings are not reported, only what they reach in the
    checked files)."""
    if not checked or not os.path.isdir(root):
        return
    if is_project:
        project.index([str(root)])
    else:  # a loose folder (no pyproject.toml, no package): its own scripts only
        project.index([str(p) for p in root.glob("*.py")])
    extra: list[str] = []
    for real in checked:
        for caller in project.importers(real, limit=MAX_EXTRA_CALLERS):
            if caller not in checked and caller not in extra:
                extra.append(caller)
    for caller in extra[:MAX_EXTRA_CALLERS]:
        text = project.text(caller)
        if text is None:
            continue
        hit = cache.get(caller, text, project) if cache is not None else None
        analysis = hit[0] if hit is not None else \
            _analyse_text(text, caller, project, coverage, cache)
        if after is not None:
            after(analysis)
        for other, found in analysis.foreign.items():
            if other in checked:
                foreign.setdefault(other, []).extend(found)
        _note_reach(reach, analysis)


def _note_problems(path: Path, analysis: Analysis, problems: list[Problem],
                   text: str | None = None) -> None:
    if analysis.internal_error:
        problems.append(Problem(path, "internal", "pallas-lsp could not analyse this file "
                                f"({analysis.internal_error}); please report it"))
    if analysis.syntax_error:
        line = int(analysis.syntax_error.split(":")[0].split()[-1]) \
            if analysis.syntax_error.startswith("line ") else 1
        message = analysis.syntax_error.split(": ", 1)[-1]
        problems.append(Problem(path, "syntax", f"SyntaxError: {message} (the rest of the file "
                                f"was still checked)", line, _syntax_column(path, line, text)))


def _note_document_problems(path: Path, analysis: Analysis, document: Program,
                            problems: list[Problem], notes: list[str]) -> None:
    """A notebook's or page's cells that do not parse, where they are in it
    (each was left out on its own: the others were checked)."""
    if document.note:
        notes.append(f"{path}: {document.note}")
    if analysis.internal_error:
        problems.append(Problem(path, "internal", "pallas-lsp could not analyse this file "
                                f"({analysis.internal_error}); please report it"))
    for cell in document.cells:
        if cell.error is None:
            continue
        line, col, message = cell.error
        pos = document.position(cell.start + line, col)
        if document.kind != NOTEBOOK:  # a docs page's fragment (`def f(...):`): not a bug
            notes.append(f"{path}:{pos.line + 1}: a code block that does not parse was left "
                         f"out ({message})")
            continue
        problems.append(Problem(path, "syntax", f"SyntaxError: {message} (the other cells "
                                f"were still checked)", pos.line + 1, pos.col + 1, cell.number))
    if analysis.syntax_error and not any(c.error for c in document.cells):
        problems.append(Problem(path, "syntax", f"SyntaxError: {analysis.syntax_error}"))


def _syntax_column(path: Path, line: int, text: str | None) -> int:
    """The parser's column for the error on `line` (the engine keeps only
    the line): parse again, which happens for broken files only."""
    if text is None:
        text, _ = read_source(path)
    if text is None:
        return 1
    try:
        ast.parse(text)
    except SyntaxError as exc:
        if exc.lineno == line and exc.offset:
            return max(1, exc.offset)
    except (ValueError, RecursionError, MemoryError):
        pass
    return 1


def check_paths(paths: list[Path], *, select=None, ignore=None, use_config: bool = True
                ) -> tuple[list[tuple[Path, Finding]], list[Problem]]:
    checked, problems = check_project(paths, select=select, ignore=ignore,
                                      use_config=use_config)
    results = [(item.path, f) for item in checked for f in item.findings]
    return results, problems


def _project_root(paths: list[Path]) -> tuple[Path, str]:
    """The folder imports are resolved from and callers are looked for in,
    and what it is:
    - "installed": the first path is an installed library (under
      site-packages, maybe in a virtualenv inside the user's project);
      imports resolve from site-packages, and no caller is looked for: the
      project around the environment is not that library's code;
    - "project": the nearest pyproject.toml's folder above the first path,
      else the folder above the outermost package around it (the whole tree
      is indexed for callers);
    - "folder": the folder given, or the file's folder (its own scripts)."""
    first = (paths[0] if paths else Path.cwd()).absolute()
    if not os.path.exists(first):
        return Path.cwd(), "folder"
    start = first if os.path.isdir(first) else first.parent
    for folder in [start, *start.parents]:
        if folder.name in ("site-packages", "dist-packages"):
            return folder, "installed"
    found = find_pyproject(start)
    if found is not None:
        return found.parent, "project"
    top = start
    while os.path.isfile(top / "__init__.py") and top.parent != top:
        top = top.parent
    return top, "project" if top != start or os.path.isdir(first) else "folder"
