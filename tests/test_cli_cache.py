"""The command line's result cache (check/cache.py) through real `check` and
`coverage` processes on temporary trees: what it gives is what an analysis
gives, and anything an analysis depended on makes it analyse again."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_misc import HELPERS as HELPER_BAD  # a DMA helper: PAL103 for a (2,) semaphore
from test_cli_notebooks import write_page  # a Markdown and an rst page with a kernel

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "pallas_lsp"]
FIXTURES = {  # every folder of files the suite gives the command line
    "examples": REPO / "examples",
    "oracle": REPO / "tests" / "oracle" / "fixtures",
    "beyond": REPO / "tests" / "beyond" / "fixtures",
    "notebooks": REPO / "tests" / "data" / "notebooks",
    "lsp_kernels": REPO / "tests" / "lsp" / "kernels",
}

HELPER_GOOD = HELPER_BAD.replace("copy(src, dst, sem)", "copy(src, dst, sem.at[0])")

KERNEL = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from {module} import fetch


def kernel(x_hbm, o_hbm, sems):
    fetch(x_hbm, o_hbm, sems)


def run(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])(x)
'''


def env(**extra: str) -> dict:
    e = {k: v for k, v in os.environ.items() if k != "PALLAS_LSP_CACHE_DIR"}
    e.update(extra)
    return e


def cli(*args: str, cwd: Path, prefix: tuple = (), code: str | None = None,
        **env_extra: str) -> subprocess.CompletedProcess:
    """`pallas-lsp ARGS`; with `code`, that Python first (in the same process)."""
    cmd = list(CLI) if code is None else [
        sys.executable, "-c", f"import sys\n{code}\nfrom pallas_lsp.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"]
    p = subprocess.run([*prefix, *cmd, *args], cwd=cwd, capture_output=True, text=True,
                       timeout=900, env=env(**env_extra))
    assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stderr
    return p


def check(tree: Path, cache: Path | None, *paths: str, **kw) -> tuple[list, int]:
    """(JSON rows, analyses reused from the cache) of `check -v` on `paths`."""
    where = ("--no-cache",) if cache is None else ("--cache-dir", str(cache))
    p = cli("check", "--verbose", "--output-format", "json", *where, *(paths or (".",)),
            cwd=tree, **kw)
    m = re.search(r"(\d+) analyses reused from the cache", p.stderr)
    assert (m is None) == (cache is None), p.stderr
    return json.loads(p.stdout), int(m.group(1)) if m else 0


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("check-v*/*.json"))


def project(tmp_path: Path, helper: str = HELPER_BAD) -> Path:
    tree = tmp_path / "proj"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tree / "pkg" / "__init__.py").write_text("")
    (tree / "pkg" / "helpers.py").write_text(helper)
    (tree / "k.py").write_text(KERNEL.format(module="pkg.helpers"))
    return tree


def codes(rows: list, name: str) -> list[tuple[int, str]]:
    return sorted((r["line"], r["code"]) for r in rows if Path(r["path"]).name == name)


# ---------------------------------------------------------------- same results


def test_results_are_the_same_with_and_without_the_cache_on_every_fixture(tmp_path):
    tree = tmp_path / "tree"
    for name, folder in FIXTURES.items():
        shutil.copytree(folder, tree / name)
    write_page(tree)
    (tree / "multi").mkdir()
    shutil.copytree(project(tmp_path), tree / "multi", dirs_exist_ok=True)
    cache = tmp_path / "cache"
    paths = (".", "docs/guide.md", "docs/guide.rst")

    plain, _ = check(tree, None, *paths)
    cold, reused_cold = check(tree, cache, *paths)
    warm, reused_warm = check(tree, cache, *paths)
    assert plain == cold == warm
    assert reused_cold == 0 and reused_warm == len(entries(cache)) > 150
    assert {Path(r["path"]).suffix for r in warm} >= {".py", ".ipynb", ".md"}
    assert any(r.get("cell") for r in warm)  # notebook rows, from the cached program

    # `coverage` (analyses of its own, with the sites): the same three ways
    def coverage(*where: str) -> str:
        return cli("coverage", "--output-format", "json", "--verbose", *where, ".",
                   cwd=tree).stdout

    plain = coverage("--no-cache")
    before = len(entries(cache))
    assert coverage("--cache-dir", str(cache)) == plain
    after = len(entries(cache))
    assert after > before  # coverage's own entries
    assert coverage("--cache-dir", str(cache)) == plain
    assert len(entries(cache)) == after
    assert json.loads(plain)["files"]


def test_the_fixes_come_the_same_from_the_cache(tmp_path):
    tree = tmp_path / "ex"
    shutil.copytree(FIXTURES["examples"], tree)
    cache = tmp_path / "cache"
    check(tree, cache)  # fills the cache
    args = ("check", "--unsafe-fixes", "--cache-dir", str(cache))
    diff = cli(*args, "--diff", ".", cwd=tree).stdout
    assert diff.startswith("---") and diff == cli("check", "--no-cache", "--unsafe-fixes",
                                                   "--diff", ".", cwd=tree).stdout
    cli(*args, "--fix", ".", cwd=tree)
    fixed = (tree / "double_buffer_bugs.py").read_text()
    assert "buf.at[slot]" in fixed
    rows, reused = check(tree, cache)
    assert reused == 1 and rows == check(tree, None)[0]


# ---------------------------------------------------------------- what invalidates


def test_an_edited_file_is_analysed_again(tmp_path):
    tree = project(tmp_path)
    cache = tmp_path / "cache"
    (tree / "other.py").write_text(KERNEL.format(module="pkg.helpers"))
    first, _ = check(tree, cache)
    assert (10, "PAL103") in codes(first, "other.py")
    (tree / "other.py").write_text(KERNEL.format(module="pkg.helpers").replace(
        "fetch(x_hbm, o_hbm, sems)", "pass"))
    rows, reused = check(tree, cache)
    assert codes(rows, "other.py") == [] and reused == 3  # not other.py
    assert rows == check(tree, None)[0]


def test_an_edited_helper_makes_its_importers_analysed_again(tmp_path):
    tree = project(tmp_path)
    cache = tmp_path / "cache"
    first, _ = check(tree, cache, "k.py")  # the helper itself is not checked
    assert (10, "PAL103") in codes(first, "k.py")  # "In a helper", at the call
    assert check(tree, cache, "k.py")[1] == 1
    (tree / "pkg" / "helpers.py").write_text(HELPER_GOOD)
    rows, reused = check(tree, cache, "k.py")
    assert reused == 0 and codes(rows, "k.py") == []
    assert rows == check(tree, None, "k.py")[0]
    # and back: the entry written for the good helper is not used for the bad one
    (tree / "pkg" / "helpers.py").write_text(HELPER_BAD)
    assert check(tree, cache, "k.py") == (first, 0)


def test_a_module_that_appears_where_an_import_resolves_invalidates(tmp_path):
    """k.py imports `helpers`, which does not exist at first (nothing to
    follow); the file appearing changes k.py's findings, not its text."""
    tree = tmp_path / "loose"
    tree.mkdir()
    (tree / "k.py").write_text(KERNEL.format(module="helpers"))
    cache = tmp_path / "cache"
    rows, _ = check(tree, cache, "k.py")
    assert codes(rows, "k.py") == []
    (tree / "helpers.py").write_text(HELPER_BAD)
    rows, reused = check(tree, cache, "k.py")
    assert reused == 0 and (10, "PAL103") in codes(rows, "k.py")
    # the module replaced by a package of the same name: followed instead
    (tree / "helpers.py").unlink()
    (tree / "helpers").mkdir()
    (tree / "helpers" / "__init__.py").write_text(HELPER_GOOD)
    rows, reused = check(tree, cache, "k.py")
    assert reused == 0 and codes(rows, "k.py") == [] == check(tree, None, "k.py")[0]


