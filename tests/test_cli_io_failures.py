"""The command line when the file system says no: every failure is one line
and a documented exit code, never a traceback; nothing the user had is lost.

Real processes throughout. Permissions are enforced for root too by starting
the command without the capabilities that bypass them (`setpriv`); a full
disk is a file-size limit (RLIMIT_FSIZE), which fails writes the same way
(EFBIG instead of ENOSPC) without needing a mount.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = (REPO / "examples" / "double_buffer_bugs.py").read_text(encoding="utf-8")
CLI = [sys.executable, "-m", "pallas_lsp"]


def unprivileged() -> list[str]:
    """A prefix that makes permissions bite: nothing for a normal user; for
    root, setpriv without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def cli(*args: str, cwd: Path, prefix: list[str] | None = None, preexec=None,
        **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), *CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, preexec_fn=preexec, **kw)


def no_traceback(p: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr


def file_size_limit(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_an_unreadable_folder_among_the_paths_is_a_finding(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "k.py").write_text(EXAMPLE, encoding="utf-8")
    (tmp_path / "k.py").write_text(EXAMPLE, encoding="utf-8")
    locked.chmod(0)
    try:
        for args in (["check", "--output-format", "concise", "locked", "k.py"],
                     ["check", "--no-config", "--output-format", "concise", "locked", "k.py"]):
            p = cli(*args, cwd=tmp_path, prefix=unprivileged())
            no_traceback(p)
            assert p.returncode == 1
            assert "locked:1:1: E902" in p.stdout and "Permission denied" in p.stdout
            assert "k.py:33:25: PAL101" in p.stdout  # the other file is still checked
        p = cli("coverage", "locked", "k.py", cwd=tmp_path, prefix=unprivileged())
        no_traceback(p)
        assert "k.py" in p.stdout
    finally:
        locked.chmod(0o755)


def test_fix_on_a_read_only_file_leaves_it_and_fixes_the_others(tmp_path):
    ro, rw = tmp_path / "ro.py", tmp_path / "rw.py"
    ro.write_text(EXAMPLE, encoding="utf-8")
    rw.write_text(EXAMPLE, encoding="utf-8")
    ro.chmod(0o444)
    p = cli("check", "--no-config", "--fix", "--output-format", "concise", "ro.py", "rw.py",
            cwd=tmp_path, prefix=unprivileged())
    no_traceback(p)
    assert p.returncode == 2
    assert p.stderr.strip() == ("pallas-lsp: cannot write the fixes to ro.py: the file is read-only "
                                "(the file is unchanged)")
    assert ro.read_text(encoding="utf-8") == EXAMPLE
    assert rw.read_text(encoding="utf-8") != EXAMPLE and "buf.at[slot]" in rw.read_text()
    # the report is what is on disk: ro.py keeps its three problems
    assert p.stdout.count("ro.py:") == 3 and "2 fixed" in p.stdout


def test_fix_that_grows_a_file_on_a_full_disk_keeps_the_original(tmp_path):
    """The PAL101 fix turns `buf[slot]` into `buf.at[slot]`: the file grows.
    With writes failing past the file's size, the file must stay whole (it
    used to be left truncated), and the error is one line."""
    k = tmp_path / "k.py"
    k.write_text(EXAMPLE, encoding="utf-8")
    size = k.stat().st_size
    p = cli("check", "--no-config", "--select", "PAL101", "--fix", "--output-format", "concise",
            "k.py", cwd=tmp_path, preexec=file_size_limit(size))
    no_traceback(p)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("pallas-lsp: cannot write the fixes to k.py: File too large")
    assert k.read_text(encoding="utf-8") == EXAMPLE
    assert sorted(f.name for f in tmp_path.iterdir()) == ["k.py"]  # no temporary file left
    assert "0 fixed" in p.stdout and p.stdout.count("k.py:33:25: PAL101") == 1


def test_fix_keeps_the_permissions_of_the_file(tmp_path):
    k = tmp_path / "k.py"
    k.write_text(EXAMPLE, encoding="utf-8")
    k.chmod(0o640)
    p = cli("check", "--no-config", "--fix", "k.py", cwd=tmp_path)
    no_traceback(p)
    assert "buf.at[slot]" in k.read_text(encoding="utf-8")
    assert (k.stat().st_mode & 0o777) == 0o640


def test_a_report_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "k.py").write_text(EXAMPLE, encoding="utf-8")
    # a report file on a full disk
    p = cli("check", "--no-config", "--output-file", "report.txt", "k.py", cwd=tmp_path,
            preexec=file_size_limit(100))
    no_traceback(p)
    assert p.returncode == 2 and p.stderr.strip() == "pallas-lsp: cannot write the report: File too large"
    # a report file that cannot be opened
    p = cli("check", "--no-config", "--output-file", "no/such/dir/r.txt", "k.py", cwd=tmp_path)
    no_traceback(p)
    assert p.returncode == 2 and "cannot write the report to no/such/dir/r.txt" in p.stderr
    # standard output closed
    p = cli("check", "--no-config", "k.py", cwd=tmp_path, preexec=lambda: os.close(1))
    no_traceback(p)
    assert p.returncode == 2 and "standard output is closed" in p.stderr
    # standard error closed too: still no crash, the exit code tells
    p = subprocess.run([*CLI, "check", "--no-config", "k.py"], cwd=tmp_path, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       preexec_fn=lambda: (os.close(1), os.close(2)))
    assert p.returncode == 2
