"""Runs over a real SSH server on 127.0.0.1 (the `ssh` and `tpu` profiles):
the workspace is copied to another folder, the kernel runs there in interpret
mode, and the diagnostics land on the LOCAL lines."""
from __future__ import annotations

import os
import time
from pathlib import Path

from runs_helpers import (PYTHON, line_of, processes_with_cwd, ssh_profile,  # noqa: F401
                          sshd, workspace)  # (fixtures)

from pallas_lsp.runs import RunSpec, Status, run, start_run


def _kernels(ws: Path) -> Path:
    return ws / "kernels.py"


def test_ssh_run_maps_the_failure_to_the_local_line(sshd, workspace, tmp_path):
    remote = tmp_path / "remote side"
    res = run(RunSpec(target=str(workspace / "test_kernels.py") + "::test_array_to_dma",
                      root=str(workspace), profile=ssh_profile(sshd, remote), timeout=120))
    assert res.status is Status.FAILED, res.summary
    assert (remote / "kernels.py").is_file()  # the workspace was copied there
    assert (remote / ".pallas-lsp" / "runtime" / "pallas_lsp" / "runs" / "launcher.py").is_file()
    (d,) = res.diagnostics
    assert d.code == "PAL101"
    assert d.path == str(_kernels(workspace))  # the local file, not the remote copy
    assert d.span.line + 1 == line_of(_kernels(workspace), "copy.start()", 0)
    assert res.argv[0] == "ssh" and "StrictHostKeyChecking=yes" in res.argv


def test_ssh_tar_copy_and_races(sshd, workspace, tmp_path):
    remote = tmp_path / "remote"
    res = run(RunSpec(target=str(workspace / "test_kernels.py") + "::test_racy",
                      root=str(workspace), races=True, timeout=120,
                      profile=ssh_profile(sshd, remote, copy="tar")))
    assert res.status is Status.FAILED, res.summary
    assert not any(c[0] == "rsync" for c in res.commands)
    lines = {(d.code, d.path, d.span.line + 1) for d in res.diagnostics}
    k = str(_kernels(workspace))
    assert ("PAL901", k, line_of(_kernels(workspace), "copy.start()", 2)) in lines
    assert ("PAL901", k, line_of(_kernels(workspace), "t_ref[...] = t_ref[...]")) in lines


def test_tpu_profile_command_template(sshd, workspace, tmp_path):
    """A `tpu` profile whose template goes to the same SSH server."""
    remote = tmp_path / "tpu vm"
    profile = {
        "kind": "tpu",
        "command": ["ssh", "-p", "{port}", "-i", "{identity_file}", "-o", "BatchMode=yes",
                    "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile={known_hosts}",
                    "{user}@{host}", "{command}"],
        "port": sshd["port"], "identity_file": sshd["identity_file"],
        "known_hosts": sshd["known_hosts"], "user": sshd["user"], "host": sshd["host"],
        "remote_dir": str(remote), "remote_python": PYTHON,
    }
    lines = []
    res = run(RunSpec(target=str(workspace / "test_kernels.py") + "::test_vector_sem",
                      root=str(workspace), profile=profile, timeout=120),
              on_output=lambda s, line: lines.append(line))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    assert d.code == "PAL103"
    assert d.path == str(_kernels(workspace))
    assert d.span.line + 1 == line_of(_kernels(workspace), "copy.start()", 1)
    # placeholders were substituted as whole argv elements; {command} is one element
    assert res.argv[:3] == ["ssh", "-p", str(sshd["port"])]
    assert res.argv[4] == sshd["identity_file"]  # contains a space, still one element
    assert res.argv[-1].startswith("cd -- ") and "pallas_lsp.runs.launcher" in res.argv[-1]
    assert any("1 failed" in line for line in lines)  # output was streamed
    assert not any("@@pallas-lsp-report@@" in line for line in lines)


def test_ssh_refuses_an_unknown_host_key(sshd, workspace, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    res = run(RunSpec(target=str(workspace / "test_kernels.py"), root=str(workspace),
                      profile=ssh_profile(sshd, tmp_path / "r", known_hosts=str(empty)),
                      timeout=60))
    assert res.status is Status.ERROR
    assert "Host key verification failed" in res.error or "host key" in res.error.lower()
    assert not (tmp_path / "r").exists()


def test_ssh_cancel_stops_the_remote_process(sshd, workspace, tmp_path):
    remote = tmp_path / "remote"
    (workspace / "test_sleep.py").write_text(
        "import time\n\ndef test_sleep():\n    print('sleeping', flush=True)\n"
        "    time.sleep(300)\n")
    seen = []
    handle = start_run(RunSpec(target=str(workspace / "test_sleep.py"), root=str(workspace),
                               profile=ssh_profile(sshd, remote), timeout=300),
                       on_output=lambda s, line: seen.append(line))
    deadline = time.monotonic() + 60
    while not any("sleeping" in x for x in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("sleeping" in x for x in seen), seen[-20:]
    assert processes_with_cwd(remote)  # the remote python is running in the remote folder
    t0 = time.monotonic()
    handle.cancel()
    res = handle.result(30)
    assert res.status is Status.CANCELLED
    assert time.monotonic() - t0 < 10
    deadline = time.monotonic() + 10
    while processes_with_cwd(remote) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_cwd(remote) == [], "the remote run outlived the cancel"
    assert os.path.isdir(remote)


def test_ssh_hang_is_reported_at_the_local_wait_line(sshd, workspace, tmp_path):
    """The remote child's watchdog sends where the kernel waits; the parent maps
    it back to the local file."""
    from pallas_lsp import catalog
    remote = tmp_path / "remote"
    t0 = time.monotonic()
    res = run(RunSpec(target=str(workspace / "test_kernels.py") + "::test_hangs",
                      root=str(workspace), profile=ssh_profile(sshd, remote), timeout=12))
    assert res.status is Status.TIMEOUT, res.summary
    assert time.monotonic() - t0 < 12 + 15  # the remote side stopped itself, no hard kill
    (d,) = res.diagnostics
    assert d.code == ("PAL303" if "PAL303" in catalog.load() else "PAL902")
    assert d.path == str(_kernels(workspace)) and "hung" in d.message
    assert d.span.line + 1 == line_of(_kernels(workspace), "copy.wait()  # BUG: never started")
    assert processes_with_cwd(remote) == []