def test_configuration_changes_apply_to_cached_results(tmp_path):
    """The cache holds the engine's findings before the configuration acts:
    a new selection, per-file-ignores or severity needs no new analysis."""
    tree = project(tmp_path)
    cache = tmp_path / "cache"
    every, _ = check(tree, cache)
    assert [(Path(r["path"]).name, r["code"], r["severity"]) for r in every] == [
        ("k.py", "PAL103", "error"), ("helpers.py", "PAL103", "error")]
    for table, expected in (("severity = {PAL1 = 'warning'}", [("k.py", "warning"),
                                                               ("helpers.py", "warning")]),
                            ("per-file-ignores = {'pkg/*' = ['PAL103']}", [("k.py", "error")]),
                            ("ignore = ['PAL103']", [])):
        (tree / "pyproject.toml").write_text(f"[project]\nname = 'p'\n[tool.pallas-lsp]\n"
                                             f"{table}\n")
        rows, reused = check(tree, cache)
        assert reused == 3 and rows == check(tree, None)[0]
        assert [(Path(r["path"]).name, r["severity"]) for r in rows] == expected
    rows, reused = check(tree, cache, "--select", "PAL1", ".")  # replaces the file's `ignore`
    assert reused == 3 and rows == every


def test_a_new_version_or_engine_uses_entries_of_its_own(tmp_path):
    tree = project(tmp_path)
    cache = tmp_path / "cache"
    rows, _ = check(tree, cache)
    assert check(tree, cache)[1] == 3
    for patch in ("import pallas_lsp.check.cache as c; c._fingerprint = 'an edited engine'",
                  "import pallas_lsp.check.cache as c; c.__version__ = '99.0'"):
        assert check(tree, cache, code=patch) == (rows, 0)
        assert check(tree, cache, code=patch)[1] == 3
    assert len(list(cache.glob("check-v*"))) == 3
    assert check(tree, cache) == (rows, 3)  # the other buckets left this one alone


