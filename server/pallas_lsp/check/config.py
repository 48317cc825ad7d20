"""Project configuration: `[tool.pallas-lsp]` in the nearest pyproject.toml.

    [tool.pallas-lsp]
    select = ["PAL1", "PAL2"]          # rule codes or prefixes (default: ALL)
    extend-select = ["PAL3"]
    ignore = ["PAL111"]
    include = ["*.py", "*.pyi", "*.ipynb"]  # what a folder's walk takes (the default)
    extend-include = ["docs/**/*.md"]  # Markdown / rst pages are taken only when named
    exclude = [...]                    # replaces the default list (see DEFAULT_EXCLUDE)
    extend-exclude = ["third_party/", "kernels/generated_*.py"]
    respect-gitignore = true
    force-exclude = false
    output-format = "concise"
    cache-dir = ".pallas_lsp_cache"    # `check`'s result cache (the default), relative to this file
    [tool.pallas-lsp.per-file-ignores]
    "tests/**" = ["PAL3"]
    [tool.pallas-lsp.severity]
    PAL204 = "warning"                 # error | warning | info | hint

Globs are gitignore-style and relative to the folder of the pyproject.toml
(the current folder when there is none), so the same file is excluded however
its path is typed. `pallas-lsp check` rejects unknown keys and codes (exit
2); the language server reads the same table leniently: what it cannot use
becomes a warning and the rest applies.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pallas_lsp.check.codes import SelectorError, normalise_selector, specificity
from pallas_lsp.engine.model import Finding, Severity
from pallas_lsp.engine.records import replace
from pallas_lsp.check.globs import PatternSet

SEVERITIES = ("error", "warning", "info", "hint")
OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit")

# Folders (and files) never worth checking, as in ruff; `exclude` replaces the
# list, `extend-exclude` adds to it.
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pycache__", "__pypackages__", "_build", "buck-out",
    ".pallas_lsp_cache",
    "build", "dist", "node_modules", "site-packages", "venv", "*.egg-info/",
)

# What a walk of a folder takes; `include` replaces it, `extend-include` adds.
# Markdown and reStructuredText pages are mostly prose: only when named.
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")
_DEFAULT_SUFFIXES = (".py", ".pyi", ".ipynb")

# Keys other parts of pallas-lsp read from the same table.
_FOREIGN_KEYS = ("profiles",)  # runs: [tool.pallas-lsp.profiles.NAME]
KNOWN_KEYS = ("select", "extend-select", "ignore", "extend-ignore", "include",
              "extend-include", "exclude",
              "extend-exclude", "per-file-ignores", "extend-per-file-ignores",
              "respect-gitignore", "force-exclude", "output-format", "severity",
              "cache-dir") + _FOREIGN_KEYS


class ConfigError(ValueError):
    """An invalid setting; the message names the file and the key."""


@dataclass(frozen=True)
class Layer:
    """One source of rule selection (the pyproject.toml, then the command
    line): `select` replaces what came before, the others adjust it."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def decide(self, code: str, current: bool) -> bool:
        hits: list[tuple[int, bool]] = []
        if self.select is not None:
            current = False
            hits += [(specificity(s), True) for s in self.select if _hit(code, s)]
        hits += [(specificity(s), True) for s in self.extend_select if _hit(code, s)]
        # On a tie, ignore wins (`--select PAL103 --ignore PAL103` is off).
        hits += [(specificity(s), False) for s in self.ignore if _hit(code, s)]
        if not hits:
            return current
        best = max(h[0] for h in hits)
        return all(on for spec, on in hits if spec == best)


