"""Project configuration: `[tool.pallas-lsp]` in the nearest pyproject.toml.

    [tool.pallas-lsp]
    select = ["PAL1", "PAL2"]      # code prefixes to report (default: all)
    ignore = ["PAL111"]            # code prefixes to drop
    exclude = ["build/", "third_party/"]   # path fragments `check` skips
    [tool.pallas-lsp.severity]
    PAL204 = "warning"             # error | warning | info | hint
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from pallas_lsp.engine.model import Finding, Severity

SEVERITIES = ("error", "warning", "info", "hint")


class ConfigError(ValueError):
    """An invalid setting; the message names the file and the key."""


@dataclass(frozen=True)
class ProjectConfig:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    severity: dict = field(default_factory=dict)
    source: Path | None = None

    def enabled(self, code: str) -> bool:
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        return not any(code.startswith(p) for p in self.ignore)

    def filter(self, findings: list[Finding]) -> list[Finding]:
        out = []
        for f in findings:
            if not self.enabled(f.code):
                continue
            sev = self.severity.get(f.code)
            if sev in ("error", "warning", "info"):
                f = replace(f, severity=Severity(sev))
            out.append(f)
        return out

    def merged(self, *, select=None, ignore=None) -> ProjectConfig:
        """Command-line options override select and extend ignore."""
        return replace(self, select=tuple(select) if select else self.select,
                       ignore=self.ignore + tuple(ignore or ()))


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for d in [start] + list(start.parents) if start.is_dir() else list(start.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_project_config(start: Path) -> ProjectConfig:
    """Read `[tool.pallas-lsp]` from the pyproject.toml nearest to `start`.
    Raises ConfigError for a broken file or an invalid value."""
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    section = data.get("tool", {}).get("pallas-lsp")
    if section is None:
        return ProjectConfig(source=path)
    return from_mapping(section, where=str(path))


def from_mapping(section: dict, where: str = "settings") -> ProjectConfig:
    def codes(key: str) -> tuple[str, ...]:
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: `{key}` must be a list of code prefixes, e.g. [\"PAL1\"]")
        return tuple(v.strip().upper() for v in value)

    sev = section.get("severity", {})
    if not isinstance(sev, dict):
        raise ConfigError(f"{where}: `severity` must be a table of CODE = \"error|warning|info|hint\"")
    for code, level in sev.items():
        if level not in SEVERITIES:
            raise ConfigError(f"{where}: severity of {code} must be one of {', '.join(SEVERITIES)}")
    exclude = section.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(v, str) for v in exclude):
        raise ConfigError(f"{where}: `exclude` must be a list of path fragments")
    return ProjectConfig(select=codes("select"), ignore=codes("ignore"), exclude=tuple(exclude),
                         severity={k.upper(): v for k, v in sev.items()},
                         source=Path(where) if where != "settings" else None)