def test_the_fingerprint_hashes_the_package_files(tmp_path):
    from pallas_lsp.check.cache import package_hash

    pkg = tmp_path / "pallas_lsp"
    shutil.copytree(REPO / "server" / "pallas_lsp", pkg,
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = package_hash(pkg)
    rule = pkg / "engine" / "rules" / "pal103_semaphore_shape.py"
    if not rule.exists():
        rule = sorted((pkg / "engine" / "rules").glob("pal1*.py"))[0]
    rule.write_text(rule.read_text() + "\n# an edit\n")
    edited = package_hash(pkg)
    (pkg / "engine" / "__pycache__").mkdir()
    (pkg / "engine" / "__pycache__" / "x.pyc").write_bytes(b"bytecode")
    assert before != edited == package_hash(pkg)


# ---------------------------------------------------------------- robustness


def test_two_runs_at_once_share_the_cache(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES["oracle"], tree / "oracle")
    shutil.copytree(project(tmp_path), tree / "multi", dirs_exist_ok=True)
    cache = tmp_path / "cache"
    plain, _ = check(tree, None)
    cmd = [*CLI, "check", "--output-format", "json", "--cache-dir", str(cache), "."]
    runs = [subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env()) for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in runs]
    for p, (out, err) in zip(runs, outs):
        assert p.returncode == 1 and "Traceback" not in err and err == "", err
        assert json.loads(out) == plain
    rows, reused = check(tree, cache)
    assert rows == plain and reused == len(entries(cache)) > 100
    assert not list(cache.rglob(".tmp-*"))  # every write finished or was undone


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "not-an-entry",
                                    "another-file", "other-settings", "bad-finding"])
