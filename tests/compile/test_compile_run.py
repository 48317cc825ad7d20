"""`pallas-lsp run --compile`: the fixtures run in interpret mode and every
pallas_call is compiled for real TPU generations with libtpu (no TPU here).

One run (conftest.py) compiles all of tests/compile/fixtures for v5e and v6e;
each `# expect PALnnn` line must get that diagnostic, and every fixed twin must
compile."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_helpers import FIXTURES, GENS, SCRIPT, compile_expected, expected  # noqa: E402
from runs_helpers import PYTHON, processes_in_group, sshd  # noqa: E402,F401 (fixture)

from pallas_lsp.runs import RunSpec, Status, run, start_run  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                reason="libtpu is not installed (pip install 'jax[tpu]')")


def test_every_expected_line_gets_its_diagnostic(compiled):
    res = compiled
    assert res.status is Status.FAILED, res.summary
    assert res.tests == {"passed": 1}, res.summary  # the script itself runs in interpret mode
    got = {(Path(d.path).name, d.span.line + 1): d for d in res.diagnostics}
    want = compile_expected()
    assert set(got) == set(want), [(Path(d.path).name, d.span.line + 1, d.message[:80])
                                   for d in res.diagnostics]
    for key, code in want.items():
        d = got[key]
        assert d.code == code, (key, d.message)
        assert "compiling for TPU" in d.message
    line = min(ln for (name, ln) in want if name == "pal401_block_shape.py")
    block = got[("pal401_block_shape.py", line)]
    assert "divisible by 8 and 128" in block.message and "v5e, v6e" in block.message
    assert block.span.col == len("        out_specs=")  # on the BlockSpec itself
    vmem = [d for k, d in got.items() if k[0] == "pal404_scoped_vmem.py"]
    assert vmem and all("vmem" in d.message.lower() for d in vmem)


def test_fixed_twins_compile_with_a_summary(compiled):
    lines = {(Path(c["path"]).name, c["gen"]) for c in compiled.compiles}
    for name in ("pal401_block_shape.py", "pal402_no_lowering.py", "pal403_int8_arith.py",
                 "pal404_scoped_vmem.py", "pal405_float16.py"):
        for gen in GENS:
            assert (name, gen) in lines, (name, gen)
    texts = [c["text"] for c in compiled.compiles]
    assert any("scoped VMEM" in t and "of 16.0 MiB (the default limit)" in t for t in texts)
    assert any("of 64.0 MiB" in t for t in texts)  # vmem_limit_bytes, as the compiler reports
    assert all(c["seconds"] is not None and c["seconds"] < 30 for c in compiled.compiles)
    assert "compile v5e,v6e" in compiled.summary and "compiled" in compiled.summary


def test_cli_compile_output_and_bad_generation(tmp_path):
    cmd = [sys.executable, "-m", "pallas_lsp", "run", "--compile", "v7x", str(SCRIPT)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "unknown TPU generation 'v7x'" in p.stderr
    cmd = [sys.executable, "-m", "pallas_lsp", "run", "--compile", "v5e", "--root", str(FIXTURES),
           str(SCRIPT), "--", "pal402_no_lowering.bug_sort", "pal402_no_lowering.ok_sort"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    (row,) = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert row.startswith("pal402_no_lowering.py:8:") or "pal402_no_lowering.py:8:" in row
    assert "PAL402 Unimplemented primitive in Pallas TPU lowering for tc: sort." in row
    assert "max_kernel(float32[8,128]) compiled for TPU v5e in" in p.stderr


def test_cancel_kills_the_compiling_run():
    seen = []
    handle = start_run(RunSpec(target=str(SCRIPT), root=str(FIXTURES), compile_for=("v4",),
                               timeout=300),
                       on_output=lambda stream, line: seen.append(line))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("compiled" in s for s in seen):
        time.sleep(0.05)
    pgid = handle.pid
    handle.cancel()
    res = handle.result(30)
    assert res.status is Status.CANCELLED
    assert pgid is not None and not processes_in_group(pgid)


def test_compile_over_ssh_with_races(sshd, tmp_path):
    remote = tmp_path / "remote"
    profile = {"kind": "ssh", "host": sshd["host"], "port": sshd["port"], "user": sshd["user"],
               "identity_file": sshd["identity_file"], "known_hosts": sshd["known_hosts"],
               "remote_dir": str(remote), "remote_python": PYTHON}
    res = run(RunSpec(target=str(SCRIPT), root=str(FIXTURES), compile_for=("v5e",), races=True,
                      profile=profile, timeout=300,
                      args=["pal401_block_shape.bug_lanes", "pal401_block_shape.ok_lanes"]))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    assert d.path == str(FIXTURES / "pal401_block_shape.py")  # mapped back from the remote copy
    line = min(ln for (name, ln) in expected() if name == "pal401_block_shape.py")
    assert d.span.line + 1 == line and d.code == "PAL401"
    assert [c["gen"] for c in res.compiles] == ["v5e"]
    assert "races" in res.summary and os.path.isdir(remote)


CRASH = '''import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def pick_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.where(x_ref[...] < y_ref[...], x_ref[...], y_ref[...])


if __name__ == "__main__":
    x = jnp.ones((32, 128), jnp.bool_)
    print(pl.pallas_call(pick_kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.bool_))(x, x))
'''


def test_a_compiler_crash_is_a_diagnostic_on_the_call(tmp_path):
    """libtpu 0.0.42 aborts the process compiling this bool kernel for v5p (an
    XLA check failure on the operands' conversion); the run reports it."""
    (tmp_path / "pyproject.toml").write_text("")
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    res = run(RunSpec(target=str(script), root=str(tmp_path), compile_for=("v5p",), timeout=120))
    assert res.status is Status.FAILED, res.summary
    (d,) = res.diagnostics
    assert d.code == "PAL903" and "crashed the process while compiling `pick_kernel`" in d.message
    assert "Check failed" in d.message and d.span.line == 11  # the pallas_call line


HOLD_LIBTPU = """
import os, sys, time
os.environ["TPU_WORKER_HOSTNAMES"] = "localhost"
from jax.experimental import topologies
try:
    topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2")
except Exception as e:  # someone else holds the lock already: the same situation
    if "lockfile" not in str(e):
        raise
print("holding", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_compile_runs_share_libtpu_with_other_users(tmp_path):
    """Another process has libtpu loaded the default way (it holds libtpu's
    lock file: a test suite, a notebook); a compile run, and two of them at
    once, still compile. They used to fail with "Internal error when accessing
    libtpu multi-process lockfile" and a hint to install libtpu."""
    env = {k: v for k, v in os.environ.items() if k != "ALLOW_MULTIPLE_LIBTPU_LOAD"}
    env["JAX_PLATFORMS"] = "cpu"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LIBTPU], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        spec = RunSpec(target=str(SCRIPT), root=str(FIXTURES), compile_for=("v5e",), timeout=300,
                       args=["pal402_no_lowering.ok_sort"])
        handles = [start_run(spec), start_run(spec)]
        for res in (h.result(300) for h in handles):
            assert res.status is Status.PASSED, (res.summary, res.error)
            assert res.compiles and "compiled for TPU v5e" in str(res.compiles[0])
    finally:
        holder.stdin.close()
        holder.wait(60)


