"""Shared by the compile tests: where the fixtures are and what they expect."""
from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPT = FIXTURES / "run_all.py"
GENS = ("v5e", "v6e")


def expected(marker: str = "# expect ") -> dict[tuple[str, int], str]:
    """(file name, 1-based line) -> code, from the `# expect PALnnn` comments
    (what the engine and the compiler both report)."""
    out = {}
    for path in sorted(FIXTURES.glob("pal4*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if marker + "PAL" in line:
                out[(path.name, i + 1)] = line.split(marker)[1].split()[0]
    return out


def compile_expected() -> dict[tuple[str, int], str]:
    """What a compile run reports: the `# expect` lines and the `# compile
    PALnnn` ones (compiler messages the engine cannot see from the source)."""
    return {**expected(), **expected("# compile ")}
