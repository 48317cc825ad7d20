"""Which findings to show, and at which level: `[tool.pallas-lsp]` in the
nearest pyproject.toml first, then the editor settings on top (a finding is
shown only when both allow it; an editor severity overrides the project's)."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pallas_lsp.engine.model import Finding
from pallas_lsp.lsp.settings import Settings

log = logging.getLogger(__name__)

try:
    from pallas_lsp.check.config import load_project_config
except ImportError:  # pragma: no cover - while pallas_lsp.check.config is being written
    load_project_config = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Selected:
    finding: Finding
    level: str  # "error" | "warning" | "info" | "hint"


class ProjectConfigs:
    """Caches load_project_config per directory for a few seconds (and until
    invalidate() is called, e.g. when a pyproject.toml is saved)."""

    TTL = 5.0

    def __init__(self, on_error=None) -> None:
        self._cache: dict[str, tuple[float, object]] = {}
        self._lock = threading.Lock()
        self.on_error = on_error  # called with a message when a pyproject.toml is invalid

    def invalidate(self) -> None:
        with self._lock:
            self._cache.clear()

    def for_path(self, path: str | None):
        if load_project_config is None or not path:
            return None
        directory = str(Path(path).parent)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(directory)
            if hit and now - hit[0] < self.TTL:
                return hit[1]
        try:
            config = load_project_config(Path(directory))
        except Exception as exc:  # a broken pyproject.toml must not break diagnostics
            log.warning("ignoring the project configuration for %s: %s", path, exc)
            if self.on_error is not None:
                self.on_error(f"[tool.pallas-lsp] ignored: {exc}")
            config = None
        for warning in getattr(config, "warnings", ()):  # read leniently: the rest applies
            if self.on_error is not None:
                self.on_error(f"[tool.pallas-lsp]: {warning}")
        with self._lock:
            self._cache[directory] = (now, config)
        return config


def select(findings: list[Finding], settings: Settings, project=None,
           path: str | None = None) -> list[Selected]:
    if not settings.diagnostics_enable:
        return []
    project_levels: dict[str, str] = {}
    if project is not None and settings.use_pyproject:
        if path and project.is_excluded(path):
            return []  # the same globs as `pallas-lsp check`
        try:
            findings = list(project.filter(findings, path))
            project_levels = dict(getattr(project, "severity", None) or {})
        except Exception:
            log.exception("project configuration filter failed")
    out = []
    for f in findings:
        if not settings.rule_enabled(f.code):
            continue
        level = settings.severity_for(f.code) or _project_level(project_levels, f.code)
        if level is None:
            level = getattr(f.severity, "value", str(f.severity))
        out.append(Selected(f, level))
    return out


def _project_level(levels: dict[str, str], code: str) -> str | None:
    best = None
    for prefix, level in levels.items():
        if isinstance(prefix, str) and code.startswith(prefix):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, level)
    if best and isinstance(best[1], str):
        return best[1].lower()
    return None
