"""Repository profiles the user allowed for good ("Always allow" in the
editor), kept in the user's own config folder, never in the repository:

    $XDG_CONFIG_HOME/pallas-lsp/allowed-profiles.json   (~/.config/... by default)

Each entry is the fingerprint of one pyproject.toml path, profile name and
exact content (profiles.fingerprint): a changed profile is asked about again.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path


def store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "pallas-lsp" / "allowed-profiles.json"


def _entries() -> list[dict]:
    try:
        data = json.loads(store_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def allowed() -> frozenset[str]:
    return frozenset(e["fingerprint"] for e in _entries() if isinstance(e.get("fingerprint"), str))


def remember(fingerprint: str, name: str, source: str) -> None:
    entries = [e for e in _entries() if e.get("fingerprint") != fingerprint]
    entries.append({"fingerprint": fingerprint, "profile": name, "source": source,
                    "allowed": time.strftime("%Y-%m-%dT%H:%M:%S")})
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=2), encoding="utf-8")
    os.replace(tmp, path)
