"""Fast parts of the runner, no JAX: profiles, targets, command building,
report parsing."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pallas_lsp.runs import ProfileError, TargetError, parse_target, resolve_profile, validate_profile
from pallas_lsp.runs import _report
from pallas_lsp.runs.mapping import PathMap, RaceParser, failure_diagnostic, race_diagnostics
from pallas_lsp.runs.runner import (REPORT_MARKER, RunHandle, RunSpec, _rsync_argv, _ssh_base,
                                    prepare)
from pallas_lsp.runs.target import RunSpecError

SERVER = str(Path(__file__).resolve().parents[2] / "server")


# ---------------------------------------------------------------- profiles


def test_local_is_built_in_and_ssh_needs_a_host():
    assert resolve_profile(None).kind == "local"
    assert resolve_profile("local").name == "local"
    with pytest.raises(ProfileError, match="missing `host`"):
        validate_profile("box", {"kind": "ssh"})
    with pytest.raises(ProfileError, match="missing `kind`"):
        validate_profile("box", {"host": "h"})


@pytest.mark.parametrize("data, message", [
    ({"kind": "ssh", "host": "h", "port": 0}, "`port` must be an integer from 1 to 65535"),
    ({"kind": "ssh", "host": "h", "port": "22"}, "`port`"),
    ({"kind": "ssh", "host": "-oProxyCommand=x"}, "not a host name"),
    ({"kind": "ssh", "host": "h", "user": "a b"}, "not a valid user name"),
    ({"kind": "ssh", "host": "h", "remote_dir": "/"}, "must be a folder of its own"),
    ({"kind": "ssh", "host": "h", "remote_dir": "~"}, "must be a folder of its own"),
    ({"kind": "ssh", "host": "h", "remote_dir": "a/../.."}, "'..'"),
    ({"kind": "ssh", "host": "h", "hots": "x"}, r"unknown key\(s\) hots"),
    ({"kind": "ssh", "host": "h", "strict_host_key_checking": "maybe"}, "strict_host_key"),
    ({"kind": "ssh", "host": "h", "env": {"A B": "x"}}, "not a valid variable name"),
    ({"kind": "ssh", "host": "h", "copy": "scp"}, "`copy` must be one of"),
    ({"kind": "local", "devices": 0}, "`devices`"),
    ({"kind": "local", "host": "h"}, "unknown key"),
    ({"kind": "nope"}, "`kind` must be one of"),
    ({"kind": "tpu"}, "missing `command`"),
    ({"kind": "tpu", "command": ["gcloud", "ssh"]}, r"must contain \"\{command\}\""),
    ({"kind": "tpu", "command": ["sh", "-c", "x {command}"]}, "whole element"),
    ({"kind": "tpu", "command": ["gcloud", "{name}", "{command}"]}, "has no `name` key"),
    ({"kind": "tpu", "command": ["g", "{command}"], "zone": "z"}, "not used as a placeholder"),
    ({"kind": "tpu", "command": ["g", "{name}", "{command}"], "name": ["x"]}, "string or an integer"),
])
def test_invalid_profiles_have_clear_errors(data, message):
    with pytest.raises(ProfileError, match=message):
        validate_profile("p", data)


def test_profile_spellings_and_defaults():
    p = validate_profile("box", {"kind": "ssh", "host": "tpu-box", "identityFile": "~/k",
                                 "remoteDir": "~/runs/x", "strict-host-key-checking": False})
    assert p.identity_file == os.path.expanduser("~/k")
    assert p.remote_dir == "runs/x"  # relative: ssh starts in the home folder
    assert p.strict_host_key_checking == "no"
    assert validate_profile("b", {"kind": "ssh", "host": "h"}).strict_host_key_checking == "yes"
    assert validate_profile("b", {"kind": "ssh", "host": "h"}).copy == "auto"
    t = validate_profile("v5e", {"kind": "tpu", "name": "my-tpu", "zone": "us-west4-a",
                                 "command": ["gcloud", "compute", "tpus", "tpu-vm", "ssh",
                                             "{name}", "--zone={zone}", "--worker=all",
                                             "--command", "{command}"]})
    assert t.vars == {"name": "my-tpu", "zone": "us-west4-a"}
    assert t.copy == "tar" and t.watch_stdin is False


def test_profiles_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pallas-lsp.profiles.box]\nkind = "ssh"\nhost = "box"\nport = 2222\n'
        '[tool.pallas-lsp.profiles.bad]\nkind = "ssh"\n')
    assert resolve_profile("box", tmp_path, allow_project=True).port == 2222
    with pytest.raises(ProfileError, match="profile 'bad' in .*: missing `host`"):
        resolve_profile("bad", tmp_path, allow_project=True)
    with pytest.raises(ProfileError, match=r"unknown profile 'nope' \(known: bad, box, local\)"):
        resolve_profile("nope", tmp_path)
    # settings (e.g. from the editor) win over pyproject
    assert resolve_profile("box", tmp_path, {"box": {"kind": "ssh", "host": "other"}}).host == "other"


# ---------------------------------------------------------------- commands


def test_ssh_argv_is_a_list_and_checks_host_keys(tmp_path):
    p = validate_profile("b", {"kind": "ssh", "host": "h", "port": 2200, "user": "me",
                               "identity_file": "/k/my key", "known_hosts": "/k/known hosts",
                               "remote_dir": "a dir/it's; $(x)"})
    argv = _ssh_base(p)
    assert "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    assert argv[argv.index("-i") + 1] == "/k/my key"
    assert 'UserKnownHostsFile="/k/known hosts"' in argv
    rs = _rsync_argv(p, tmp_path, tmp_path / "stage")
    assert rs[-1] == "h:a dir/it's; $(x)/" and "--protect-args" in rs
    # rsync splits -e itself; it must give back exactly the ssh argv
    assert shlex.split(rs[rs.index("-e") + 1]) == argv


def test_remote_command_quotes_every_element(tmp_path):
    ws = tmp_path / "w s"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("")
    t = ws / "test it's; \"x\" $(y).py"
    t.write_text("def test_a():\n    pass\n")
    plan = prepare(RunSpec(target=f"{t}::test_a", root=str(ws), env={"X": "a b;c"},
                           profile={"kind": "ssh", "host": "h", "remote_dir": "r d;$(z)",
                                    "remote_python": "/opt/py thon/bin/python"}))
    h = RunHandle(plan, None, None)
    argv = h._remote_argv("REMOTE")
    assert argv[-2:] == ["h", "REMOTE"]
    from pallas_lsp.runs import runner
    env = h._child_env({}, "-", runner.RUNTIME_DIR, remote=True)
    command = " ".join([shlex.join(["cd", "--", plan.profile.remote_dir]), "&&", "exec",
                        shlex.join(["env", *[f"{k}={v}" for k, v in env.items()],
                                    plan.profile.remote_python, *h._launcher_args()])])
    words = shlex.split(command)
    assert words[:3] == ["cd", "--", "r d;$(z)"]
    assert "X=a b;c" in words and "/opt/py thon/bin/python" in words
    assert "test it's; \"x\" $(y).py::test_a" in words


def test_tpu_template_substitutes_whole_elements(tmp_path):
    (tmp_path / "t.py").write_text("x = 1\n")
    plan = prepare(RunSpec(target=str(tmp_path / "t.py"), root=str(tmp_path), profile={
        "kind": "tpu", "name": "my tpu; rm -rf /", "zone": "z",
        "command": ["gcloud", "ssh", "{name}", "--zone={zone}", "--command", "{command}"]}))
    argv = RunHandle(plan, None, None)._remote_argv("cd -- x && echo hi")
    assert argv == ["gcloud", "ssh", "my tpu; rm -rf /", "--zone=z", "--command",
                    "cd -- x && echo hi"]


def test_marker_matches_the_child():
    assert REPORT_MARKER == _report.MARKER


# ---------------------------------------------------------------- targets


def test_targets(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "tool.py").write_text("print(1)\nif __name__ == '__main__':\n    pass\n")
    (tmp_path / "odd::name.py").write_text("print(1)\n")
    t = parse_target("test_a.py::TestK::test_x[a::b-1]", tmp_path)
    assert (t.path, t.test, t.kind) == (tmp_path / "test_a.py", "TestK::test_x[a::b-1]", "pytest")
    assert t.test_function() == "test_x"
    assert t.nodeid(tmp_path) == "test_a.py::TestK::test_x[a::b-1]"
    assert parse_target("tool.py", tmp_path).kind == "script"
    assert parse_target("odd::name.py", tmp_path).test is None
    assert parse_target(str(tmp_path), tmp_path).kind == "pytest"
    with pytest.raises(TargetError, match="no such file"):
        parse_target("missing.py::test_x", tmp_path)
    with pytest.raises(TargetError, match="cannot name a test"):
        parse_target("tool.py::x", tmp_path, kind="script")


def test_prepare_rejects_bad_options(tmp_path):
    (tmp_path / "t.py").write_text("")
    with pytest.raises(RunSpecError, match="mode"):
        prepare(RunSpec(target=str(tmp_path / "t.py"), mode="gpu"))
    with pytest.raises(RunSpecError, match="timeout"):
        prepare(RunSpec(target=str(tmp_path / "t.py"), timeout=0))
    (tmp_path / "sub").mkdir()
    with pytest.raises(RunSpecError, match="outside the workspace root"):
        prepare(RunSpec(target=str(tmp_path / "t.py"), root=str(tmp_path / "sub"),
                        profile={"kind": "ssh", "host": "h"}))


def test_cli_usage_errors_exit_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=SERVER)
    for args in (["run", "missing_file.py"], ["run", "--profile", "nope", "."],
                 ["run", "--mode", "gpu", "."], ["run"]):
        p = subprocess.run([sys.executable, "-m", "pallas_lsp", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stdout == ""


def test_missing_interpreter_is_an_error_result(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_x():\n    pass\n")
    from pallas_lsp.runs import Status, run
    res = run(RunSpec(target=str(tmp_path / "test_a.py"), python=str(tmp_path / "no-python")))
    assert res.status is Status.ERROR and "interpreter not found" in res.error
    assert res.summary.startswith(f"pallas-lsp run {tmp_path / 'test_a.py'}: error:")


# ---------------------------------------------------------------- parsing


RACE_OUTPUT = """\
RACE DETECTED
  write of ('vmem', 102, 0, 0)[()] from 100, 0, {k}:20:4 (racy)
  clock: [1 3]
  read of ('vmem', 102, 0, 0)[()] from 0, 0, {k}:21:17 (racy)
  clock: [2 0]