def test_a_damaged_or_foreign_entry_is_ignored_and_rebuilt(tmp_path, damage):
    tree = project(tmp_path)
    (tree / "nb.ipynb").write_bytes((FIXTURES["notebooks"] / "seeded.ipynb").read_bytes())
    cache = tmp_path / "cache"
    rows, _ = check(tree, cache)
    files = entries(cache)
    assert len(files) == 4
    texts = [f.read_text() for f in files]
    for i, f in enumerate(files):
        entry = json.loads(texts[i])
        if damage == "garbage":
            f.write_bytes(os.urandom(64))
        elif damage == "truncated":
            f.write_text(texts[i][:len(texts[i]) // 2])
        elif damage == "empty":
            f.write_text("")
        elif damage == "not-an-entry":
            f.write_text(json.dumps({"key": entry["key"], "hello": [1, {"$r": "Nope"}]}))
        elif damage == "another-file":
            f.write_text(texts[(i + 1) % len(texts)])
        elif damage == "other-settings":
            entry["key"][0] = "0" * 40
            f.write_text(json.dumps(entry))
        else:  # a finding that does not decode: a record of unknown fields
            f.write_text(texts[i].replace('{"$r":"Span","f":[', '{"$r":"Span","f":[7,', 1)
                         if '"Span"' in texts[i] else "[")
    again, reused = check(tree, cache)
    assert again == rows and reused == 0
    assert check(tree, cache) == (rows, 4)  # rebuilt


def test_a_cache_that_cannot_be_written_costs_one_warning(tmp_path):
    tree = project(tmp_path)
    (tree / "k2.py").write_text(KERNEL.format(module="pkg.helpers"))
    plain, _ = check(tree, None)
    # a folder that cannot be made: below a regular file
    (tmp_path / "file").write_text("")
    p = cli("check", "--output-format", "json", "--cache-dir", str(tmp_path / "file" / "c"),
            ".", cwd=tree)
    assert json.loads(p.stdout) == plain
    assert p.stderr.count("pallas-lsp:") == 1 and "cannot write the cache" in p.stderr
    assert cli("check", "-q", "--cache-dir", str(tmp_path / "file" / "c"), ".", cwd=tree,
               ).stderr.count("cannot write the cache") == 1
    assert cli("check", "--silent", "--cache-dir", str(tmp_path / "file" / "c"), ".",
               cwd=tree).stderr == ""


def test_a_read_only_cache_is_read_and_not_written(tmp_path):
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    prefix = ("setpriv", "--bounding-set=-dac_override,-dac_read_search") \
        if os.geteuid() == 0 else ()
    tree = project(tmp_path)
    (tree / "k2.py").write_text(KERNEL.format(module="pkg.helpers"))
    cache = tmp_path / "cache"
    check(tree, cache)
    (tree / "k2.py").write_text(KERNEL.format(module="pkg.helpers").replace("(2,)", "()"))
    plain, _ = check(tree, None)
    for folder in [cache, *cache.glob("check-v*")]:
        folder.chmod(0o555)
    try:
        p = cli("check", "--verbose", "--output-format", "json", "--cache-dir", str(cache),
                ".", cwd=tree, prefix=prefix)
    finally:
        for folder in [cache, *cache.glob("check-v*")]:
            folder.chmod(0o755)
    assert json.loads(p.stdout) == plain
    assert "3 analyses reused" in p.stderr  # the unchanged files
    assert len([line for line in p.stderr.splitlines() if "cannot write" in line]) == 1


def test_no_cache_writes_nothing_and_the_default_folder_is_the_project_root(tmp_path):
    tree = project(tmp_path)
    (tree / "sub").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    cli("check", "--no-cache", ".", cwd=tree / "sub")
    cli("coverage", "--no-cache", ".", cwd=tree / "sub")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    cli("check", "..", cwd=tree / "sub")  # from a subfolder: the pyproject.toml's folder
    folder = tree / ".pallas_lsp_cache"
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (folder / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55")
    assert len(entries(folder)) == 3 and not (tree / "sub" / ".pallas_lsp_cache").exists()
    # the environment, then the configuration's `cache-dir`, say otherwise
    cli("check", ".", cwd=tree, PALLAS_LSP_CACHE_DIR=str(tmp_path / "env"))
    assert len(entries(tmp_path / "env")) == 3
    (tree / "pyproject.toml").write_text("[project]\nname = 'p'\n[tool.pallas-lsp]\n"
                                         "cache-dir = 'build/cache'\n")
    cli("check", ".", cwd=tree)
    assert len(entries(tree / "build" / "cache")) == 3
    if shutil.which("git"):  # the folder's own .gitignore keeps it out of the repository
        subprocess.run(["git", "init", "-q", "."], cwd=tree, check=True)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                                cwd=tree, capture_output=True, text=True, check=True).stdout
        assert "k.py" in status and ".pallas_lsp_cache" not in status


def test_entries_unused_for_a_month_are_swept_and_used_ones_kept(tmp_path):
    tree = project(tmp_path)
    (tree / "old.py").write_text(KERNEL.format(module="pkg.helpers"))
    cache = tmp_path / "cache"
    check(tree, cache)
    (tree / "old.py").unlink()  # its entry is never used again

    def entry_of(name: str) -> Path:
        return next(f for f in entries(cache) if json.loads(f.read_text())["key"][1]
                    == os.path.realpath(tree / name))

    old, used = entry_of("old.py"), entry_of("k.py")
    day = 24 * 3600
    for f, age in ((old, 40 * day), (used, 40 * day)):
        os.utime(f, (f.stat().st_atime, f.stat().st_mtime - age))
    marker = next(cache.glob("check-v*/.swept"))
    os.utime(marker, (0, marker.stat().st_mtime - 2 * day))  # the last sweep: two days ago
    assert check(tree, cache)[1] == 2
    assert not old.exists() and used.exists()  # k.py analysed again (swept), rewritten
    os.utime(used, (used.stat().st_atime, used.stat().st_mtime - 10 * day))
    before = used.stat().st_mtime
    assert check(tree, cache)[1] == 3  # swept a day ago: not now; reused, and touched
    assert used.stat().st_mtime > before + 9 * day
