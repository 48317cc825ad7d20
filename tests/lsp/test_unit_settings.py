"""Unit tests: settings parsing and validation."""
from __future__ import annotations

import sys

from pallas_lsp.lsp import settings as S


def test_defaults():
    s, warnings = S.parse(None)
    assert s == S.DEFAULT and warnings == []
    assert s.debounce_ms == 150 and s.inlay_parameters and not s.inlay_assignments
    assert s.rule_enabled("PAL101")


def test_nested_dotted_and_wrapped_forms_agree():
    a, _ = S.parse({"rules": {"ignore": ["pal1"]}, "diagnostics": {"debounceMs": 0}})
    b, _ = S.parse({"rules.ignore": ["PAL1"], "diagnostics.debounceMs": 0})
    c, _ = S.parse({"pallas-lsp": {"rules": {"ignore": ["PAL1"]}, "diagnostics.debounceMs": 0}})
    assert a == b == c
    assert not a.rule_enabled("PAL103") and a.rule_enabled("PAL201")


def test_later_layers_win():
    s, _ = S.parse({"inlayHints": {"enable": False}}, {"inlayHints": {"enable": True}})
    assert s.inlay_enable


def test_select_and_severity_prefixes():
    s, warnings = S.parse({"rules": {"select": ["PAL1", "PAL203"],
                                     "severity": {"PAL1": "warning", "PAL103": "Hint"}}})
    assert not warnings
    assert s.rule_enabled("PAL110") and s.rule_enabled("PAL203") and not s.rule_enabled("PAL201")
    assert s.severity_for("PAL103") == "hint"  # longest prefix wins
    assert s.severity_for("PAL101") == "warning"
    assert s.severity_for("PAL201") is None


def test_invalid_values_warn_and_keep_defaults():
    s, warnings = S.parse({
        "rules": {"select": 3, "ignore": ["not a code"], "severity": {"PAL101": "loud"}},
        "diagnostics": {"debounceMs": -5, "enable": "yes", "codeDescriptionUrl": "https://x/no-placeholder"},
        "inlayHints": {"parameters": None},
        "hover": {"jediTimeoutMs": 1.5},
        "python": {"interpreter": "/definitely/not/python"},
        "mystery": True,
    })
    assert s == S.DEFAULT
    assert len(warnings) == 10
    assert all("pallas-lsp." in w for w in warnings)


def test_not_an_object():
    s, warnings = S.parse(["PAL101"])
    assert s == S.DEFAULT and len(warnings) == 1


def test_interpreter_must_exist():
    s, warnings = S.parse({"python": {"interpreter": sys.executable}})
    assert s.python_interpreter == sys.executable and not warnings


def test_every_option_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for key in S.OPTIONS:
        assert f"| `{key}` |" in doc, f"{key} is missing from docs/configuration.md"