def _hit(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


@dataclass(frozen=True)
class ProjectConfig:
    # The file's rule selection (select None: not set, every rule)...
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    overrides: tuple[Layer, ...] = ()  # ...then the command line's
    include: tuple[str, ...] = DEFAULT_INCLUDE
    extend_include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    output_format: str | None = None
    cache_dir: str | None = None  # as written; relative to `root`
    severity: dict = field(default_factory=dict)  # code prefix -> level
    source: Path | None = None  # the pyproject.toml
    root: Path | None = None  # globs are relative to it; None: the current folder
    warnings: tuple[str, ...] = ()  # lenient loading: what was dropped, and why

    # ------------------------------------------------------------ rules

    def enabled(self, code: str, path: str | os.PathLike | None = None) -> bool:
        on = True  # every rule, unless a layer selects otherwise
        for layer in (Layer(self.select, self.extend_select, self.ignore),) + self.overrides:
            on = layer.decide(code, on)
        if on and path is not None and self.per_file_ignores:
            on = not any(_hit(code, s) for s in self.ignored_here(path))
        return on

    def ignored_here(self, path: str | os.PathLike) -> tuple[str, ...]:
        out: list[str] = []
        for pattern, codes in self.per_file_ignores:
            if PatternSet([pattern], str(self.base)).match_or_parents(os.fspath(path)):
                out.extend(codes)
        return tuple(out)

    def level(self, code: str) -> str | None:
        """The configured severity: the longest matching prefix wins."""
        best = None
        for prefix, level in self.severity.items():
            if _hit(code, prefix) and (best is None or specificity(prefix) > specificity(best[0])):
                best = (prefix, level)
        return best[1] if best else None

    def filter(self, findings: list[Finding], path: str | os.PathLike | None = None
               ) -> list[Finding]:
        out = []
        for f in findings:
            if not self.enabled(f.code, path):
                continue
            sev = self.level(f.code)
            if sev in ("error", "warning", "info"):
                f = replace(f, severity=Severity(sev))
            out.append(f)
        return out

    def merged(self, *, select=None, ignore=None, extend_select=None) -> ProjectConfig:
        """The command line as one more layer on top of the file's."""
        if select is None and not ignore and not extend_select:
            return self
        layer = Layer(select=tuple(select) if select is not None else None,
                      extend_select=tuple(extend_select or ()), ignore=tuple(ignore or ()))
        return replace(self, overrides=self.overrides + (layer,))

    # ------------------------------------------------------------ files

    @property
    def base(self) -> Path:
        return self.root if self.root is not None else Path.cwd()

    def _excludes(self) -> PatternSet:
        cached = self.__dict__.get("_exclude_set")
        if cached is None:
            cached = PatternSet(self.exclude + self.extend_exclude, str(self.base))
            object.__setattr__(self, "_exclude_set", cached)
        return cached

    def included(self, name: str, path: str) -> bool:
        """For a walk: does `include` take this file (`name` is its base name)?"""
        if self.include is DEFAULT_INCLUDE and not self.extend_include:
            return name.endswith(_DEFAULT_SUFFIXES)  # no pattern to match: the usual case
        cached = self.__dict__.get("_include_set")
        if cached is None:
            cached = PatternSet(self.include + self.extend_include, str(self.base))
            object.__setattr__(self, "_include_set", cached)
        return cached.match(path, False) is not None

    def excluded_entry(self, path: str, is_dir: bool) -> str | None:
        """For a walk: the `exclude` pattern matching this file or folder itself."""
        hit = self._excludes().match(path, is_dir)
        return hit.text if hit is not None else None

    def excluded_path(self, path: str | os.PathLike, is_dir: bool = False) -> str | None:
        """For a path not found by a walk: it, or a folder above it, is excluded."""
        hit = self._excludes().match_or_parents(os.fspath(path), is_dir)
        return hit.text if hit is not None else None

    def is_excluded(self, path: str | os.PathLike) -> bool:
        return self.excluded_path(path) is not None


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for d in [start] + list(start.parents) if os.path.isdir(start) else list(start.parents):
        candidate = d / "pyproject.toml"
        if os.path.isfile(candidate):  # False, not an error, behind a folder we may not enter
            return candidate
    return None


def load_project_config(start: Path, *, strict: bool = False) -> ProjectConfig:
    """Read `[tool.pallas-lsp]` from the pyproject.toml nearest to `start`.
    A file that is not TOML raises ConfigError. With `strict`, so does every
    unknown key, code or invalid value; otherwise they are dropped and listed
    in `warnings`."""
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    import tomllib  # only where a pyproject.toml is read (3 ms of start-up)

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    section = data.get("tool", {}).get("pallas-lsp")
    if section is None:
        return ProjectConfig(source=path, root=path.parent)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.pallas-lsp] must be a table")
    return from_mapping(section, where=str(path), strict=strict, root=path.parent)


