"""The rest of `check` as CI and editors use it: stdin, both cores on big
inputs (the same findings as one process), the pre-commit hooks, a `rule`
page for every code, and the small promises (run defaults, install hints)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUGGY = (REPO / "tests" / "lsp" / "kernels" / "dma_bugs.py").read_text(encoding="utf-8")


def cli(*args: str, cwd: Path, stdin: str | None = None, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


def test_stdin_is_checked_as_the_named_file_with_its_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pallas-lsp.per-file-ignores]\n'
                                             '"tests/*" = ["PAL103"]\n')
    r = cli("check", "--output-format", "json", "--stdin-filename", "kern/a.py", "-",
            cwd=tmp_path, stdin=BUGGY)
    rows = json.loads(r.stdout)
    assert r.returncode == 1 and [(x["path"], x["code"]) for x in rows] == [
        ("kern/a.py", "PAL101"), ("kern/a.py", "PAL103")]
    r = cli("check", "--output-format", "json", "--stdin-filename", "tests/t.py", "-",
            cwd=tmp_path, stdin=BUGGY)
    assert [x["code"] for x in json.loads(r.stdout)] == ["PAL101"]
    r = cli("check", "--output-format", "concise", "-", cwd=tmp_path, stdin=BUGGY)
    assert r.stdout.startswith("-:9:34: PAL101")
    assert cli("check", "-", "x.py", cwd=tmp_path, stdin="").returncode == 2


HELPERS = '''\
from jax.experimental.pallas import tpu as pltpu


def fetch(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()
'''

LAUNCH = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pkg.helpers import fetch


def kernel(x_hbm, o_hbm, buf, sems):
    fetch(x_hbm, buf, sems)
    fetch(buf{index}, o_hbm, sems.at[0])


def run(x):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=pl.BlockSpec(memory_space=pl.ANY),
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                          pltpu.SemaphoreType.DMA((2,))])(x)
'''


def test_two_processes_find_what_one_finds_across_files(tmp_path):
    """Kernels in several files reach one helper module: its findings come
    from analyses that ran in different processes and are merged."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helpers.py").write_text(HELPERS)
    for i in range(8):
        (tmp_path / f"k{i}.py").write_text(LAUNCH.format(index="[...]" if i % 2 else ""))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "user.py").write_text(LAUNCH.format(index=""))
    args = ("check", "--no-cache", "--verbose", "--output-format", "json", "pkg",
            *(f"k{i}.py" for i in range(8)))
    one = cli(*args, cwd=tmp_path, env={"PALLAS_LSP_JOBS": "1"})
    two = cli(*args, cwd=tmp_path, env={"PALLAS_LSP_JOBS": "2"})
    assert "analysed 10 files in this process" in one.stderr
    assert "analysed 10 files in 2 processes" in two.stderr
    assert one.stdout == two.stdout
    rows = json.loads(one.stdout)
    helper = {(r["line"], r["code"]) for r in rows if r["path"] == "pkg/helpers.py"}
    assert (5, "PAL103") in helper and (5, "PAL101") in helper
    assert sum(r["path"] == "k1.py" for r in rows) == 2  # PAL103 and PAL101, at its calls


def test_small_inputs_stay_in_one_process(tmp_path):
    (tmp_path / "k.py").write_text(BUGGY)
    r = cli("check", "--no-config", "--no-cache", "--verbose", ".", cwd=tmp_path,
            env={"PALLAS_LSP_JOBS": ""})
    assert "analysed 1 files in this process" in r.stderr


def test_pre_commit_hooks_run_as_pre_commit_runs_them(tmp_path):
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"pallas-lsp-check", "pallas-lsp-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["require_serial"] is True
        assert set(hook["types_or"]) == {"python", "pyi", "jupyter"}
        assert hook["entry"].split()[:2] == ["pallas-lsp", "check"]
    (tmp_path / "pyproject.toml").write_text('[tool.pallas-lsp]\nextend-exclude = ["vendor/"]\n')
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "v.py").write_text(BUGGY)
    (tmp_path / "k.py").write_text(BUGGY)

    def run(hook_id: str, *files: str):
        # pre-commit runs `entry` + `args` + the staged file names.
        argv = shlex.split(hooks[hook_id]["entry"]) + list(hooks[hook_id].get("args", []))
        return cli(*argv[1:], *files, cwd=tmp_path)

    r = run("pallas-lsp-check", "k.py", "vendor/v.py")
    assert r.returncode == 1 and "k.py:9:34: PAL101" in r.stdout and "vendor" not in r.stdout
    assert run("pallas-lsp-check", "vendor/v.py").returncode == 0  # --force-exclude
    r = run("pallas-lsp-fix", "k.py", "vendor/v.py")
    assert r.returncode == 1 and "(1 fixed, 1 remaining)" in r.stdout
    assert "pltpu.make_async_copy(scratch, " in (tmp_path / "k.py").read_text()
    assert (tmp_path / "vendor" / "v.py").read_text() == BUGGY
    # a staged notebook (`jupyter`): its cells checked and fixed in place
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                     "outputs": [], "source": BUGGY.splitlines(True)}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "k.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    r = run("pallas-lsp-check", "k.ipynb")
    assert r.returncode == 1 and "k.ipynb:cell 1:9:34: PAL101" in r.stdout
    assert run("pallas-lsp-fix", "k.ipynb").returncode == 1
    assert "pltpu.make_async_copy(scratch, " in (tmp_path / "k.ipynb").read_text()


def test_every_code_check_and_run_print_has_a_rule_page(tmp_path):
    from pallas_lsp.check.codes import TOOL_CODES

    for code in ("E999", "E902", "E001", "PAL900", "PAL901", "PAL902", "PAL903", "PAL103"):
        r = cli("rule", code.lower(), cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith(f"# {code} ("), code
    pages = json.loads(cli("rule", "--all", "--output-format", "json", cwd=tmp_path).stdout)
    listed = {p["code"] for p in pages}
    assert set(TOOL_CODES) <= listed and {"PAL101", "PAL405"} <= listed
    # The codes the runner can emit are all among them.
    from pallas_lsp.runs import compile_mapping, model
    assert {model.CODE_FAILURE, model.CODE_RACE, model.CODE_HANG,
            compile_mapping.CODE_COMPILE} <= listed
    assert cli("rule", "PAL999", cwd=tmp_path).returncode == 2


def test_run_without_jax_says_which_extra_to_install(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=120)
    (tmp_path / "k.py").write_text("import jax\n")
    r = cli("run", "--python", str(bare / "bin" / "python"), "k.py", cwd=tmp_path)
    assert r.returncode == 2
    assert "pip install 'pallas-lsp[run]'" in r.stdout + r.stderr


def test_one_run_timeout_default_for_the_cli_and_the_editor(tmp_path):
    from pallas_lsp.lsp.settings import Settings
    from pallas_lsp.runs.runner import DEFAULT_TIMEOUT

    assert Settings().runs_timeout_s == DEFAULT_TIMEOUT
    assert f"default {DEFAULT_TIMEOUT:g}" in " ".join(cli("run", "--help", cwd=tmp_path).stdout.split())


def test_a_reader_that_stops_early_is_not_an_internal_error(tmp_path):
    """`pallas-lsp check ... | head -1`."""
    for i in range(150):  # more report than a pipe holds (64 KiB)
        (tmp_path / f"k{i}.py").write_text(BUGGY)
    proc = subprocess.Popen([sys.executable, "-m", "pallas_lsp", "check", "--no-config",
                             "--output-format", "full", "."], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PALLAS_LSP_JOBS="1"))
    assert proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "internal error" not in err and "Traceback" not in err
