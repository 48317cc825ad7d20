"""`pallas-lsp check` on trees an attacker (or a messy disk) could hand it:
FIFOs, links to devices, broken links, 1,000 nested folders, huge files, and
pallas-lsp's own failures (a code of their own, never 1). The real CLI, in a
subprocess, with a time limit: a hang fails the test instead of stopping CI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUGGY = (REPO / "tests" / "lsp" / "kernels" / "dma_bugs.py").read_text(encoding="utf-8")


def check(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "server"))
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "check", "--no-config",
                           "--output-format", "json", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_special_files_become_rows_and_the_rest_is_checked(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a_kernel.py").write_text(BUGGY, encoding="utf-8")
    os.mkfifo(tree / "x.py")  # nobody ever writes to it
    (tree / "zero.py").symlink_to("/dev/zero")
    (tree / "gone.py").symlink_to(tree / "missing-target.py")
    (tree / "big.py").write_text("# padding\n" * 600_000)  # 6 MB
    deep = tree
    for _ in range(1000):
        deep = deep / "d"
        deep.mkdir()
    (deep / "deep_kernel.py").write_text(BUGGY, encoding="utf-8")
    try:
        _check_hostile_tree(tmp_path)
    finally:
        # pytest removes old temporary folders recursively: a 1,000-deep tree
        # left behind makes that fail with RecursionError in later sessions.
        subprocess.run(["rm", "-rf", str(tree / "d")], check=False)


def _check_hostile_tree(tmp_path):

    t0 = time.monotonic()
    res = check("tree", cwd=tmp_path)
    assert time.monotonic() - t0 < 60
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    rows = json.loads(res.stdout)
    by_file: dict[str, list[dict]] = {}
    for r in rows:
        by_file.setdefault(Path(r["path"]).name, []).append(r)
    assert {r["code"] for r in by_file["a_kernel.py"]} == {"PAL101", "PAL103"}
    assert {r["code"] for r in by_file["deep_kernel.py"]} == {"PAL101", "PAL103"}
    for name, words in [("x.py", "FIFO"), ("zero.py", "character device"),
                        ("gone.py", "broken symbolic link"), ("big.py", "too large")]:
        (row,) = by_file[name]
        assert row["code"] == "E902" and words in row["message"], row
    assert "syntax" not in by_file["big.py"][0]["message"]


def test_named_special_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    res = check("pipe.py", "zero.py", cwd=tmp_path, timeout=30)
    rows = json.loads(res.stdout)
    assert [(Path(r["path"]).name, r["code"]) for r in rows] == [("pipe.py", "E902"),
                                                                  ("zero.py", "E902")]
    assert res.returncode == 1


def _cli_with(tmp_path: Path, patch: str) -> subprocess.CompletedProcess:
    """The real CLI, with check_paths replaced by `patch` (a fault that cannot
    be produced from the outside on purpose)."""
    code = ("import sys\nfrom pathlib import Path\nimport pallas_lsp.check.checker as checker\n"
            + patch + "\nfrom pallas_lsp.cli import main\n"
            'sys.exit(main(["check", "--output-format", "json", "."]))\n')
    env = dict(os.environ, PYTHONPATH=str(REPO / "server"))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def test_an_internal_error_has_its_own_exit_code(tmp_path):
    res = _cli_with(tmp_path, textwrap.dedent("""
        def boom(*a, **k):
            raise MemoryError("no more")
        checker.check_project = boom
    """))
    assert res.returncode == 3, (res.returncode, res.stderr[-2000:])
    assert "internal error (MemoryError: no more)" in res.stderr


def test_a_file_the_engine_failed_on_exits_3_with_its_row(tmp_path):
    res = _cli_with(tmp_path, textwrap.dedent("""
        def failed(paths, **k):
            return [], [checker.Problem(Path("k.py"), "internal", "pallas-lsp could not analyse this file")]
        checker.check_project = failed
    """))
    assert res.returncode == 3, (res.returncode, res.stderr[-2000:])
    (row,) = json.loads(res.stdout)
    assert row["code"] == "E001"
