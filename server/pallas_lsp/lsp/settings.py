"""Editor settings: model, defaults and validation.

Settings arrive as JSON from `initializationOptions`,
`workspace/didChangeConfiguration` and `workspace/configuration` (section
"pallas-lsp"). Each key may be nested (`{"inlayHints": {"enable": false}}`) or
dotted (`{"inlayHints.enable": false}`). An invalid value is reported as a
warning and replaced by its default; parsing never raises.
docs/configuration.md documents every option.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

SECTION = "pallas-lsp"

SEVERITIES = ("error", "warning", "info", "hint")
_CODE_PREFIX = re.compile(r"^[A-Z]+[0-9]*$")


class FrozenDict(dict):
    """A read-only, hashable dict (for object-valued settings such as
    runs.profiles: Settings is frozen and compared with ==)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))

    def _readonly(self, *args, **kwargs):
        raise TypeError("settings are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]


@dataclass(frozen=True)
class Settings:
    # rules
    select: tuple[str, ...] | None = None  # None: every rule
    ignore: tuple[str, ...] = ()
    severity: tuple[tuple[str, str], ...] = ()  # (code prefix, level)
    use_pyproject: bool = True
    # diagnostics
    diagnostics_enable: bool = True
    debounce_ms: int = 150
    code_description_url: str | None = None  # e.g. "https://host/rules/{code}"
    # inlay hints
    inlay_enable: bool = True
    inlay_parameters: bool = True
    inlay_assignments: bool = False
    # semantic tokens (Refs, Arrays, semaphores, descriptors inside kernels)
    semantic_tokens_enable: bool = True
    # hover
    hover_enable: bool = True
    hover_jedi: bool = True
    jedi_timeout_ms: int = 2000
    # python
    python_interpreter: str | None = None
    # runs (pallas-lsp run from the editor; docs/runs.md)
    runs_enable: bool = True
    runs_timeout_s: float = 300
    runs_devices: int | None = None
    runs_profile: str = "local"
    runs_profiles: FrozenDict = FrozenDict()  # name -> profile object
    runs_code_lens: bool = True
    runs_run_on_save: bool = False
    runs_compile_generations: tuple = ("v5e", "v6e")  # = runs.compile_mapping.DEFAULT_GENERATIONS
    runs_compile_by_default: bool = True  # interpret runs also compile (where libtpu is)
    runs_allowed_roots: tuple[str, ...] = ()  # folders outside the workspace runs may use

    def rule_enabled(self, code: str) -> bool:
        if self.select is not None and not any(code.startswith(p) for p in self.select):
            return False
        return not any(code.startswith(p) for p in self.ignore)

    def severity_for(self, code: str) -> str | None:
        """The configured level for `code` (longest matching prefix), if any."""
        best: tuple[int, str] | None = None
        for prefix, level in self.severity:
            if code.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level)
        return best[1] if best else None


DEFAULT = Settings()


# ------------------------------------------------------------------ parsing


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("expected true or false")


def _int_range(lo: int, hi: int):
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected an integer between {lo} and {hi}")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"expected an integer between {lo} and {hi}")
        value = int(value)
        if not lo <= value <= hi:
            raise ValueError(f"expected an integer between {lo} and {hi}")
        return value

    return check


