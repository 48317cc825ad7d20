"""The import contracts of pyproject.toml's [tool.importlinter] hold (one test
per contract): layers (cli > lsp > runs > check > catalog > engine), the
engine and the catalog import nothing above them, the child-side run modules
import only each other, and there are no import cycles."""
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = [c["id"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())
             ["tool"]["importlinter"]["contracts"]]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


@pytest.mark.parametrize("contract", CONTRACTS)
def test_import_contract_is_kept(contract):
    pytest.importorskip("importlinter")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"))
    res = subprocess.run([sys.executable, "-c", LINT, "--no-cache", "--no-logo",
                          "--contract", contract], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
