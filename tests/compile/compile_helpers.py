"""Shared by the compile tests: where the fixtures are and what they expect."""
from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPT = FIXTURES / "run_all.py"
GENS = ("v5e", "v6e")


def expected() -> dict[tuple[str, int], str]:
    """(file name, 1-based line) -> code, from the `# expect PALnnn` comments."""
    out = {}
    for path in sorted(FIXTURES.glob("pal4*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if "# expect PAL" in line:
                out[(path.name, i + 1)] = line.split("# expect ")[1].split()[0]
    return out