RACE DETECTED
  write of ('hbm', 7, 0, 1)[(slice(0, 8, None),)] from 101, 1,  (kern)
  clock: [1 3]
  write of ('hbm', 7, 0, 1)[(slice(0, 8, None),)] from 0, 1, {k}:22:4 (racy)
  clock: [2 0]
"""


def test_race_parser_and_diagnostics(tmp_path):
    k = tmp_path / "k é.py"
    k.write_text("\n" * 19 + "    copy.start()\n    o[...] = t_ref[...] + 1.0\n    x[...] = 1\n",
                 encoding="utf-8")
    parser = RaceParser()
    for line in RACE_OUTPUT.format(k=k).splitlines():
        parser.feed(line)
    assert len(parser.blocks) == 2
    diags = race_diagnostics(parser.blocks, PathMap(root=tmp_path))
    got = [(d.span.line + 1, d.span.col) for d in diags]
    assert got == [(20, 4), (21, 17), (22, 4)]
    assert "the write of the DMA started here" in diags[0].message
    assert "not reported" in diags[2].message or "does not report" in diags[2].message


def test_jax_runtime_error_original_and_callback_frames(tmp_path):
    k = tmp_path / "k.py"
    k.write_text("def kern(x):\n    y = x[5]\n    return y\n")
    msg = ("INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
           '  File "/jax/x.py", line 3, in get\n'
           "IndexError: Out-of-bounds read of (0 0 vmem 102): reading [5] but buffer has shape (4,).")
    assert _report.original_of(msg) == {
        "type": "IndexError",
        "message": "Out-of-bounds read of (0 0 vmem 102): reading [5] but buffer has shape (4,)."}
    f = {"type": "jax.errors.JaxRuntimeError", "message": msg,
         "original": _report.original_of(msg), "nodeid": "t.py::test_k",
         "frames": [{"file": str(tmp_path / "t.py"), "line": 1, "name": "test_k"}],
         "chain": [],
         "callback": [{"type": "IndexError", "message": "Out-of-bounds read of (0 0 vmem 102): "
                       "reading [5] but buffer has shape (4,).", "frames": [],
                       "chain": [{"type": "jax._src.source_info_util."
                                  "JaxStackTraceBeforeTransformation", "message": "",
                                  "frames": [{"file": str(k), "line": 2, "name": "kern"}]}]}]}
    (tmp_path / "t.py").write_text("kern(x)\n")
    d = failure_diagnostic(f, PathMap(root=tmp_path), None)
    assert (d.path, d.span.line, d.code) == (str(k), 1, "PAL900")
    assert d.message.startswith("IndexError: Out-of-bounds read")
    assert d.span.col == 4 and d.span.end_col == len("    y = x[5]")


def test_byte_columns_become_code_points(tmp_path):
    k = tmp_path / "k.py"
    k.write_text("é = 1; copy.start()\n", encoding="utf-8")
    span = PathMap(root=tmp_path).span(str(k), 1, len("é = 1; ".encode()), 1,
                                       len("é = 1; copy.start()".encode()))
    assert (span.col, span.end_col) == (len("é = 1; "), len("é = 1; copy.start()"))


def test_hang_without_a_wait_line_points_at_the_pallas_call(tmp_path):
    """`pl.semaphore_wait` gets no source line from JAX: the diagnostic goes to
    the innermost user frame of the main thread (the pallas_call)."""
    from pallas_lsp.runs.mapping import hang_diagnostics
    t = tmp_path / "test_k.py"
    t.write_text("def test_k():\n    run()\n\ndef run():\n    return pallas_call(k)(x)\n")
    hang = {"timeout": 7, "current": {"nodeid": "test_k.py::test_k", "path": str(t), "line": 1},
            "waits": [{"kind": "semaphore wait", "frames": []}],
            "stacks": [{"main": True, "frames": [
                {"file": str(t), "line": 2, "name": "test_k"},
                {"file": str(t), "line": 5, "name": "run", "col": 11},
                {"file": "/venv/lib/python3.11/site-packages/jax/x.py", "line": 9, "name": "f"}]}]}
    (d,) = hang_diagnostics(hang, PathMap(root=tmp_path), None, 7)
    assert (d.code, d.span.line, d.span.col) == ("PAL902", 4, 11)
    assert "semaphore wait" in d.message and "7 s" in d.message


def test_an_interpreter_without_pytest_or_jax_is_an_error(tmp_path):
    import venv
    venv.create(tmp_path / "bare", with_pip=False)
    (tmp_path / "test_a.py").write_text("def test_x():\n    pass\n")
    from pallas_lsp.runs import Status, run
    res = run(RunSpec(target=str(tmp_path / "test_a.py"), python=str(tmp_path / "bare/bin/python")))
    assert res.status is Status.ERROR and "pytest is not installed" in res.error
