"""Rule selection and file selection as CI relies on them: typos are errors
(exit 2), globs are relative to the project root whatever way a path is
typed, .gitignore is respected, per-file-ignores and --force-exclude."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUGGY = (REPO / "tests" / "lsp" / "kernels" / "dma_bugs.py").read_text(encoding="utf-8")  # PAL101, PAL103


def cli(*args: str, cwd: Path):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def found(result, cwd: Path) -> list[tuple[str, str]]:
    """(absolute path, code) of each JSON row."""
    assert result.returncode in (0, 1), result.stderr
    return sorted((os.path.normpath(cwd / r["path"]), r["code"])
                  for r in json.loads(result.stdout))


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("args, needle", [
    (["--select", "FOO"], "unknown rule code or prefix 'FOO'"),
    (["--select", "PAL999"], "unknown rule code or prefix 'PAL999'"),
    (["--ignore", "PAL1O3"], "did you mean PAL103?"),
    (["--extend-select", "PAL1,PAL7"], "'PAL7'"),
    (["--ignore", "E999"], "always reported"),
])
def test_unknown_codes_are_usage_errors(tmp_path, args, needle):
    (tmp_path / "k.py").write_text(BUGGY)
    r = cli("--no-config", *args, ".", cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and r.stdout == ""


def test_all_extend_select_and_specificity(tmp_path):
    (tmp_path / "k.py").write_text(BUGGY)
    every = found(cli("--no-config", "--output-format", "json", ".", cwd=tmp_path), tmp_path)
    assert [c for _, c in every] == ["PAL101", "PAL103"]
    assert found(cli("--no-config", "--select", "ALL", "--output-format", "json", ".",
                     cwd=tmp_path), tmp_path) == every
    # The more specific selector wins, as in ruff.
    assert [c for _, c in found(cli("--no-config", "--select", "PAL103", "--ignore", "PAL1",
                                    "--output-format", "json", ".", cwd=tmp_path), tmp_path)
            ] == ["PAL103"]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pallas-lsp]\nselect = ["PAL2"]\nextend-select = ["pal101"]\n'
        'extend-ignore = ["PAL3"]\n[tool.pallas-lsp.severity]\nPAL1 = "warning"\n')
    rows = json.loads(cli("--output-format", "json", ".", cwd=tmp_path).stdout)
    assert [(r["code"], r["severity"]) for r in rows] == [("PAL101", "warning")]
    # The command line is a layer on top: --extend-select adds to the file's selection.
    rows = json.loads(cli("--extend-select", "PAL103", "--output-format", "json", ".",
                          cwd=tmp_path).stdout)
    assert [r["code"] for r in rows] == ["PAL101", "PAL103"]


@pytest.mark.parametrize("toml, needle", [
    ('ignroe = ["PAL1"]', "unknown key `ignroe` in [tool.pallas-lsp]; did you mean `ignore`?"),
    ('select = ["PAL1O1"]', "did you mean PAL101?"),
    ('exclude = "build"', "`exclude` must be a list of strings"),
    ('[tool.pallas-lsp.per-file-ignores]\n"tests/*" = ["FOO"]', "'FOO'"),
    ('respect-gitignore = "yes"', "`respect-gitignore` must be true or false"),
])
def test_invalid_configuration_is_a_usage_error(tmp_path, toml, needle):
    (tmp_path / "k.py").write_text(BUGGY)
    (tmp_path / "pyproject.toml").write_text(f"[tool.pallas-lsp]\n{toml}\n")
    r = cli(".", cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert str(tmp_path / "pyproject.toml") in r.stderr


def test_the_server_reads_the_same_table_leniently(tmp_path):
    """The language server keeps going: a warning per problem, the rest applies."""
    from pallas_lsp.check.config import load_project_config
    from pallas_lsp.lsp.selection import ProjectConfigs

    (tmp_path / "pyproject.toml").write_text(
        '[tool.pallas-lsp]\nignroe = ["PAL1"]\nignore = ["PAL103", "PAL1O1"]\n')
    cfg = load_project_config(tmp_path)
    assert cfg.ignore == ("PAL103",) and not cfg.enabled("PAL103") and cfg.enabled("PAL101")
    assert len(cfg.warnings) == 2
    shown: list[str] = []
    assert ProjectConfigs(on_error=shown.append).for_path(str(tmp_path / "k.py")) is not None
    assert any("did you mean `ignore`" in s for s in shown)


PROJECT = {
    "pyproject.toml": ('[project]\nname = "p"\n[tool.pallas-lsp]\n'
                       'extend-exclude = ["mine", "gen/*.py", "/top_only.py"]\n'
                       '[tool.pallas-lsp.per-file-ignores]\n"tests/" = ["PAL103"]\n'
                       '"*_quiet.py" = ["PAL1"]\n'),
    "mine.py": BUGGY,  # not excluded: `mine` names a file or folder `mine`, not `mine.py`
    "mine/k.py": BUGGY,  # excluded
    "gen/a.py": BUGGY,  # excluded: anchored at the root
    "sub/gen/a.py": BUGGY,  # not excluded
    "top_only.py": BUGGY,  # excluded
    "sub/top_only.py": BUGGY,  # not excluded
    ".venv/lib/k.py": BUGGY,  # excluded by default
    "tests/t.py": BUGGY,  # PAL103 ignored here
    "sub/k_quiet.py": BUGGY,  # everything PAL1 ignored here
}


def test_globs_are_relative_to_the_project_root_however_the_path_is_typed(tmp_path):
    root = tmp_path / "proj"
    write(root, PROJECT)
    inside = found(cli("--output-format", "json", ".", cwd=root), root)
    expected = sorted((str(root / name), code) for name in ("mine.py", "sub/gen/a.py",
                                                            "sub/top_only.py")
                      for code in ("PAL101", "PAL103")) + [(str(root / "tests/t.py"), "PAL101")]
    assert inside == sorted(expected)
    assert found(cli("--output-format", "json", str(root), cwd=tmp_path), tmp_path) == inside
    assert found(cli("--output-format", "json", "proj", cwd=tmp_path), tmp_path) == inside
    assert found(cli("--output-format", "json", str(root), cwd=root / "sub"), root / "sub") == inside
    # The same text output by relative and absolute path, from inside the project.
    assert cli(".", cwd=root).stdout == cli(str(root), cwd=root).stdout


def test_a_named_excluded_file_is_checked_unless_force_exclude(tmp_path):
    root = tmp_path / "proj"
    write(root, PROJECT)
    r = cli("--verbose", "--output-format", "json", "mine/k.py", cwd=root)
    assert [c for _, c in found(r, root)] == ["PAL101", "PAL103"]
    assert "checked although it matches `exclude` pattern 'mine'" in r.stderr
    assert "--force-exclude" in r.stderr
    r = cli("--force-exclude", "--verbose", "mine/k.py", "gen/a.py", "mine.py",
            "--output-format", "json", cwd=root)
    assert sorted({p for p, _ in found(r, root)}) == [str(root / "mine.py")]
    assert "mine/k.py: skipped: matches `exclude` pattern 'mine'" in r.stderr
    assert "gen/a.py: skipped" in r.stderr
    # A walk says what it skipped too.
    assert ".venv: skipped: matches `exclude` pattern '.venv'" in cli("--verbose", ".",
                                                                     cwd=root).stderr


def test_gitignore_is_respected_in_a_git_work_tree(tmp_path):
    root = tmp_path / "repo"
    write(root, {"pyproject.toml": '[project]\nname = "r"\n', "kept.py": BUGGY,
                 "out/k.py": BUGGY, "sub/x.skip.py": BUGGY, "sub/keep.skip.py": BUGGY,
                 "sub/.gitignore": "!keep.skip.py\n", ".gitignore": "out/\n*.skip.py\n"})
    checked = {os.path.relpath(p, root) for p, _ in
               found(cli("--output-format", "json", ".", cwd=root), root)}
    assert checked == {"kept.py", "out/k.py", "sub/x.skip.py", "sub/keep.skip.py"}  # no .git
    (root / ".git").mkdir()
    r = cli("--output-format", "json", "--verbose", ".", cwd=root)
    assert {os.path.relpath(p, root) for p, _ in found(r, root)} == {"kept.py",
                                                                     "sub/keep.skip.py"}
    assert "ignored by .gitignore ('out/')" in r.stderr
    r = cli("--output-format", "json", "--no-respect-gitignore", ".", cwd=root)
    assert {os.path.relpath(p, root) for p, _ in found(r, root)} == checked
    (root / "pyproject.toml").write_text('[project]\nname = "r"\n[tool.pallas-lsp]\n'
                                         'respect-gitignore = false\n')
    assert {os.path.relpath(p, root) for p, _ in
            found(cli("--output-format", "json", ".", cwd=root), root)} == checked