def from_mapping(section: dict, where: str = "settings", *, strict: bool = True,
                 root: Path | None = None) -> ProjectConfig:
    problems: list[str] = []

    def bad(message: str) -> None:
        if strict:
            raise ConfigError(f"{where}: {message}")
        problems.append(f"{where}: {message}")

    for key in section:
        if key not in KNOWN_KEYS:
            import difflib  # only for a typo: every `check` starts here
            close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else \
                f" (known: {', '.join(k for k in KNOWN_KEYS if k not in _FOREIGN_KEYS)})"
            bad(f"unknown key `{key}` in [tool.pallas-lsp]{hint}")

    def strings(key: str) -> tuple[str, ...] | None:
        if key not in section:
            return None
        value = section[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            bad(f"`{key}` must be a list of strings, e.g. [\"PAL1\"]")
            return None
        return tuple(value)

    def selectors(key: str, values) -> tuple[str, ...]:
        out = []
        for v in values:
            try:
                out.append(normalise_selector(v, f"`{key}`"))
            except SelectorError as exc:
                bad(str(exc))
        return tuple(out)

    def codes(key: str) -> tuple[str, ...] | None:
        values = strings(key)
        return None if values is None else selectors(key, values)

    select = codes("select")
    extend_select = codes("extend-select") or ()
    ignore = (codes("ignore") or ()) + (codes("extend-ignore") or ())

    per_file: list[tuple[str, tuple[str, ...]]] = []
    for key in ("per-file-ignores", "extend-per-file-ignores"):
        table = section.get(key, {})
        if not isinstance(table, dict):
            bad(f"`{key}` must be a table of \"glob\" = [\"CODE\", ...]")
            continue
        for pattern, values in table.items():
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                bad(f"`{key}.\"{pattern}\"` must be a list of codes")
                continue
            per_file.append((pattern, selectors(f"{key}.\"{pattern}\"", values)))

    sev = section.get("severity", {})
    severity: dict[str, str] = {}
    if not isinstance(sev, dict):
        bad("`severity` must be a table of CODE = \"error|warning|info|hint\"")
        sev = {}
    for code, level in sev.items():
        if level not in SEVERITIES:
            bad(f"severity of {code} must be one of {', '.join(SEVERITIES)}")
            continue
        try:
            severity[normalise_selector(code, "`severity`")] = level
        except SelectorError as exc:
            bad(str(exc))

    flags = {}
    for key in ("respect-gitignore", "force-exclude"):
        if key in section:
            if isinstance(section[key], bool):
                flags[key] = section[key]
            else:
                bad(f"`{key}` must be true or false")
    output_format = section.get("output-format")
    if output_format is not None and output_format not in OUTPUT_FORMATS:
        bad(f"`output-format` must be one of {', '.join(OUTPUT_FORMATS)}")
        output_format = None

    cache_dir = section.get("cache-dir")
    if cache_dir is not None and (not isinstance(cache_dir, str) or not cache_dir.strip()):
        bad("`cache-dir` must be a folder's path (a string)")
        cache_dir = None

    exclude = strings("exclude")
    include = strings("include")
    return ProjectConfig(
        include=include if include is not None else DEFAULT_INCLUDE,
        extend_include=strings("extend-include") or (),
        select=select, extend_select=extend_select, ignore=ignore,
        exclude=exclude if exclude is not None else DEFAULT_EXCLUDE,
        extend_exclude=strings("extend-exclude") or (),
        per_file_ignores=tuple(per_file),
        respect_gitignore=flags.get("respect-gitignore", True),
        force_exclude=flags.get("force-exclude", False),
        output_format=output_format,
        cache_dir=cache_dir,
        severity=severity,
        source=Path(where) if where != "settings" else None,
        root=root,
        warnings=tuple(problems))