def test_a_compile_setup_error_names_its_cause():
    from pallas_lsp.runs.compile_mapping import setup_hint
    lock = ('v5e: JaxRuntimeError: ABORTED: Internal error when accessing libtpu multi-process '
            'lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".')
    hint = setup_hint(lock, [{"compile": {"libtpu": True}}])
    assert "another process holds libtpu's lock" in hint and "pip install" not in hint
    missing = "v5e: RuntimeError: Unable to initialize backend 'tpu'"
    assert "pip install 'jax[tpu]'" in setup_hint(missing, [{"compile": {"libtpu": False}}])
    assert setup_hint("v5e: ValueError: bad topology", [{"compile": {"libtpu": True}}]) == ""


def _cli_run(*args: str, python: str | None = None, env=None) -> subprocess.CompletedProcess:
    """`pallas-lsp run [FLAGS] run_all.py -- CASE`: `args` are the flags, then `--`, the case."""
    cut = args.index("--")
    cmd = [sys.executable, "-m", "pallas_lsp", "run", *(["--python", python] if python else []),
           *args[:cut], "--root", str(FIXTURES), str(SCRIPT), *args[cut:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_a_default_run_compiles_so_a_kernel_a_tpu_refuses_does_not_pass():
    """No misleading green: interpret mode alone passes this block shape, a
    TPU refuses it. The default run (no --compile) fails with PAL401 on the
    kernel's line; --no-compile is the old green."""
    p = _cli_run("--", "pal401_block_shape.bug_lanes")
    assert p.returncode == 1, p.stderr
    assert "PAL401" in p.stdout and "pal401_block_shape.py:" in p.stdout
    assert "[local, interpret, compile v5e,v6e]" in p.stderr
    p = _cli_run("--no-compile", "--", "pal401_block_shape.bug_lanes")
    assert p.returncode == 0 and "passed" in p.stderr and "compile" not in p.stderr.split("[")[-1]
    p = _cli_run("--", "pal401_block_shape.ok_lanes")
    assert p.returncode == 0 and "2 compiled, 0 compile errors" in p.stderr


def test_a_default_run_without_libtpu_says_tpu_errors_were_not_checked(tmp_path):
    """The same run in a Python that has jax but no libtpu (this one's
    packages, less libtpu): it passes, and the summary says what it did not
    check and how to check it."""
    site = Path(importlib.util.find_spec("jax").submodule_search_locations[0]).parent
    farm = tmp_path / "site"
    farm.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith("libtpu") and not entry.name.endswith(".pth"):
            (farm / entry.name).symlink_to(entry)
    base = getattr(sys, "_base_executable", sys.executable)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{farm}${{PYTHONPATH:+:$PYTHONPATH}}" exec {base} "$@"\n')
    python.chmod(0o755)
    probe = subprocess.run([str(python), "-c", "import importlib.util as u, jax; "
                            "print(u.find_spec('libtpu') is None)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "True", probe.stderr
    # Without the libtpu path a deviceless compile earlier in this process put in
    # os.environ (jax sets TPU_LIBRARY_PATH), which the child would inherit and load.
    env = {k: v for k, v in os.environ.items() if k != "TPU_LIBRARY_PATH"}
    p = _cli_run("--", "pal401_block_shape.bug_lanes", python=str(python), env=env)
    assert p.returncode == 0, p.stderr
    assert "TPU-only errors not checked: libtpu is not installed" in p.stderr
    assert "pip install 'jax[tpu]'" in p.stderr
    # asked for explicitly, a compile without libtpu is an error, as before
    p = subprocess.run([sys.executable, "-m", "pallas_lsp", "run", "--python", str(python),
                        "--compile", "v5e", "--root", str(FIXTURES), str(SCRIPT), "--",
                        "pal401_block_shape.bug_lanes"], capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 2 and "could not compile for TPU" in p.stderr


def test_the_editors_run_command_compiles_by_default_unless_told():
    from pallas_lsp.lsp.runs_bridge import parse_run_args

    uri = "file:///w/test_k.py"
    assert parse_run_args([{"uri": uri}]).compile is None  # runs.compileByDefault decides
    assert parse_run_args([{"uri": uri, "compile": False}]).compile == ()
    assert parse_run_args([{"uri": uri, "compile": True}]).compile == ("*",)
    assert parse_run_args([{"uri": uri, "compile": ["v4"]}]).compile == ("v4",)


def test_compiler_wordings_get_their_codes_and_keep_the_figures(compiled):
    """The compiler's own words for a catalog entry's error (E2002 int8 tiling,
    uint8 `arith.divui`, a float16 scratch store) and the lowering's
    `Buffered(3)` get the entry's code, on the BlockSpec / scratch entry /
    statement, with the compiler's figures kept."""
    got = {(Path(d.path).name, d.span.line + 1): d for d in compiled.diagnostics}
    lines = {code: ln for (name, ln), code in compile_expected().items()
             if name in ("pal4_compile_codes.py", "pal407_buffered_count.py")}
    tiling = got[("pal4_compile_codes.py", lines["PAL401"])]
    assert tiling.code == "PAL401" and "E2002" in tiling.message
    assert "has tiling (32, 128)" in tiling.message and "block shape (..., 8, 128)" in tiling.message
    assert tiling.span.col == len("        in_specs=[")  # the BlockSpec named by "input 0"
    div = got[("pal4_compile_codes.py", lines["PAL403"])]
    assert div.code == "PAL403" and "arith.divui" in div.message and "xi8" in div.message
    f16 = got[("pal4_compile_codes.py", lines["PAL405"])]
    assert f16.code == "PAL405" and "tpu.store" in f16.message and "xf16" in f16.message
    assert f16.span.col == len("        scratch_shapes=[")  # the float16 scratch entry
    buf = got[("pal407_buffered_count.py", lines["PAL407"])]
    assert buf.code == "PAL407" and "Got 3." in buf.message
    assert buf.span.col == len("        in_specs=[")
