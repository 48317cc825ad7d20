"""The wheel must carry every subpackage and the catalog."""
import tomllib
from pathlib import Path

from pallas_lsp import catalog
from pallas_lsp.engine.rules import CATALOG_ONLY, CODES

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT / "server").parts)
             for p in (ROOT / "server").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert "pallas_lsp.catalog_data" in listed


def test_every_rule_has_a_catalog_entry_and_every_entry_a_rule():
    entries = set(catalog.load())
    assert set(CODES) - entries == set()
    assert entries - set(CODES) - set(CATALOG_ONLY) == set()


def test_rule_messages_match_the_catalog():
    """Each rule's message starts with JAX's text as recorded in the catalog."""
    from pallas_lsp.engine.rules import RULES
    for rule in RULES:
        entry = catalog.get(rule.CODE)
        literal = entry.jax_message.split("{")[0]
        assert rule.MESSAGE.startswith(literal) or rule.MESSAGE.split("{")[0] == literal, rule.CODE