def _codes(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError('expected a list of rule codes or prefixes, e.g. ["PAL1", "PAL203"]')
    out = []
    for item in value:
        if not isinstance(item, str) or not _CODE_PREFIX.match(item.strip().upper()):
            raise ValueError(f"{item!r} is not a rule code or prefix (e.g. \"PAL103\", \"PAL1\")")
        out.append(item.strip().upper())
    return tuple(out)


def _codes_or_all(value: Any) -> tuple[str, ...] | None:
    if value is None or value == "ALL" or value == ["ALL"]:
        return None
    return _codes(value)


def _severity(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ValueError('expected an object such as {"PAL103": "warning"}')
    out = []
    for code, level in value.items():
        if not isinstance(code, str) or not _CODE_PREFIX.match(code.strip().upper()):
            raise ValueError(f"{code!r} is not a rule code or prefix")
        if not isinstance(level, str) or level.lower() not in SEVERITIES + ("information",):
            raise ValueError(f"severity of {code} must be one of {', '.join(SEVERITIES)}")
        level = level.lower()
        out.append((code.strip().upper(), "info" if level == "information" else level))
    return tuple(out)


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _interpreter(value: Any) -> str | None:
    value = _opt_str(value)
    if value is None:
        return None
    path = os.path.expanduser(os.path.expandvars(value))
    found = path if os.path.isfile(path) else shutil.which(path)
    if not found or not os.access(found, os.X_OK):
        raise ValueError("no such Python interpreter")
    return found


def _url_template(value: Any) -> str | None:
    value = _opt_str(value)
    if value is not None and "{code}" not in value:
        raise ValueError('expected a URL containing "{code}"')
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= 86_400:
        raise ValueError("expected a number of seconds between 0 and 86400")
    return int(value) if float(value).is_integer() else float(value)


def _opt_devices(value: Any) -> int | None:
    if value is None:
        return None
    return _int_range(1, 4096)(value)


def _profile_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected the name of a profile, e.g. \"local\"")
    return value.strip()


def _profiles(value: Any) -> FrozenDict:
    if value is None:
        return FrozenDict()
    if not isinstance(value, dict):
        raise ValueError('expected an object such as {"box": {"kind": "ssh", "host": "..."}}')
    from pallas_lsp.runs.profiles import ProfileError, validate_profile

    for name, data in value.items():
        try:
            validate_profile(name, data)
        except ProfileError as exc:
            raise ValueError(str(exc)) from None
    return FrozenDict(value)


def _generations(value: Any) -> tuple:
    from pallas_lsp.runs.compile_mapping import check_generations
    from pallas_lsp.runs.target import RunSpecError

    if not isinstance(value, list) or not value:
        raise ValueError('expected a list of TPU generations, e.g. ["v5e", "v6e"]')
    try:
        check_generations(value)
    except RunSpecError as exc:
        raise ValueError(str(exc)) from None
    return tuple(value)


def _folders(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip()
                                                        for v in value):
        raise ValueError('expected a list of folders, e.g. ["~/shared/kernels"]')
    return tuple(os.path.expandvars(os.path.expanduser(v.strip())) for v in value)


# setting key (as the client spells it) -> (Settings field, validator)
OPTIONS: dict[str, tuple[str, Any]] = {
    "rules.select": ("select", _codes_or_all),
    "rules.ignore": ("ignore", _codes),
    "rules.severity": ("severity", _severity),
    "rules.usePyproject": ("use_pyproject", _bool),
    "diagnostics.enable": ("diagnostics_enable", _bool),
    "diagnostics.debounceMs": ("debounce_ms", _int_range(0, 10_000)),
    "diagnostics.codeDescriptionUrl": ("code_description_url", _url_template),
    "inlayHints.enable": ("inlay_enable", _bool),
    "inlayHints.parameters": ("inlay_parameters", _bool),
    "inlayHints.assignments": ("inlay_assignments", _bool),
    "semanticTokens.enable": ("semantic_tokens_enable", _bool),
    "hover.enable": ("hover_enable", _bool),
    "hover.jedi": ("hover_jedi", _bool),
    "hover.jediTimeoutMs": ("jedi_timeout_ms", _int_range(0, 60_000)),
    "python.interpreter": ("python_interpreter", _interpreter),
    "runs.enable": ("runs_enable", _bool),
    "runs.timeoutS": ("runs_timeout_s", _seconds),
    "runs.devices": ("runs_devices", _opt_devices),
    "runs.profile": ("runs_profile", _profile_name),
    "runs.profiles": ("runs_profiles", _profiles),
    "runs.codeLens": ("runs_code_lens", _bool),
    "runs.runOnSave": ("runs_run_on_save", _bool),
    "runs.compileGenerations": ("runs_compile_generations", _generations),
    "runs.compileByDefault": ("runs_compile_by_default", _bool),
    "runs.allowedRoots": ("runs_allowed_roots", _folders),
}

_GROUPS = {key.split(".", 1)[0] for key in OPTIONS}


def flatten(raw: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c.d": 2} -> {"a.b": 1, "c.d": 2}. Stops at known
    option keys so that object-valued options (rules.severity) stay whole."""
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        full = f"{prefix}{key}"
        if full not in OPTIONS and isinstance(value, dict) and (prefix or key in _GROUPS):
            out.update(flatten(value, full + "."))
        else:
            out[full] = value
    return out


def unwrap(raw: Any) -> Any:
    """Accept both the bare settings object and one wrapped in its section
    name ({"pallas-lsp": {...}}), as clients send either."""
    if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
        return raw[SECTION]
    return raw


def parse(*layers: Any) -> tuple[Settings, list[str]]:
    """Build Settings from layers of raw JSON (later layers win). Returns the
    settings and a list of human-readable warnings (one per bad key)."""
    values: dict[str, Any] = {}
    warnings: list[str] = []
    for raw in layers:
        raw = unwrap(raw)
        if raw is None:
            continue
        if not isinstance(raw, dict):
            warnings.append(f"{SECTION} settings must be an object, got {type(raw).__name__}")
            continue
        values.update(flatten(raw))
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in OPTIONS:
            warnings.append(f"unknown setting {SECTION}.{key} (ignored)")
            continue
        attr, check = OPTIONS[key]
        try:
            kwargs[attr] = check(value)
        except (ValueError, TypeError) as exc:
            default = getattr(DEFAULT, attr)
            warnings.append(f"invalid setting {SECTION}.{key} = {value!r}: {exc}; "
                            f"using the default ({_show(default)})")
    return dataclasses.replace(DEFAULT, **kwargs), warnings


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


__all__ = ["Settings", "DEFAULT", "SECTION", "OPTIONS", "parse", "unwrap", "flatten"]
